package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/filewatch"
	"github.com/octogate/octogate/internal/promreg"
)

// DefaultPoll is how often the clusters file is re-read besides its directory's events.
const DefaultPoll = 2 * time.Second

// Config configures New.
type Config struct {
	// File is OCTOGATE_SESSION_CLUSTERS_FILE; empty: only Audiences.
	File string
	// Audiences are OCTOGATE_SESSION_AUDIENCES: clusters every person the issuer accepts may
	// use, known by name only. The clusters served are the union of these and File's; a name
	// in both is File's cluster, whose subjects apply (the list never widens who may use it).
	Audiences []string
	// Poll is the file's periodic re-read (default DefaultPoll).
	Poll time.Duration
	// Logger receives reloads and refused reloads.
	Logger *slog.Logger
	// Registerer gets octogate_session_clusters_reload_errors_total; nil: not registered.
	Registerer prometheus.Registerer
}

// Store is the clusters in force: Audiences and the last valid content of File. A changed
// file that is unreadable or invalid is logged and counted, and the previous clusters stay in
// force. Safe for concurrent use.
type Store struct {
	audiences    []string
	current      atomic.Pointer[clusterSet]
	file         *filewatch.File
	log          *slog.Logger
	reloadErrors prometheus.Counter
}

type clusterSet struct {
	byName map[string]Cluster
	names  []string // sorted
}

// New loads cfg.File (an error names the file and each bad field's path) and merges
// cfg.Audiences. At least one cluster is required.
func New(cfg Config) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{log: log.With("component", "fleet"),
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octogate_session_clusters_reload_errors_total",
			Help: "Session clusters file changes that were refused (unreadable or invalid); the previous clusters stay in force.",
		})}
	for _, a := range cfg.Audiences {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(s.audiences, a) {
			s.audiences = append(s.audiences, a)
		}
	}
	if cfg.Registerer != nil {
		c, err := promreg.Register(cfg.Registerer, s.reloadErrors)
		if err != nil {
			return nil, fmt.Errorf("Registerer: %w", err) //nolint:staticcheck // ST1005: Registerer is the Config field
		}
		s.reloadErrors = c
	}
	var doc *SessionClusters
	if cfg.File != "" {
		data, err := os.ReadFile(cfg.File)
		if err != nil {
			return nil, fmt.Errorf("File: %w", err) //nolint:staticcheck // ST1005: File is the Config field
		}
		if doc, err = Parse(data); err != nil {
			return nil, fmt.Errorf("File %s: %w", cfg.File, err) //nolint:staticcheck // ST1005: File is the Config field
		}
		poll := cfg.Poll
		if poll <= 0 {
			poll = DefaultPoll
		}
		s.file = &filewatch.File{Path: cfg.File, Name: "session clusters", Poll: poll, Apply: s.apply, Failed: s.reloadErrors.Inc, Log: s.log}
		s.file.Seen(data)
	}
	set := s.merge(doc)
	if len(set.names) == 0 {
		return nil, errors.New("no clusters: set Audiences or File")
	}
	s.current.Store(set)
	return s, nil
}

func (s *Store) apply(data []byte) error {
	doc, err := Parse(data)
	if err != nil {
		return err
	}
	set := s.merge(doc)
	s.current.Store(set)
	s.log.Info("session clusters loaded", "file", s.file.Path, "clusters", set.names)
	return nil
}

func (s *Store) merge(doc *SessionClusters) *clusterSet {
	set := &clusterSet{byName: map[string]Cluster{}}
	for _, a := range s.audiences {
		set.byName[a] = Cluster{Name: a}
	}
	if doc != nil {
		for _, c := range doc.Clusters {
			set.byName[c.Name] = c
		}
	}
	for n := range set.byName {
		set.names = append(set.names, n)
	}
	sort.Strings(set.names)
	return set
}

// Run reloads the file when it changes, until ctx is done. Without a file it returns at once.
func (s *Store) Run(ctx context.Context) error {
	if s.file == nil {
		return nil
	}
	return s.file.Run(ctx)
}

// Names are the names of the clusters in force, sorted.
func (s *Store) Names() []string { return slices.Clone(s.current.Load().names) }

// Serves reports whether audience names a cluster in force.
func (s *Store) Serves(audience string) bool {
	_, ok := s.current.Load().byName[audience]
	return ok
}

// Allows is Allowed for the cluster named audience; false when there is none.
func (s *Store) Allows(audience, user string, groups []string) bool {
	c, ok := s.current.Load().byName[audience]
	return ok && Allowed(c, user, groups)
}

// For are the clusters the person user, with groups, may use, sorted by name. A cluster known
// only from Audiences has only its name.
func (s *Store) For(user string, groups []string) []Cluster {
	set := s.current.Load()
	var out []Cluster
	for _, n := range set.names {
		if c := set.byName[n]; Allowed(c, user, groups) {
			out = append(out, c)
		}
	}
	return out
}
