package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/octogate/octogate/certs"
)

// certReloader serves a serving certificate read from a certificate and a key file, reloaded
// when their directory changes (fsnotify) and at every poll. Both files are read as one
// version (certs.ReadPair: one resolution of the `..data` symlink of Secret volumes and of
// `octogate certs` directories). A pair that does not load keeps the current certificate and
// is retried at the next event or poll; it is logged only once it has failed for a whole poll
// interval, because a writer that replaces the two files one after the other shows a key of
// the other certificate for a moment.
type certReloader struct {
	certFile, keyFile string
	poll              time.Duration
	log               *slog.Logger
	onLoad            func(tls.Certificate)
	now               func() time.Time

	mu        sync.RWMutex
	current   *tls.Certificate
	certPEM   []byte
	keyPEM    []byte
	failingAt time.Time // first failed read of the current run of failures; zero when the last read loaded
	logged    bool      // the current run of failures was logged
}

// newCertReloader reads the pair once; an error there is the caller's (a server that cannot
// start). onLoad is called, synchronously, after each load that changed the certificate
// (not the first).
func newCertReloader(certFile, keyFile string, poll time.Duration, log *slog.Logger, onLoad func(tls.Certificate)) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, poll: poll, log: log, onLoad: onLoad, now: time.Now}
	certPEM, keyPEM, pair, err := certs.ReadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.current, r.certPEM, r.keyPEM = &pair, certPEM, keyPEM
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.current, nil
}

// reload reads the pair and serves it when it loads and differs from the current one.
func (r *certReloader) reload() {
	certPEM, keyPEM, pair, err := certs.ReadPair(r.certFile, r.keyFile)
	r.mu.Lock()
	if err != nil {
		now := r.now()
		if r.failingAt.IsZero() {
			r.failingAt = now
		}
		persists := !r.logged && now.Sub(r.failingAt) >= r.poll
		r.logged = r.logged || persists
		r.mu.Unlock()
		if persists {
			r.log.Warn("serving certificate files do not load; still serving the previous certificate",
				"cert", r.certFile, "key", r.keyFile, "since", r.failingAt, "err", err)
		}
		return
	}
	r.failingAt, r.logged = time.Time{}, false
	if bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM) {
		r.mu.Unlock()
		return
	}
	r.current, r.certPEM, r.keyPEM = &pair, certPEM, keyPEM
	r.mu.Unlock()
	r.onLoad(pair)
}

// Start reloads on every change in the files' directories and every poll interval until ctx
// ends. Directories rather than files are watched: a `..data` swap renames a symlink in the
// directory and never writes the files a watch on them would follow.
func (r *certReloader) Start(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("webhooks: watching %s: %w", r.certFile, err)
	}
	defer func() { _ = w.Close() }()
	for _, dir := range []string{filepath.Dir(r.certFile), filepath.Dir(r.keyFile)} {
		if err := w.Add(dir); err != nil && !errors.Is(err, fsnotify.ErrClosed) {
			// Polling still reloads; the events only make it faster.
			r.log.Warn("serving certificate directory not watched; reloading every poll interval only", "dir", dir, "err", err)
		}
	}
	tick := time.NewTicker(r.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.reload()
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			r.reload()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Debug("serving certificate watch error", "err", err)
		}
	}
}
