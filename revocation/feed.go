package revocation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/webhooks/door"
)

// Paths of the feed under the issuer URL's path (SSF 1.0,
// https://openid.net/specs/openid-sharedsignals-framework-1_0.html).
const (
	ConfigurationPath = "/.well-known/ssf-configuration"
	StreamPath        = "/ssf/stream"
	PollPath          = "/ssf/poll"
)

// Limits of the poll endpoint.
const (
	// MaxPollBytes bounds a poll request's body: room for MaxAcks acknowledgements.
	MaxPollBytes = 512 << 10
	// MaxAcks bounds the jtis one poll acknowledges.
	MaxAcks = 16384
	// MaxLongPollBytes bounds the body of a poll that waits: a larger one (about 1,300 acks)
	// is answered at once, so that the polls waiting at once hold at most
	// MaxLongPolls x MaxLongPollBytes of bodies and acks between them.
	MaxLongPollBytes = 32 << 10
	// MaxEventsPerPoll is the most SETs one answer carries, whatever maxEvents asks.
	MaxEventsPerPoll = 1000
	// DefaultLongPoll is how long a poll without returnImmediately waits for a new revocation
	// before it answers with none: below the webhook server's 35 s write timeout and the
	// receivers' PollTimeout.
	DefaultLongPoll = 25 * time.Second
	// DefaultMaxLongPolls bounds the polls waiting at once; more are answered at once, as
	// polls with returnImmediately are.
	DefaultMaxLongPolls = 1024
	// DefaultMaxLongPollsPerClient bounds the polls of one client address waiting at once
	// while half the MaxLongPolls slots are taken (a receiver holds one; the clusters of a
	// fleet behind one NAT gateway share an address, and take any number of free slots); more
	// are answered at once too.
	DefaultMaxLongPollsPerClient = 16
	// CursorOverlap is how far behind the newest revocation it holds a receiver's "since"
	// cursor stays: a revocation another replica writes late (within LateAfter, plus the
	// Kubernetes watch's delay) still reaches it.
	CursorOverlap = 5 * time.Minute
)

// Routes are the server paths of the feed for an issuer URL: its path (without a trailing
// "/") followed by ConfigurationPath, StreamPath and PollPath.
func Routes(issuer string) (configuration, stream, poll string) {
	base := ""
	if u, err := url.Parse(issuer); err == nil {
		base = strings.TrimSuffix(u.Path, "/")
	}
	return base + ConfigurationPath, base + StreamPath, base + PollPath
}

// StreamAudience is the aud of every SET of issuer's feed: its one broadcast stream's URL.
func StreamAudience(issuer string) string { return strings.TrimSuffix(issuer, "/") + StreamPath }

// FeedConfig configures NewFeed.
type FeedConfig struct {
	// Issuer is the session issuer's URL (OCTOGATE_SESSION_ISSUER), the SETs' iss.
	Issuer string
	// Keys sign the SETs: the issuer's session keys, published in its JWKS.
	Keys session.KeySource
	// Log is the revocations served.
	Log *Log
	// LongPoll is how long a poll waits for a revocation (default DefaultLongPoll).
	LongPoll time.Duration
	// MaxLongPolls bounds the polls waiting at once (default DefaultMaxLongPolls).
	MaxLongPolls int
	// MaxLongPollsPerClient bounds the polls of one client address (ClientAddr) waiting at
	// once while half the slots are taken (default DefaultMaxLongPollsPerClient).
	MaxLongPollsPerClient int
	// ClientAddr finds a poll's client address (OCTOGATE_TRUSTED_PROXIES); the zero Resolver:
	// the connection's peer.
	ClientAddr clientaddr.Resolver
	// Stopping, when closed, ends every long poll at once with the revocations it has (none):
	// the server's graceful shutdown then waits for no poll (serve closes it when it begins to
	// stop). Nil: polls wait their LongPoll.
	Stopping <-chan struct{}
	Logger   *slog.Logger
}

// Feed serves the issuer's revocations as Security Event Tokens (RFC 8417) by poll delivery
// (RFC 8936) on one public broadcast stream. It keeps no state per receiver: a receiver says
// in each poll what it has ("since" and "ack", PollRequest), and every replica serves the same
// SETs (same jti) from the revocations ConfigMap. Safe for concurrent use.
type Feed struct {
	issuer, aud string
	keys        session.KeySource
	log         *Log
	longPoll    time.Duration
	slots       chan struct{}
	perClient   int
	clients     clientaddr.Resolver
	stopping    <-chan struct{}
	logger      *slog.Logger
	now         func() time.Time

	waitingMu sync.Mutex
	waiting   map[netip.Addr]int // long polls waiting, by client address

	mu     sync.Mutex
	signed map[string]string // jti + "." + kid -> SET, so that a SET is signed once per key
}

