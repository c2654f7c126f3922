package session

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/octogate/octogate/internal/filewatch"
)

// DefaultKeyPoll is how often a KeyFile is read again besides its directory's change events.
const DefaultKeyPoll = 10 * time.Second

// KeyFile is a KeySource read from a key file (OCTOGATE_SESSION_KEY_FILE) and reloaded when
// its directory changes (fsnotify: a Secret volume swaps its `..data` symlink, which a watch
// on the file itself would miss) and at every poll, so that every replica signs with and
// publishes the keys of the file within a poll interval of a rotation, without a restart.
// A file that does not load keeps the current keys (logged once per run of failures). Safe
// for concurrent use.
type KeyFile struct {
	path string
	poll time.Duration
	log  *slog.Logger

	current atomic.Pointer[Keys]

	mu     sync.Mutex // serializes reloads; guards the fields below
	pem    []byte
	failed bool
}

// OpenKeyFile reads path once (an error is the caller's: a server that cannot start);
// poll <= 0 means DefaultKeyPoll.
func OpenKeyFile(path string, poll time.Duration, log *slog.Logger) (*KeyFile, error) {
	if poll <= 0 {
		poll = DefaultKeyPoll
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &KeyFile{path: path, poll: poll, log: log, pem: b}
	f.current.Store(k)
	return f, nil
}

// Current is the keys of the last file that loaded.
func (f *KeyFile) Current() *Keys { return f.current.Load() }

// Reload reads the file and serves its keys when it loads and changed. It reports whether
// the keys changed.
func (f *KeyFile) Reload() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.path)
	if err == nil && bytes.Equal(b, f.pem) {
		f.failed = false
		return false
	}
	var k *Keys
	if err == nil {
		k, err = ParseKeys(b)
	}
	if err != nil {
		if !f.failed {
			f.log.Warn("session key file does not load; still signing with the previous keys", "file", f.path, "err", err)
		}
		f.failed = true
		return false
	}
	old := f.current.Load()
	f.current.Store(k)
	f.pem, f.failed = b, false
	f.log.Info("session keys reloaded", "file", f.path, "signingKey", k.KeyID(), "previousSigningKey", old.KeyID(), "publishedKeys", len(k.Public()))
	return true
}

// Start reloads on every change in the file's directory and every poll interval until ctx
// ends.
func (f *KeyFile) Start(ctx context.Context) error {
	return filewatch.Watch(ctx, filewatch.WatchConfig{Dirs: []string{filepath.Dir(f.path)}, Name: "session key", Poll: f.poll, Log: f.log},
		func() { f.Reload() })
}
