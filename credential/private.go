package credential

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUnsafeFile is wrapped when a token cache or lock file could be read or swapped by someone
// else: it is not a regular file, not owned by the user running the plugin, or its mode is not
// 0600; or when its directory, or one above it, is someone else's or writable by others
// (checkCacheDir). The error names the file (or directory) and the one command that fixes it
// (chmod 600 PATH for a mode, chmod go-w DIR for a directory, rm PATH otherwise); the plugin
// never repairs or deletes it on its own, because a file it did not make may be an attack
// (another user's file in a shared cache directory).
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

// checkCacheDir refuses a cache directory in which someone else could swap the token and lock
// files (ErrUnsafeFile naming the directory and the fix). The directory, and every existing
// directory above it up to the user's home directory (up to / when it is not under home),
// symbolic links resolved, must belong to uid or to root and must not be writable by group or
// others; above the cache directory a sticky directory such as /tmp is accepted, as there
// others can neither rename nor remove what they do not own. A missing cache directory is
// checked from its first existing parent (the plugin creates it with mode 0700). This is
// OpenSSH's StrictModes rule for ~/.ssh (safe_path in misc.c). On systems without Unix owners
// (Windows) nothing is checked.
func checkCacheDir(dir string, uid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%w: cache directory %s: %w", ErrUnsafeFile, dir, err)
	}
	existing := abs
	for {
		_, err := os.Stat(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: cache directory: %w", ErrUnsafeFile, err)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return nil
		}
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return fmt.Errorf("%w: cache directory: %w", ErrUnsafeFile, err)
	}
	home := ""
	if h, err := os.UserHomeDir(); err == nil {
		if h, err = filepath.EvalSymlinks(h); err == nil {
			home = h
		}
	}
	for cur := resolved; ; {
		fi, err := os.Stat(cur)
		if err != nil {
			return fmt.Errorf("%w: cache directory: %w", ErrUnsafeFile, err)
		}
		owner, known := fileOwner(fi)
		if !known {
			return nil
		}
		if owner != uid && owner != 0 {
			return fmt.Errorf("%w: directory %s, which holds the token cache %s, belongs to uid %d, not to you (uid %d) or root: "+
				"its owner could replace the cached tokens; use a cache directory of your own (XDG_CACHE_HOME)", ErrUnsafeFile, cur, abs, owner, uid)
		}
		self := existing == abs && cur == resolved
		if perm := fi.Mode().Perm(); perm&0o022 != 0 && (self || fi.Mode()&fs.ModeSticky == 0) {
			return fmt.Errorf("%w: directory %s, which holds the token cache %s, is writable by group or others (mode %#o): "+
				"they could replace the cached tokens; fix it with: chmod go-w %s", ErrUnsafeFile, cur, abs, perm, shellQuote(cur))
		}
		parent := filepath.Dir(cur)
		if cur == home || parent == cur {
			return nil
		}
		cur = parent
	}
}
