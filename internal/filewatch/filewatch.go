// Package filewatch reloads a configuration file mounted from a Kubernetes ConfigMap: it
// watches the file's directory (a ConfigMap update swaps the `..data` symlink the file resolves
// through, a rename the file itself never sees), re-checks on a timer in case an event is
// missed, and hands each new content to the owner once. The policy (subjectaccessreview) and
// the namespace templates (namespacetemplate) reload through it.
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
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	watcher, err := fsnotify.NewWatcher()
	if err == nil {
		if err = watcher.Add(filepath.Dir(f.Path)); err != nil {
			_ = watcher.Close()
		}
	}
	if err != nil {
		f.Log.Warn("cannot watch the "+f.Name+" directory; checking the file periodically only", "file", f.Path, "err", err)
	} else {
		defer func() { _ = watcher.Close() }()
		events, watchErrs = watcher.Events, watcher.Errors
	}
	poll := time.NewTicker(f.Poll)
	defer poll.Stop()
	quiet := time.NewTimer(QuietPeriod)
	quiet.Stop()
	defer quiet.Stop()

	f.Check()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
			// Any event in the directory may concern the file: its own write or rename, or a
			// ConfigMap swap renaming the ..data symlink that the file resolves through.
			quiet.Reset(QuietPeriod)
		case err := <-watchErrs:
			f.Log.Warn(f.Name+" directory watch error", "file", f.Path, "err", err)
		case <-quiet.C:
			f.Check()
		case <-poll.C:
			f.Check()
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
