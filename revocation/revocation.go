package revocation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// DefaultName is the ConfigMap that holds recent revocations.
const DefaultName = "octogate-revocations"

// MaxEntries bounds the revocations the ConfigMap holds (about 40 bytes each, far below the
// 1 MiB object limit); beyond it the oldest are dropped first.
const MaxEntries = 10000

// MaxDataBytes bounds the ConfigMap's data (keys and values) below Kubernetes' 1 MiB object
// limit whatever the length of cluster names in "sessions." keys; beyond it the oldest
// entries are dropped first.
const MaxDataBytes = 768 << 10

// LateAfter is how old a revocation may be when it is written to the ConfigMap: one written
// later (the Kubernetes API was unreachable meanwhile) is stamped with the time of the write,
// which revokes a little more but keeps it within the feed's cursor window (CursorOverlap).
const LateAfter = time.Minute

// Evictor drops cached identities (tokenreview.Handler).
type Evictor interface {
	EvictUser(uid string, at time.Time) int
	EvictGroup(group string, at time.Time) int
}

// Revoker ends access now: Local in one process, Shared on every replica.
type Revoker interface {
	// Revoke evicts r in this process and returns how many identities it dropped.
	Revoke(ctx context.Context, r Revocation) int
}

// Local evicts in this process only.
type Local struct {
	Evictor Evictor
	// GroupPrefix is the prefix of group names ("github:"), so that Team "acme/platform"
	// evicts group "github:acme/platform".
	GroupPrefix string
	// Audience is this process's own cluster (OCTOGATE_SESSION_AUDIENCE): revocations of a
	// user's sessions limited to clusters evict here only when they name it. Empty: none do.
	Audience string
	// Teams, when set, records team revocations for session verifiers (Teams.RevokedSince).
	Teams *Teams
	// Log, when set, records every revocation for the feed (Feed).
	Log     *Log
	Metrics *Metrics
}

// Revoke implements Revoker.
func (l Local) Revoke(_ context.Context, r Revocation) int {
	n := l.applier().apply(r, r.At)
	l.Metrics.evicted("github-webhook", n)
	l.Log.Add(r)
	return n
}

// RevokeSessions implements SessionRevoker in this process only.
func (l Local) RevokeSessions(ctx context.Context, uid string, clusters []string, at time.Time) error {
	rs, err := sessionRevocations(uid, clusters, at)
	for _, r := range rs {
		l.Revoke(ctx, r)
	}
	return err
}

// Left implements LeaverMarker in this process only.
func (l Local) Left(ctx context.Context, org, uid string, at time.Time) error {
	r := Revocation{UserID: uid, LeftOrg: org, At: at}
	if !r.valid() {
		return fmt.Errorf("revocation: org %q, uid %q: want an organization login and a numeric GitHub id", org, uid)
	}
	l.Revoke(ctx, r)
	return nil
}

func (l Local) applier() applier {
	return applier{evictor: l.Evictor, prefix: l.GroupPrefix, audience: l.Audience, teams: l.Teams}
}

// applier evicts what a revocation ends in one process.
type applier struct {
	evictor  Evictor
	prefix   string
	audience string
	teams    *Teams
}

// apply evicts r as of at and returns how many cached identities it dropped: a user's
// identities (and sessions, through tokenreview.Handler.RevokedSince); a team's cached members
// and the sessions that carry its group; a user's sessions limited to clusters only when one
// is this process's audience. A leaver marker evicts nothing (the user's own revocation does).
func (a applier) apply(r Revocation, at time.Time) int {
	switch r.Kind() {
	case KindUser:
		return a.evictor.EvictUser(r.UserID, at)
	case KindSessions:
		if a.audience != "" && r.Cluster == a.audience {
			return a.evictor.EvictUser(r.UserID, at)
		}
	case KindTeam:
		a.teams.Revoke(r.Team, at)
		return a.evictor.EvictGroup(a.prefix+r.Team, at)
	}
	return 0
}

// Metrics counts evicted identities by where the revocation came from.
type Metrics struct{ c *prometheus.CounterVec }

