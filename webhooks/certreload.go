package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/filewatch"
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
	dirs := []string{filepath.Dir(r.certFile)}
	if d := filepath.Dir(r.keyFile); d != dirs[0] {
		dirs = append(dirs, d)
	}
	return filewatch.Watch(ctx, filewatch.WatchConfig{Dirs: dirs, Name: "serving certificate", Poll: r.poll, Log: r.log}, r.reload)
}

// ServingCertificate is a TLS serving certificate read from a certificate and a key file and
// reloaded as the webhook server's own is (one read of both files per version, directory
// events and a poll, the previous certificate kept while new files do not load), for the
// process's other TLS listeners (the proxy).
type ServingCertificate struct{ r *certReloader }

// NewServingCertificate reads the pair once: an error (unreadable, not PEM, key not matching)
// is returned and nothing is served. name is the listener's, in log lines.
func NewServingCertificate(name, certFile, keyFile string, log *slog.Logger) (*ServingCertificate, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r, err := newCertReloader(certFile, keyFile, certPollInterval, log, func(c tls.Certificate) {
		if c.Leaf != nil {
			log.Info("serving certificate loaded", "listener", name, "cert", certFile,
				"subject", c.Leaf.Subject.String(), "serial", c.Leaf.SerialNumber.String(), "notAfter", c.Leaf.NotAfter)
		}
	})
	if err != nil {
		return nil, err
	}
	return &ServingCertificate{r}, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (c *ServingCertificate) GetCertificate(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.r.GetCertificate(h)
}

// Run reloads the pair on changes until ctx ends, then returns nil.
func (c *ServingCertificate) Run(ctx context.Context) error { return c.r.Start(ctx) }
