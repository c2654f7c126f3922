// Package filewatch reloads files mounted from Kubernetes volumes (ConfigMaps, Secrets): it
// watches the file's directory (a ConfigMap update swaps the `..data` symlink the file resolves
// through, a rename the file itself never sees), re-checks on a timer in case an event is
// missed, and hands each new content to the owner once. The policy (subjectaccessreview) and
// the namespace templates (namespacetemplate) reload through File; the serving certificate
// (webhooks) and the session keys (session) read their own files from Watch's calls.
package filewatch

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// QuietPeriod is how long after the last event in the directory the file is read, so a burst
// of events (write, chmod, the symlink swap) makes one reload.
const QuietPeriod = 100 * time.Millisecond

// File is one watched file. Apply and Failed run on Run's goroutine only.
type File struct {
	// Path of the file.
	Path string
	// Name says what the file holds in log lines, e.g. "policy".
	Name string
	// Poll is the interval of the periodic check (must be positive).
	Poll time.Duration
	// Apply takes new content; an error keeps the previous content in force and is logged.
	Apply func(data []byte) error
	// Failed is called once per unreadable or invalid content (for a reload error counter).
	Failed func()
	// Log receives one line per reload failure and a warning when the directory cannot be
	// watched.
	Log *slog.Logger

	lastSeen string
}

// Seen records content already applied (the load at start), so Run does not apply it again.
func (f *File) Seen(data []byte) { f.lastSeen = contentKey(data) }

// Run watches the file until ctx is done. It checks the file once at start.
func (f *File) Run(ctx context.Context) error {
	f.Check()
	return Watch(ctx, WatchConfig{Dirs: []string{filepath.Dir(f.Path)}, Name: f.Name, Poll: f.Poll, Log: f.Log}, f.Check)
}

// WatchConfig says what Watch watches.
type WatchConfig struct {
	// Dirs are the directories whose events call check (files of a Kubernetes volume are
	// replaced by a `..data` symlink swap in their directory, an event the files never see).
	Dirs []string
	// Name says what is watched in log lines, e.g. "serving certificate".
	Name string
	// Poll is the interval of the periodic check (must be positive): events only make a
	// reload faster, the poll makes it certain.
	Poll time.Duration
	Log  *slog.Logger
}

// Watch calls check QuietPeriod after the last event in cfg.Dirs and every cfg.Poll, on its
// own goroutine, until ctx is done. A directory that cannot be watched is logged once as a
// warning and left to the poll.
func Watch(ctx context.Context, cfg WatchConfig, check func()) error {
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		cfg.Log.Warn("cannot watch the "+cfg.Name+" directory; checking periodically only", "dirs", cfg.Dirs, "err", err)
	} else {
		defer func() { _ = watcher.Close() }()
		for _, dir := range cfg.Dirs {
			if err := watcher.Add(dir); err != nil {
				cfg.Log.Warn("cannot watch the "+cfg.Name+" directory; checking periodically only", "dir", dir, "err", err)
			}
		}
		events, watchErrs = watcher.Events, watcher.Errors
	}
	poll := time.NewTicker(cfg.Poll)
	defer poll.Stop()
	quiet := time.NewTimer(QuietPeriod)
	quiet.Stop()
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
			// Any event in the directory may concern the files: their own write or rename, or a
			// volume update renaming the ..data symlink that they resolve through.
			quiet.Reset(QuietPeriod)
		case err := <-watchErrs:
			cfg.Log.Warn(cfg.Name+" directory watch error", "dirs", cfg.Dirs, "err", err)
		case <-quiet.C:
			check()
		case <-poll.C:
			check()
		}
	}
}

// Check applies the file if its content changed since it was last considered (applied or
// refused). An unreadable file counts once per distinct error.
func (f *File) Check() {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		if key := "error: " + err.Error(); key != f.lastSeen {
			f.lastSeen = key
			f.Failed()
			f.Log.Error(f.Name+" file unreadable; keeping the previous "+f.Name, "file", f.Path, "err", err)
		}
		return
	}
	key := contentKey(data)
	if key == f.lastSeen {
		return
	}
	f.lastSeen = key
	if err := f.Apply(data); err != nil {
		f.Failed()
		f.Log.Error(f.Name+" file invalid; keeping the previous "+f.Name, "file", f.Path, "err", err)
	}
}

func contentKey(data []byte) string {
	sum := sha256.Sum256(data)
	return string(sum[:])
}
