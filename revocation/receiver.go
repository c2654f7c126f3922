package revocation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/jwks"
	"github.com/octogate/octogate/session"
)

// PollTimeout bounds one poll, a long one included: a feed cut off without a TCP reset (packets
// dropped) is noticed when it passes.
const PollTimeout = DefaultLongPoll + 10*time.Second

// DefaultMaxStaleness is OCTOGATE_SESSION_FEED_MAX_STALENESS's default: the default session
// lifetime (OCTOGATE_SESSION_TTL). A verifier that has not read its issuer's feed for longer
// refuses sessions (session_feed_stale) rather than let a revocation wait for them to expire.
const DefaultMaxStaleness = 5 * time.Minute

// maxAnswerBytes bounds a poll's answer a receiver reads.
const maxAnswerBytes = MaxEventsPerPoll*MaxEventBytes/4 + 64<<10

// MinPollInterval is the least time between the starts of a receiver's polls in Run, so that a
// feed answering long polls at once is not polled in a loop; within the fleet's 2 s bound.
const MinPollInterval = 500 * time.Millisecond

// maxRounds bounds the polls pollOnce makes while the feed says more is available: a log the
// issuer holds takes about MaxEntries/MaxEventsPerPoll of them; a feed that always says more
// is polled again by Run, not recursively.
const maxRounds = 4 * MaxEntries / MaxEventsPerPoll

// maxSeen bounds the jtis a receiver keeps and acknowledges: below the feed's MaxAcks, so that a
// burst of revocations within CursorOverlap never makes its polls too large to be answered.
const maxSeen = MaxAcks / 2

// Orphaner orphans the namespaces of a leaver (ownership.Orphaner.OrphanUnlessGivenBack: a
// namespace an admin gave back stays given back).
type Orphaner interface {
	OrphanUnlessGivenBack(ctx context.Context, uid, reason string) (int, error)
}

// ReceiverConfig configures NewReceiver.
type ReceiverConfig struct {
	// Issuer is the trusted issuer (OCTOGATE_SESSION_TRUST_ISSUER): its feed is found from
	// <issuer>/.well-known/ssf-configuration, its keys from its OpenID discovery.
	Issuer string
	// Audience is this cluster (OCTOGATE_SESSION_AUDIENCE): revocations limited to clusters
	// apply here only when they name it.
	Audience string
	// Client reads the issuer's documents and keys (jwks.HTTPClient with
	// OCTOGATE_SESSION_TRUST_CA_FILE); polls use a copy with PollTimeout.
	Client *http.Client
	// Evictor, GroupPrefix and Teams apply revocations as the issuer's replicas do.
	Evictor     Evictor
	GroupPrefix string
	Teams       *Teams
	// Orphaner, when set (the ownership controller runs), orphans leavers' namespaces.
	Orphaner Orphaner
	// MaxStaleness: past it without reading the feed, Stale reports true. 0: never.
	MaxStaleness time.Duration
	Metrics      *Metrics
	Registerer   prometheus.Registerer
	Logger       *slog.Logger
}

// Receiver long-polls a remote issuer's revocation feed and applies what it reads: evictions
// in the GitHub token cache, team revocations for the session verifier, orphaning of leavers'
// namespaces. It remembers the jtis it applied (for CursorOverlap past the newest) and sends
// them as ack with its cursor since, so that the issuer, which keeps nothing per receiver,
// answers only what is new. Safe for concurrent use; Run runs once.
type Receiver struct {
	cfg    ReceiverConfig
	aud    string
	keys   *jwks.Remote
	poller *http.Client
	// docTimeout bounds reading one discovery document: the client's timeout, or 5 s.
	docTimeout time.Duration
	now        func() time.Time
	started    time.Time
	lastSync   atomic.Int64 // Unix nanoseconds of the last answered poll; 0: none
	polling    atomic.Int64 // Unix nanoseconds a poll started after a good one; 0: none
	metrics    receiverMetrics
	orphans    chan Revocation
	endpoint   string
	seen       map[string]time.Time // jti -> event time
	applied    int                  // new revocations the last pollOnce applied
}

type receiverMetrics struct {
	lastSuccess prometheus.Gauge
	errors      prometheus.Counter
	events      *prometheus.CounterVec
}