// NewMetrics registers octogate_token_cache_evicted_identities_total{source} with reg (nil:
// not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "octogate_token_cache_evicted_identities_total",
		Help: "Cached identities dropped by revocations, by source: github-webhook (a delivery to this replica) or replica (another replica, through the revocations ConfigMap).",
	}, []string{"source"})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			c = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	for _, s := range []string{"github-webhook", "replica"} {
		c.WithLabelValues(s)
	}
	return &Metrics{c: c}, nil
}

func (m *Metrics) evicted(source string, n int) {
	if m != nil && n > 0 {
		m.c.WithLabelValues(source).Add(float64(n))
	}
}

// Config configures Shared.
type Config struct {
	Client kubernetes.Interface
	// Namespace holds the ConfigMap: the pod's namespace, or OCTOGATE_NAMESPACE.
	Namespace string
	// Name of the ConfigMap; empty: DefaultName.
	Name string
	// Keep is how long a revocation is kept and honoured: the longest an identity can be
	// served from a cache (token cache TTL + tokenreview.StaleFor).
	Keep        time.Duration
	Evictor     Evictor
	GroupPrefix string
	// Audience, Teams and Log are Local's.
	Audience string
	Teams    *Teams
	Log      *Log
	Metrics  *Metrics
	Logger   *slog.Logger
}

// Shared evicts locally and shares revocations with every replica through the ConfigMap.
type Shared struct {
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	pending map[string]time.Time // to write
	applied map[string]time.Time // seen in the ConfigMap and evicted
	wake    chan struct{}
	synced  chan struct{}
}

// NewShared validates cfg. Run must be running for revocations to leave or reach this process.
func NewShared(cfg Config) (*Shared, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("revocation: Client is nil")
	case cfg.Namespace == "":
		return nil, errors.New("revocation: Namespace is empty")
	case cfg.Evictor == nil:
		return nil, errors.New("revocation: Evictor is nil")
	case cfg.Keep <= 0:
		return nil, fmt.Errorf("revocation: Keep %v: must be positive", cfg.Keep)
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Shared{
		cfg: cfg, now: time.Now,
		pending: map[string]time.Time{}, applied: map[string]time.Time{},
		wake: make(chan struct{}, 1), synced: make(chan struct{}),
	}, nil
}

// Revoke implements Revoker: it evicts here at once, serves r on the feed (Log) and queues it
// for the ConfigMap.
func (s *Shared) Revoke(_ context.Context, r Revocation) int {
	n := s.applier().apply(r, r.At)
	s.cfg.Metrics.evicted("github-webhook", n)
	s.cfg.Log.Add(r)
	s.mu.Lock()
	k := r.key()
	if r.At.After(s.pending[k]) {
		s.pending[k] = r.At
	}
	if r.At.After(s.applied[k]) {
		s.applied[k] = r.At // this process has evicted it already
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return n
}

// RevokeSessions implements SessionRevoker: the revocations are applied here at once, served
// on this replica's feed and queued for the ConfigMap, from which every replica applies and
// serves them (Run). It returns before the ConfigMap is written; a write that fails is retried.
func (s *Shared) RevokeSessions(ctx context.Context, uid string, clusters []string, at time.Time) error {
	rs, err := sessionRevocations(uid, clusters, at)
	for _, r := range rs {
		s.Revoke(ctx, r)
	}
	return err
}

// Left implements LeaverMarker, shared with every replica as RevokeSessions is.
func (s *Shared) Left(ctx context.Context, org, uid string, at time.Time) error {
	r := Revocation{UserID: uid, LeftOrg: org, At: at}
	if !r.valid() {
		return fmt.Errorf("revocation: org %q, uid %q: want an organization login and a numeric GitHub id", org, uid)
	}
	s.Revoke(ctx, r)
	return nil
}

func (s *Shared) applier() applier {
	return applier{evictor: s.cfg.Evictor, prefix: s.cfg.GroupPrefix, audience: s.cfg.Audience, teams: s.cfg.Teams}
}

// Synced is closed once the ConfigMap has been read once.
func (s *Shared) Synced() <-chan struct{} { return s.synced }

// Run watches the ConfigMap and writes queued revocations until ctx ends.
func (s *Shared) Run(ctx context.Context) error {
	cms := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace)
	selector := fields.OneTermEqualSelector("metadata.name", s.cfg.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return cms.Watch(ctx, o)
		},
	}
	// The clientset says whether it serves streaming lists (a fake one does not).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, s.cfg.Client), &corev1.ConfigMap{}, 0, cache.Indexers{})
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { s.observe(obj, initial) },
		UpdateFunc: func(_, obj any) { s.observe(obj, false) },
	})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.RunWithContext(ctx) })
	wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			close(s.synced)
		}
	})
	s.cfg.Logger.Info("revocations are shared with every replica through a ConfigMap",
		"namespace", s.cfg.Namespace, "configmap", s.cfg.Name, "keep", s.cfg.Keep)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		if err := s.flush(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("writing revocations to the ConfigMap failed; other replicas keep cached identities until it succeeds (retrying)",
				"namespace", s.cfg.Namespace, "configmap", s.cfg.Name, "err", err)
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}