// NewFeed validates cfg.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	switch {
	case session.ValidIssuer(cfg.Issuer) != nil:
		return nil, fmt.Errorf("revocation: Issuer %q: not an https issuer URL", cfg.Issuer)
	case cfg.Keys == nil:
		return nil, errors.New("revocation: Keys is nil")
	case cfg.Log == nil:
		return nil, errors.New("revocation: Log is nil")
	case cfg.LongPoll < 0 || cfg.MaxLongPolls < 0 || cfg.MaxLongPollsPerClient < 0:
		return nil, errors.New("revocation: LongPoll, MaxLongPolls and MaxLongPollsPerClient must not be negative")
	}
	if cfg.MaxLongPollsPerClient == 0 {
		cfg.MaxLongPollsPerClient = DefaultMaxLongPollsPerClient
	}
	if cfg.LongPoll == 0 {
		cfg.LongPoll = DefaultLongPoll
	}
	if cfg.MaxLongPolls == 0 {
		cfg.MaxLongPolls = DefaultMaxLongPolls
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	issuer := strings.TrimSuffix(cfg.Issuer, "/")
	return &Feed{issuer: issuer, aud: StreamAudience(issuer), keys: cfg.Keys, log: cfg.Log, longPoll: cfg.LongPoll,
		slots: make(chan struct{}, cfg.MaxLongPolls), perClient: cfg.MaxLongPollsPerClient, clients: cfg.ClientAddr,
		stopping: cfg.Stopping, logger: cfg.Logger, now: time.Now, signed: map[string]string{}, waiting: map[netip.Addr]int{}}, nil
}

// MaxLongPolls is the bound of polls waiting at once (the route's in-flight budget must allow
// as many).
func (f *Feed) MaxLongPolls() int { return cap(f.slots) }

// Configuration is the SSF 1.0 transmitter configuration metadata (section 7.1).
type Configuration struct {
	SpecVersion              string   `json:"spec_version"`
	Issuer                   string   `json:"issuer"`
	JWKSURI                  string   `json:"jwks_uri"`
	DeliveryMethodsSupported []string `json:"delivery_methods_supported"`
	ConfigurationEndpoint    string   `json:"configuration_endpoint"`
	DefaultSubjects          string   `json:"default_subjects"`
}

// Stream is the broadcast stream's configuration (SSF 1.0 section 8.1.1).
type Stream struct {
	StreamID        string   `json:"stream_id"`
	Issuer          string   `json:"iss"`
	Audience        string   `json:"aud"`
	Delivery        Delivery `json:"delivery"`
	EventsSupported []string `json:"events_supported"`
	EventsDelivered []string `json:"events_delivered"`
	Description     string   `json:"description,omitempty"`
}

// Delivery is a stream's delivery method and, for poll delivery, the endpoint to poll.
type Delivery struct {
	Method      string `json:"method"`
	EndpointURL string `json:"endpoint_url"`
}

var eventTypes = []string{EventSessionRevoked, EventOrgMemberRemoved}

// ConfigurationHandler serves GET <issuer>/.well-known/ssf-configuration.
func (f *Feed) ConfigurationHandler() http.Handler {
	_, jwks, _ := session.Routes(f.issuer)
	base := f.origin()
	return documentHandler(Configuration{
		SpecVersion: "1_0", Issuer: f.issuer, JWKSURI: base + jwks,
		DeliveryMethodsSupported: []string{PollDeliveryMethod},
		ConfigurationEndpoint:    f.issuer + StreamPath, DefaultSubjects: "ALL",
	})
}

// StreamHandler serves GET <issuer>/ssf/stream.
func (f *Feed) StreamHandler() http.Handler {
	return documentHandler(Stream{
		StreamID: "revocations", Issuer: f.issuer, Audience: f.aud,
		Delivery:        Delivery{Method: PollDeliveryMethod, EndpointURL: f.issuer + PollPath},
		EventsSupported: eventTypes, EventsDelivered: eventTypes,
		Description: "every revocation of the issuer's sessions (public, broadcast): poll with since and ack, no state is kept per receiver",
	})
}

