package credential

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// ErrLockTimeout is wrapped when another `octogate credential` held the login lock for longer
// than Config.LockTimeout.
var ErrLockTimeout = errors.New("timed out waiting for another octogate credential")

// DefaultLockTimeout bounds the wait for another run that is logging in: a little more than a
// GitHub device code lives (15 minutes), so a waiter outlasts any login in progress.
const DefaultLockTimeout = 16 * time.Minute

// lockRetry is how often a waiting run tries the lock again.
const lockRetry = 50 * time.Millisecond

// lock takes the exclusive lock beside the cache file (flock(2) on Unix, LockFileEx on
// Windows, through github.com/gofrs/flock), so that concurrent runs make one login or one
// refresh and the others reuse its result. The operating system releases it when the process
// dies, so a crashed run never leaves a stale lock. The lock file must be safe (checkPrivate).
// When the lock is busy it says once on Prompt that it waits, and gives up after
// Config.LockTimeout with ErrLockTimeout. unlock releases it; the file stays for the next run.
func (p *Plugin) lock(ctx context.Context, cache string) (unlock func(), err error) {
	path := lockPath(cache)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("token cache directory: %w", err)
	}
	if err := checkPrivate(path, p.uid); err != nil {
		return nil, err
	}
	fl := flock.New(path, flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: another octogate credential is logging in to GitHub; waiting for it (up to %s)\n", p.cfg.LockTimeout)
		wctx, cancel := context.WithTimeout(ctx, p.cfg.LockTimeout)
		defer cancel()
		ok, err = fl.TryLockContext(wctx, lockRetry)
		switch {
		case ok:
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return nil, fmt.Errorf("%w to log in after %s (it holds %s); finish or stop that login and run the command again",
				ErrLockTimeout, p.cfg.LockTimeout, path)
		case err != nil:
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	// flock created the file with 0600 less the umask; refuse one that someone swapped in.
	if err := checkPrivate(path, p.uid); err != nil {
		_ = fl.Unlock()
		return nil, err
	}
	return func() { _ = fl.Unlock() }, nil
}