// observe evicts the ConfigMap's revocations this process has not applied yet. Live changes
// evict with the local clock's now, so that an identity a lookup is confirming right now is
// not cached either; revocations read at start are honoured from their recorded time if they
// are younger than Keep.
func (s *Shared) observe(obj any, initial bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name != s.cfg.Name {
		return
	}
	now := s.now()
	s.mu.Lock()
	var todo []Revocation
	for k, v := range cm.Data {
		at, err := time.Parse(time.RFC3339, v)
		if err != nil || now.Sub(at) > s.cfg.Keep {
			continue
		}
		if prev, ok := s.applied[k]; ok && !at.After(prev.Truncate(time.Second)) {
			continue
		}
		r, ok := parseKey(k)
		if !ok {
			continue
		}
		s.applied[k] = at
		r.At = at
		// Served on the feed with the recorded time: every replica then serves the same SET
		// (its jti is derived from the key and the time).
		s.cfg.Log.Add(r)
		if !initial {
			r.At = now
		}
		todo = append(todo, r)
	}
	for k, at := range s.applied {
		if now.Sub(at) > s.cfg.Keep {
			delete(s.applied, k)
		}
	}
	s.mu.Unlock()
	n := 0
	a := s.applier()
	for _, r := range todo {
		n += a.apply(r, r.At)
	}
	s.cfg.Metrics.evicted("replica", n)
	if len(todo) > 0 {
		s.cfg.Logger.Info("revocations from another replica applied", "revocations", len(todo), "evicted", n, "initial", initial)
	}
}

// flush merges the pending revocations into the ConfigMap, pruning old entries.
func (s *Shared) flush(ctx context.Context) error {
	s.mu.Lock()
	batch := maps.Clone(s.pending)
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	cms := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, s.cfg.Name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return err
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Name, Namespace: s.cfg.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "octogate"}}}
		}
		cm.Data = merge(cm.Data, batch, s.now(), s.cfg.Keep)
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.cfg.Name, err)
			}
			return err
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for k, at := range batch {
		if !s.pending[k].After(at) {
			delete(s.pending, k)
		}
	}
	s.mu.Unlock()
	return nil
}

// merge adds batch to data (the later time wins), drops entries older than keep and, beyond
// MaxEntries, the oldest.
func merge(data map[string]string, batch map[string]time.Time, now time.Time, keep time.Duration) map[string]string {
	times := map[string]time.Time{}
	for k, v := range data {
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			times[k] = at
		}
	}
	for k, at := range batch {
		if now.Sub(at) > LateAfter {
			at = now
		}
		at = at.Truncate(time.Second)
		if at.After(times[k]) {
			times[k] = at
		}
	}
	keys := slices.Collect(maps.Keys(times))
	slices.SortFunc(keys, func(a, b string) int { return times[b].Compare(times[a]) })
	out := make(map[string]string, min(len(keys), MaxEntries))
	size := 0
	for _, k := range keys {
		v := times[k].UTC().Format(time.RFC3339)
		size += len(k) + len(v)
		if len(out) == MaxEntries || size > MaxDataBytes || now.Sub(times[k]) > keep {
			break
		}
		out[k] = v
	}
	return out
}
