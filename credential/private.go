package credential

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrUnsafeFile is wrapped when a token cache or lock file could be read or swapped by someone
// else: it is not a regular file, not owned by the user running the plugin, or its mode is not
// 0600. The error names the file and the one command that fixes it (chmod 600 PATH for a mode,
// rm PATH otherwise); the plugin never repairs or deletes it on its own, because a file it did
// not make may be an attack (another user's file in a shared cache directory).
var ErrUnsafeFile = errors.New("unsafe token file")

// checkPrivate accepts a missing path, or a regular file owned by uid with mode 0600. On
// systems without Unix owners (Windows), only the file type is checked.
func checkPrivate(path string, uid int) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafeFile, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%s); remove it with: rm %s", ErrUnsafeFile, path, fi.Mode().Type(), shellQuote(path))
	}
	owner, known := fileOwner(fi)
	if !known {
		return nil
	}
	if owner != uid {
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d); remove it with: rm %s", ErrUnsafeFile, path, owner, uid, shellQuote(path))
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		return fmt.Errorf("%w: %s has mode %#o, want 0600 (only you may read a GitHub token); fix it with: chmod 600 %s", ErrUnsafeFile, path, perm, shellQuote(path))
	}
	return nil
}