// origin is the issuer URL's scheme and host: session.Routes gives paths that include the
// issuer's own path.
func (f *Feed) origin() string {
	u, err := url.Parse(f.issuer)
	if err != nil {
		return f.issuer
	}
	return u.Scheme + "://" + u.Host
}

func documentHandler(doc any) http.Handler {
	b, _ := json.Marshal(doc)
	b = append(b, '\n')
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(b)
	})
}

// PollRequest is a poll's body (RFC 8936 section 2.4), with octogate's cursor "since".
//
// The transmitter keeps no state per receiver, so ack means "I have these": the answer leaves
// out every acknowledged jti. Since (Unix seconds) means "I have every revocation older than
// this": the answer leaves them out too. A receiver sets since to its newest revocation's time
// less CursorOverlap and acknowledges the jtis it has from since on, so that a poll's body
// stays small and a revocation written late by another replica still arrives.
type PollRequest struct {
	// MaxEvents is the most SETs to return (nil: MaxEventsPerPoll; 0: acknowledge only).
	MaxEvents *int `json:"maxEvents,omitempty"`
	// ReturnImmediately false: wait up to the long poll for a revocation.
	ReturnImmediately bool     `json:"returnImmediately,omitempty"`
	Ack               []string `json:"ack,omitempty"`
	// SetErrs reports SETs the receiver could not use (logged as a count, never echoed).
	SetErrs map[string]SetError `json:"setErrs,omitempty"`
	Since   int64               `json:"since,omitempty"`
}

// SetError is a receiver's error for one SET (RFC 8936 section 2.4.4).
type SetError struct {
	Err         string `json:"err"`
	Description string `json:"description"`
}

// PollAnswer is a poll's answer (RFC 8936 section 2.5).
type PollAnswer struct {
	Sets          map[string]string `json:"sets"`
	MoreAvailable bool              `json:"moreAvailable,omitempty"`
}