// NewReceiver validates cfg and registers the feed's metrics.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	switch {
	case session.ValidIssuer(cfg.Issuer) != nil:
		return nil, fmt.Errorf("revocation: Issuer %q: not an https issuer URL", cfg.Issuer)
	case cfg.Audience == "":
		return nil, errors.New("revocation: Audience is empty")
	case cfg.Client == nil || cfg.Evictor == nil:
		return nil, errors.New("revocation: Client and Evictor are required")
	case cfg.MaxStaleness < 0:
		return nil, errors.New("revocation: MaxStaleness must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	issuer := strings.TrimSuffix(cfg.Issuer, "/")
	cfg.Issuer = issuer
	// The feed is read from the issuer's own origin only: a redirect (to another host, or to
	// http://) is an error, not followed, so that whoever answers the issuer's URL with a 3xx
	// cannot serve a feed that keeps this verifier fresh while it withholds revocations.
	client := *cfg.Client
	client.CheckRedirect = refuseRedirect
	cfg.Client = &client
	poller := client
	poller.Timeout = PollTimeout
	m, err := newReceiverMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Client.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	r := &Receiver{cfg: cfg, aud: StreamAudience(issuer), poller: &poller, docTimeout: timeout, now: time.Now, metrics: m,
		keys:    &jwks.Remote{Issuer: issuer, Client: cfg.Client, Type: jwks.EC, Timeout: timeout, MinRefresh: session.MinRefreshInterval, Now: time.Now},
		orphans: make(chan Revocation, 1024), seen: map[string]time.Time{}}
	r.started = r.now()
	return r, nil
}

// refuseRedirect is an http.Client's CheckRedirect that follows no redirect: the 3xx answer
// is returned as it is.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func newReceiverMetrics(reg prometheus.Registerer) (receiverMetrics, error) {
	m := receiverMetrics{
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "octogate_session_feed_last_success_timestamp_seconds",
			Help: "Unix time of the last poll of the trusted issuer's revocation feed that was answered (0: none since start)."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "octogate_session_feed_poll_errors_total",
			Help: "Polls of the trusted issuer's revocation feed (discovery included) that failed."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "octogate_session_feed_events_total",
			Help: "Revocation events read from the trusted issuer's feed, by kind (user, team, sessions, leaver, other) and result (applied, skipped, invalid)."},
			[]string{"kind", "result"}),
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range []prometheus.Collector{m.lastSuccess, m.errors, m.events} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return m, err
			}
			switch i {
			case 0:
				m.lastSuccess = are.ExistingCollector.(prometheus.Gauge)
			case 1:
				m.errors = are.ExistingCollector.(prometheus.Counter)
			case 2:
				m.events = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return m, nil
}

// Stale reports whether the feed has not been read for longer than MaxStaleness (never with
// MaxStaleness 0), and when it was last read (zero: never). A long poll in flight after an
// answered one counts as reading until PollTimeout. Two atomic loads: the session verifier
// calls it on every use.
func (r *Receiver) Stale(now time.Time) (lastSync time.Time, stale bool) {
	last := r.lastSync.Load()
	if last != 0 {
		lastSync = time.Unix(0, last)
	}
	if r.cfg.MaxStaleness == 0 {
		return lastSync, false
	}
	if p := r.polling.Load(); p != 0 && now.Sub(time.Unix(0, p)) < PollTimeout {
		return lastSync, false
	}
	ref := r.started
	if last != 0 {
		ref = lastSync
	}
	return lastSync, now.Sub(ref) > r.cfg.MaxStaleness
}

// Detail is the feed's state for /readyz: "" when fresh, else why not. It never fails
// readiness (see docs/revocation.md).
func (r *Receiver) Detail() string {
	last, stale := r.Stale(r.now())
	switch {
	case stale:
		return fmt.Sprintf("revocation feed of %s not read since %s: sessions are refused (session_feed_stale)", r.cfg.Issuer, when(last))
	case last.IsZero():
		return fmt.Sprintf("revocation feed of %s not read yet", r.cfg.Issuer)
	case r.polling.Load() == 0:
		return fmt.Sprintf("revocation feed of %s unreachable, last read %s", r.cfg.Issuer, when(last))
	}
	return ""
}

