package namespacetemplate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/filewatch"
)

// Reload timing, as for the authorization policy: fsnotify events are acted on after a
// short quiet period, and the file's hash is compared every PollInterval besides.
const (
	DefaultPollInterval = 2 * time.Second
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// File is the templates file (OCTOGATE_NAMESPACE_TEMPLATES_FILE); required.
	File string
	// Logger receives reload messages; nil discards them.
	Logger *slog.Logger
	// Registerer gets octogate_template_reload_errors_total; nil: not registered.
	Registerer prometheus.Registerer
	// PollInterval is how often the file's content is compared; 0 is DefaultPollInterval.
	PollInterval time.Duration
}

// Store holds the templates in force and keeps them in step with their file.
type Store struct {
	path         string
	log          *slog.Logger
	current      atomic.Pointer[Templates]
	reloadErrors prometheus.Counter
	file         *filewatch.File

	mu       sync.Mutex
	watchers []func(*Templates)
}

// NewStore loads cfg.File. A file that cannot be read or is invalid is an error naming it
// and the offending fields.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.File == "" {
		return nil, errors.New("namespacetemplate: File is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		path: cfg.File,
		log:  log.With("component", "namespacetemplate"),
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octogate_template_reload_errors_total",
			Help: "Namespace templates file changes that were refused (unreadable or invalid); the previous templates stay in force.",
		}),
	}
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.reloadErrors); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("namespacetemplate: registering octogate_template_reload_errors_total: %w", err)
			}
			c, ok := are.ExistingCollector.(prometheus.Counter)
			if !ok {
				return nil, fmt.Errorf("namespacetemplate: octogate_template_reload_errors_total registered with another type: %w", err)
			}
			s.reloadErrors = c
		}
	}
	data, err := os.ReadFile(cfg.File)
	if err != nil {
		return nil, fmt.Errorf("NamespaceTemplatesFile: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("NamespaceTemplatesFile %s: %w", cfg.File, err)
	}
	s.current.Store(t)
	s.log.Info("namespace templates loaded", "file", cfg.File, "templates", len(t.List()))
	s.file = &filewatch.File{Path: cfg.File, Name: "namespace templates", Poll: poll, Apply: s.apply, Failed: s.reloadErrors.Inc, Log: s.log}
	s.file.Seen(data)
	return s, nil
}

// Templates returns the templates in force.
func (s *Store) Templates() *Templates { return s.current.Load() }

// MayCreateNamespace reports whether c may create a namespace called name under the templates
// in force: the name is not reserved, a template fits c and its name patterns allow name. The
// authorizer lets such a creator get a namespace of that name that does not exist yet, as
// `kubectl apply` does before it creates.
func (s *Store) MayCreateNamespace(name string, c Creator) bool {
	t := s.Templates()
	if t == nil || Reserved(name) != "" {
		return false
	}
	tpl := t.Select(c)
	return tpl != nil && tpl.NameAllowed(name, c)
}

// OnChange registers f, called (from Run's goroutine) with the new templates after each
// successful reload. Register before Run.
func (s *Store) OnChange(f func(*Templates)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, f)
}

// Run keeps the templates in step with the file until ctx is done, then returns nil: it
// watches the file's directory (in-place writes, renames, ConfigMap ..data symlink swaps)
// and compares the content every PollInterval. An unreadable or invalid file keeps the
// previous templates, is logged and counted once per distinct content.
func (s *Store) Run(ctx context.Context) error { return s.file.Run(ctx) }

// apply puts new file content in force and tells the watchers; invalid content is an error.
func (s *Store) apply(data []byte) error {
	t, err := Parse(data)
	if err != nil {
		return err
	}
	s.current.Store(t)
	s.log.Info("namespace templates reloaded", "file", s.path, "templates", len(t.List()))
	s.mu.Lock()
	watchers := append([]func(*Templates){}, s.watchers...)
	s.mu.Unlock()
	for _, f := range watchers {
		f(t)
	}
	return nil
}