// DecodePollRequest reads a poll's body: a JSON object (empty body: {}), at most MaxPollBytes,
// MaxAcks acks of at most 64 bytes, maxEvents and since not negative. Errors say which member
// is wrong.
func DecodePollRequest(body []byte) (PollRequest, error) {
	var req PollRequest
	if len(body) > MaxPollBytes {
		return req, fmt.Errorf("body larger than %d bytes", MaxPollBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&req); err != nil {
		return PollRequest{}, errors.New(door.DecodeError(err, "a poll request object"))
	}
	if d.More() {
		return PollRequest{}, errors.New("body holds more than one JSON value")
	}
	switch {
	case req.MaxEvents != nil && *req.MaxEvents < 0:
		return PollRequest{}, errors.New("maxEvents is negative")
	case req.Since < 0:
		return PollRequest{}, errors.New("since is negative")
	case len(req.Ack) > MaxAcks:
		return PollRequest{}, fmt.Errorf("%d acks, more than %d", len(req.Ack), MaxAcks)
	case len(req.SetErrs) > MaxAcks:
		return PollRequest{}, fmt.Errorf("%d setErrs, more than %d", len(req.SetErrs), MaxAcks)
	}
	for _, a := range req.Ack {
		if a == "" || len(a) > maxIDBytes {
			return PollRequest{}, errors.New("an ack is empty or longer than 64 bytes")
		}
	}
	return req, nil
}

// ServeHTTP serves POST <issuer>/ssf/poll: decode -> pick the revocations the receiver lacks,
// oldest first -> wait for one (long poll) when there are none -> sign and answer. Answers are
// application/json with Cache-Control: no-store; a bad body is 400 {"error"}. A long poll past
// MaxLongPolls waiting at once, or past MaxLongPollsPerClient of its client address while half
// the slots are taken, is answered at once as with returnImmediately: never refused, so that
// whoever holds every slot cannot keep the fleet's receivers from reading the feed (a receiver
// past its bound refuses every session); they poll again after MinPollInterval. So is a poll
// whose body is larger than MaxLongPollBytes.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := door.ReadBody(r)
	if err != nil || len(body) > MaxPollBytes {
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: "request body unreadable or too large"})
		door.WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxPollBytes))
		return
	}
	req, err := DecodePollRequest(body)
	if err != nil {
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: err.Error()})
		door.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(req.SetErrs) > 0 {
		f.logger.Warn("a feed receiver could not use some revocation events", "setErrs", len(req.SetErrs))
	}
	max := MaxEventsPerPoll
	if req.MaxEvents != nil {
		max = min(*req.MaxEvents, MaxEventsPerPoll)
	}
	wait := !req.ReturnImmediately && max > 0 && len(body) <= MaxLongPollBytes
	if wait {
		if release, ok := f.takeSlot(f.clients.Addr(r)); ok {
			defer release()
		} else {
			wait = false
		}
	}
	ack := make(map[string]struct{}, len(req.Ack))
	for _, a := range req.Ack {
		ack[a] = struct{}{}
	}
	// time.Unix overflows past year 292277026596 into the far past: a cursor beyond
	// year 9999 is taken as year 9999 (nothing is that new).
	since := time.Unix(min(req.Since, maxSince), 0)
	var timeout <-chan time.Time
	for {
		snap, ids, changed := f.log.snapshot()
		picked, more := pick(snap, ids, since, ack, max)
		if len(picked) > 0 || !wait {
			f.answer(w, r, picked, more)
			return
		}
		if timeout == nil {
			t := time.NewTimer(f.longPoll)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			f.answer(w, r, nil, false)
			return
		case <-f.stopping:
			// The receiver polls again at once, another replica or this one restarted.
			f.answer(w, r, nil, false)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// takeSlot takes a long poll slot for client, and the function that gives it back; false when
// MaxLongPolls polls wait already, or MaxLongPollsPerClient of client's while half the slots
// are taken: a client can hold many only while nobody else needs them.
func (f *Feed) takeSlot(client netip.Addr) (func(), bool) {
	f.waitingMu.Lock()
	defer f.waitingMu.Unlock()
	if f.waiting[client] >= f.perClient && 2*len(f.slots) >= cap(f.slots) {
		return nil, false
	}
	slots := f.slots
	select {
	case slots <- struct{}{}:
	default:
		return nil, false
	}
	f.waiting[client]++
	return func() {
		<-slots
		f.waitingMu.Lock()
		defer f.waitingMu.Unlock()
		if f.waiting[client]--; f.waiting[client] <= 0 {
			delete(f.waiting, client)
		}
	}, true
}

// maxSince is the greatest cursor taken as it is: 9999-12-31T23:59:59Z.
const maxSince = 253402300799

// pick is the first max revocations of snap (oldest first, ids their jtis) at or after since
// that ack does not hold, and whether more remain.
func pick(snap []Revocation, ids []string, since time.Time, ack map[string]struct{}, max int) ([]Revocation, bool) {
	// snap is sorted by time: the first at or after since.
	first, _ := slices.BinarySearchFunc(snap, since, func(rv Revocation, t time.Time) int { return rv.At.Compare(t) })
	var out []Revocation
	for i := first; i < len(snap); i++ {
		rv := snap[i]
		if _, ok := ack[ids[i]]; ok {
			continue
		}
		if len(out) == max {
			return out, true
		}
		out = append(out, rv)
	}
	return out, false
}

func (f *Feed) answer(w http.ResponseWriter, r *http.Request, picked []Revocation, more bool) {
	a := PollAnswer{Sets: make(map[string]string, len(picked)), MoreAvailable: more}
	for _, rv := range picked {
		set, err := f.sign(rv)
		if err != nil {
			door.Record(r.Context(), door.Outcome{Decision: "error", Reason: "signing a revocation event failed"})
			f.logger.Error("signing a revocation event failed", "err", err)
			door.WriteError(w, http.StatusInternalServerError, "signing a revocation event failed")
			return
		}
		a.Sets[rv.ID()] = set
	}
	door.Record(r.Context(), door.Outcome{Decision: "answered", Reason: strconv.Itoa(len(picked)) + " events"})
	b, _ := json.Marshal(a)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// sign is rv's SET, signed once per signing key and kept while the log holds about as many.
func (f *Feed) sign(rv Revocation) (string, error) {
	keys := f.keys.Current()
	k := rv.ID() + "." + keys.KeyID()
	f.mu.Lock()
	set, ok := f.signed[k]
	f.mu.Unlock()
	if ok {
		return set, nil
	}
	claims, err := eventClaimsOf(f.issuer, f.aud, rv, f.now())
	if err != nil {
		return "", err
	}
	if set, err = keys.SignEvent(claims); err != nil {
		return "", err
	}
	f.mu.Lock()
	if len(f.signed) > 2*MaxEntries {
		clear(f.signed)
	}
	f.signed[k] = set
	f.mu.Unlock()
	return set, nil
}