func when(t time.Time) string {
	if t.IsZero() {
		return "start"
	}
	return t.UTC().Format(time.RFC3339)
}

// Run polls the feed until ctx ends. A failure is logged once, with the first error, and its
// recovery once; polls are retried every second up to every 5 s meanwhile.
func (r *Receiver) Run(ctx context.Context) error {
	go r.orphanLoop(ctx)
	healthy, failures := true, 0
	var lastErr error
	immediately := true
	for ctx.Err() == nil {
		start := r.now()
		err := r.pollOnce(ctx, immediately)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.polling.Store(0)
			r.metrics.errors.Inc()
			failures++
			if healthy {
				healthy = false
				r.cfg.Logger.Error("the trusted issuer's revocation feed cannot be read; revocations wait until it can",
					"issuer", r.cfg.Issuer, "maxStaleness", r.cfg.MaxStaleness, "err", err)
			}
			lastErr = err
			immediately = true
			t := time.NewTimer(min(time.Duration(failures)*time.Second, 5*time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		if !healthy {
			r.cfg.Logger.Info("the trusted issuer's revocation feed is read again", "issuer", r.cfg.Issuer,
				"failedPolls", failures, "lastError", errText(lastErr))
			healthy = true
		}
		failures, immediately = 0, false
		// A feed that answers a long poll at once with nothing new (an issuer with every long
		// poll slot taken, or one that misbehaves) is polled at most every MinPollInterval,
		// not in a loop; after a new revocation the next poll starts at once.
		if wait := MinPollInterval - r.now().Sub(start); wait > 0 && r.applied == 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// pollOnce discovers the feed when needed, polls once (and again at once while more is
// available, up to maxRounds polls: past them Run's next poll goes on), and applies what it
// read.
func (r *Receiver) pollOnce(ctx context.Context, immediately bool) error {
	r.applied = 0
	for range maxRounds {
		more, err := r.pollRound(ctx, immediately)
		if err != nil || !more {
			return err
		}
		immediately = true
	}
	return nil
}

// pollRound is one poll: whether the answer said more is available, or an error.
func (r *Receiver) pollRound(ctx context.Context, immediately bool) (bool, error) {
	if r.endpoint == "" {
		ep, err := r.discover(ctx)
		if err != nil {
			return false, err
		}
		r.endpoint = ep
	}
	req := r.request(immediately)
	b, _ := json.Marshal(req)
	start := r.now()
	if !immediately && r.lastSync.Load() != 0 {
		r.polling.Store(start.UnixNano())
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := r.poller.Do(hreq)
	if err != nil {
		return false, fmt.Errorf("POST %s: %w", r.endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return false, fmt.Errorf("POST %s: %w", r.endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotFound {
			r.endpoint = "" // discover again: the issuer may have moved its feed
		}
		return false, fmt.Errorf("POST %s: %s", r.endpoint, resp.Status)
	}
	if len(body) > maxAnswerBytes {
		return false, fmt.Errorf("POST %s: answer larger than %d bytes", r.endpoint, maxAnswerBytes)
	}
	var a PollAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return false, fmt.Errorf("POST %s: the answer is not a poll answer: %w", r.endpoint, err)
	}
	if err := r.applyAll(ctx, a.Sets); err != nil {
		return false, err
	}
	// The feed's state is known as of the request: the answer held everything older.
	r.lastSync.Store(start.UnixNano())
	r.metrics.lastSuccess.Set(float64(start.Unix()))
	return a.MoreAvailable, nil
}

// request is the next poll: since = the newest revocation's time (no later than now: an event
// time in the future must not move the cursor past revocations still to come) less
// CursorOverlap, ack = the jtis applied from since on; older jtis are forgotten. Past maxSeen
// jtis from since on, since moves up to the second after the newest it drops, so that the
// poll stays within the feed's MaxAcks: under such a burst a late revocation written with an
// older time than since can be missed (the bound is far above what one issuer writes in
// CursorOverlap in practice).
func (r *Receiver) request(immediately bool) PollRequest {
	now := r.now()
	var newest time.Time
	for _, at := range r.seen {
		if at.After(newest) {
			newest = at
		}
	}
	req := PollRequest{ReturnImmediately: immediately}
	if newest.IsZero() {
		return req
	}
	if newest.After(now) {
		newest = now
	}
	since := newest.Add(-CursorOverlap).Truncate(time.Second)
	for jti, at := range r.seen {
		if at.Before(since) {
			delete(r.seen, jti)
		}
	}
	if len(r.seen) > maxSeen {
		times := make([]time.Time, 0, len(r.seen))
		for _, at := range r.seen {
			times = append(times, at.Truncate(time.Second))
		}
		slices.SortFunc(times, func(a, b time.Time) int { return b.Compare(a) })
		// The maxSeen+1st newest is dropped, and every jti of its second with it.
		since = times[maxSeen].Add(time.Second)
		for jti, at := range r.seen {
			if at.Before(since) {
				delete(r.seen, jti)
			}
		}
	}
	req.Since = since.Unix()
	for jti := range r.seen {
		req.Ack = append(req.Ack, jti)
	}
	return req
}

// applyAll verifies and applies sets. A SET that does not verify with a key the issuer
// publishes now, or does not decode, is skipped and acknowledged (counted, logged once per
// poll); an unknown key whose set cannot be fetched is an error: the poll is retried.
func (r *Receiver) applyAll(ctx context.Context, sets map[string]string) error {
	bad := 0
	var firstBad error
	for jti, set := range sets {
		rv, known, err := r.verify(ctx, set)
		var unavailable *keysUnavailable
		switch {
		case errors.As(err, &unavailable):
			return err
		case err != nil:
			bad++
			if firstBad == nil {
				firstBad = err
			}
			r.metrics.events.WithLabelValues("other", "invalid").Inc()
			if len(jti) <= maxIDBytes {
				r.seen[jti] = r.now()
			}
			continue
		case !known:
			r.metrics.events.WithLabelValues("other", "skipped").Inc()
			r.seen[jti] = r.now()
			continue
		}
		if _, ok := r.seen[rv.ID()]; ok {
			// Applied before (a SET sent again, under its jti or another): once is enough,
			// a leaver's namespaces are not orphaned twice.
			r.metrics.events.WithLabelValues(kindLabel(rv.Kind()), "skipped").Inc()
			continue
		}
		r.seen[rv.ID()] = rv.At
		if jti != rv.ID() && len(jti) <= maxIDBytes {
			r.seen[jti] = rv.At
		}
		r.apply(rv)
		r.applied++
	}
	if bad > 0 {
		r.cfg.Logger.Warn("revocation events from the trusted issuer's feed were skipped", "issuer", r.cfg.Issuer, "skipped", bad, "first", errText(firstBad))
	}
	return nil
}

// apply evicts what rv ends here and queues a leaver for orphaning.
func (r *Receiver) apply(rv Revocation) {
	kind := kindLabel(rv.Kind())
	if rv.Kind() == KindSessions && rv.Cluster != r.cfg.Audience {
		r.metrics.events.WithLabelValues(kind, "skipped").Inc()
		return
	}
	n := applier{evictor: r.cfg.Evictor, prefix: r.cfg.GroupPrefix, audience: r.cfg.Audience, teams: r.cfg.Teams}.apply(rv, rv.At)
	r.cfg.Metrics.evicted("issuer-feed", n)
	r.metrics.events.WithLabelValues(kind, "applied").Inc()
	if rv.Kind() == KindLeaver && r.cfg.Orphaner != nil {
		select {
		case r.orphans <- rv:
		default:
			r.cfg.Logger.Warn("too many leavers queued for orphaning; this one is left to the membership check", "uid", rv.UserID, "org", rv.LeftOrg)
		}
	}
}

func kindLabel(k Kind) string {
	switch k {
	case KindUser:
		return "user"
	case KindTeam:
		return "team"
	case KindSessions:
		return "sessions"
	case KindLeaver:
		return "leaver"
	}
	return "other"
}

func (r *Receiver) orphanLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case rv := <-r.orphans:
			octx, cancel := context.WithTimeout(ctx, 30*time.Second)
			n, err := r.cfg.Orphaner.OrphanUnlessGivenBack(octx, rv.UserID,
				"removed from GitHub organization "+rv.LeftOrg+" (confirmed by session issuer "+r.cfg.Issuer+")")
			cancel()
			if err != nil {
				r.cfg.Logger.Error("orphaning a leaver's namespaces failed; the membership check or an admin orphans them", "uid", rv.UserID, "org", rv.LeftOrg, "err", err)
				continue
			}
			r.cfg.Logger.Info("leaver's namespaces orphaned (issuer's revocation feed)", "uid", rv.UserID, "org", rv.LeftOrg, "orphaned", n)
		}
	}
}

// keysUnavailable is a SET signed with a key the receiver does not know and cannot fetch now.
type keysUnavailable struct{ err error }

func (e *keysUnavailable) Error() string {
	return "the issuer's keys cannot be fetched: " + e.err.Error()
}

// verify checks set (compact JWS, ES256, typ secevent+jwt, a key of the issuer) and decodes it.
func (r *Receiver) verify(ctx context.Context, set string) (Revocation, bool, error) {
	if len(set) > MaxEventBytes*2 {
		return Revocation{}, false, errors.New("SET too large")
	}
	jws, err := jose.ParseSignedCompact(set, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return Revocation{}, false, errors.New("not a compact JWS signed with ES256")
	}
	h := jws.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, session.EventTokenType) {
		return Revocation{}, false, fmt.Errorf("typ %q, want %s", clip(typ), session.EventTokenType)
	}
	keys := r.keys.Find(h.KeyID)
	if len(keys) == 0 {
		var miss *jwks.Miss
		if keys, miss = r.keys.Refresh(ctx, h.KeyID); miss != nil {
			if miss.Err != nil || miss.NoneKnown {
				return Revocation{}, false, &keysUnavailable{errors.New(miss.ErrText())}
			}
			return Revocation{}, false, fmt.Errorf("signed with key %q, which the issuer does not publish", clip(h.KeyID))
		}
	}
	for _, k := range keys {
		if payload, err := jws.Verify(k.Key); err == nil {
			rv, _, known, err := decodeEventClaims(r.cfg.Issuer, r.aud, r.cfg.Audience, payload)
			return rv, known, err
		}
	}
	return Revocation{}, false, fmt.Errorf("signature does not verify with key %q", clip(h.KeyID))
}

// discover reads <issuer>/.well-known/ssf-configuration and the stream it names, and returns
// the poll endpoint.
//
// Both documents and the poll endpoint must be https URLs of the issuer's own origin (scheme,
// host and port): the documents are not signed, so an endpoint elsewhere (or on http://) could
// answer every poll with nothing and keep this verifier fresh while revocations wait. Each
// document is read within docTimeout.
func (r *Receiver) discover(ctx context.Context) (string, error) {
	var c Configuration
	if err := r.getJSON(ctx, r.cfg.Issuer+ConfigurationPath, &c); err != nil {
		return "", err
	}
	if strings.TrimSuffix(c.Issuer, "/") != r.cfg.Issuer || !sameOrigin(c.ConfigurationEndpoint, r.cfg.Issuer) {
		return "", fmt.Errorf("%s: issuer %q or configuration_endpoint %q is not the issuer's", r.cfg.Issuer+ConfigurationPath, clip(c.Issuer), clip(c.ConfigurationEndpoint))
	}
	var s Stream
	if err := r.getJSON(ctx, c.ConfigurationEndpoint, &s); err != nil {
		return "", err
	}
	if s.Delivery.Method != PollDeliveryMethod || !sameOrigin(s.Delivery.EndpointURL, r.cfg.Issuer) {
		return "", fmt.Errorf("%s: no poll delivery on the issuer's origin (method %q, endpoint_url %q)", c.ConfigurationEndpoint, clip(s.Delivery.Method), clip(s.Delivery.EndpointURL))
	}
	if s.Audience != "" {
		r.aud = s.Audience
	}
	return s.Delivery.EndpointURL, nil
}

// sameOrigin reports whether raw is an https URL with the scheme and host (port included) of
// issuer, without user information.
func sameOrigin(raw, issuer string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Scheme != "https" {
		return false
	}
	iu, err := url.Parse(issuer)
	return err == nil && u.Host == iu.Host && u.Host != ""
}

func (r *Receiver) getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, r.docTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, jwks.MaxDocumentBytes)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
