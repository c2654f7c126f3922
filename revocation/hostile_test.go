package revocation

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
)

// answerSets answers every poll with sets (ignoring ack and since, as a replaying feed does).
func answerSets(sets map[string]string, more bool) http.Handler {
	b, _ := json.Marshal(PollAnswer{Sets: sets, MoreAvailable: more})
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// aliceSession is a session of ti's keys for audience, minted by session's exchanger.
func aliceSession(t *testing.T, ti *testIssuer, audience string) string {
	t.Helper()
	token := ghtoken.Mint("gho_hostile_alice")
	x, err := session.NewExchanger(session.ExchangerConfig{Issuer: ti.url, Audiences: []string{audience}, Keys: ti.keys,
		GitHub: lookupFunc(func(context.Context, string) (tokenreview.Identity, error) {
			return tokenreview.Identity{Username: "github:alice", UID: "1001", Groups: []string{"github:acme"}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	resp, _, oerr := x.Exchange(context.Background(), session.Request{GrantType: session.GrantTypeTokenExchange,
		SubjectToken: token, SubjectTokenType: session.TokenTypeAccessToken, Audience: audience})
	if oerr != nil {
		t.Fatalf("exchange: %+v", oerr)
	}
	return resp.AccessToken
}

type lookupFunc func(context.Context, string) (tokenreview.Identity, error)

func (f lookupFunc) Lookup(ctx context.Context, token string) (tokenreview.Identity, error) {
	return f(ctx, token)
}

// TestReceiverSkipsForgedSETs: SETs the issuer did not sign for this stream are skipped
// (counted invalid, acknowledged) and revoke nothing: another key, alg none, HS256 keyed with
// the issuer's public key, a session of the issuer's key, the issuer's key for another stream
// or issuer. The poll itself succeeds: one forged SET does not stop the feed.
func TestReceiverSkipsForgedSETs(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	ev := &fakeEvictor{}
	r := newTestReceiver(t, ti, "staging", 0, ev)
	now := time.Now()
	rv := Revocation{UserID: "1001", At: now}
	claims, err := eventClaimsOf(ti.url, StreamAudience(ti.url), rv, now)
	if err != nil {
		t.Fatal(err)
	}
	kid := ti.keys.KeyID()
	other, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	byOtherKey, _ := other.SignEvent(claims)
	hsInput := b64(`{"alg":"HS256","typ":"secevent+jwt","kid":"`+kid+`"}`) + "." + b64(string(claims))
	mac := hmac.New(sha256.New, ti.keys.JWKS())
	mac.Write([]byte(hsInput))
	otherStream, _ := eventClaimsOf(ti.url, "https://elsewhere.example/ssf/stream", rv, now)
	otherIssuer, _ := eventClaimsOf("https://elsewhere.example", StreamAudience(ti.url), rv, now)
	forStream, _ := ti.keys.SignEvent(otherStream)
	forIssuer, _ := ti.keys.SignEvent(otherIssuer)
	forged := map[string]string{
		"another-key":           byOtherKey,
		"alg-none":              b64(`{"alg":"none","typ":"secevent+jwt","kid":"`+kid+`"}`) + "." + b64(string(claims)) + ".",
		"hs256-public-key":      hsInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)),
		"session":               aliceSession(t, ti, "staging"),
		"another-stream":        forStream,
		"another-issuer":        forIssuer,
		"not-a-jws":             "e30.e30.e30",
		strings.Repeat("j", 65): byOtherKey,
	}
	ti.pollHandler = answerSets(forged, false)
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatalf("a poll with forged SETs: %v", err)
	}
	if users, groups := ev.snapshot(); len(users)+len(groups) != 0 {
		t.Fatalf("forged SETs evicted users %v groups %v", users, groups)
	}
	if n := testutil.ToFloat64(r.metrics.events.WithLabelValues("other", "invalid")); n != float64(len(forged)) {
		t.Fatalf("%v SETs counted invalid, want %d", n, len(forged))
	}
	if req := r.request(true); len(req.Ack) != len(forged)-1 {
		t.Fatalf("acks %v: want the forged ones' jtis but the over-long one", req.Ack)
	}
	// The same revocation, signed by the issuer, is applied.
	good, _ := ti.keys.SignEvent(claims)
	ti.pollHandler = answerSets(map[string]string{rv.ID(): good}, false)
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if users, _ := ev.snapshot(); !slices.Equal(users, []string{"1001"}) {
		t.Fatalf("evicted %v, want 1001", users)
	}
}

// TestASETIsNeverASession: a SET of the issuer's own key is refused where a session is taken:
// the session verifier (/authenticate and the proxy) of any cluster, the stream's audience
// included, and the token exchange, whatever subject token type it is given as.
func TestASETIsNeverASession(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	now := time.Now()
	claims, _ := eventClaimsOf(ti.url, StreamAudience(ti.url), Revocation{UserID: "1001", At: now}, now)
	set, err := ti.keys.SignEvent(claims)
	if err != nil {
		t.Fatal(err)
	}
	for _, aud := range []string{"staging", StreamAudience(ti.url)} {
		v, err := session.NewVerifier(session.VerifierConfig{Issuer: ti.url, Audience: aud, Keys: ti.keys})
		if err != nil {
			if aud == "staging" {
				t.Fatal(err)
			}
			continue // not a cluster name this verifier can be given
		}
		if id, err := v.Lookup(context.Background(), set); err == nil {
			t.Fatalf("verifier of %s took a SET for a session of %+v", aud, id)
		}
	}
	x, err := session.NewExchanger(session.ExchangerConfig{Issuer: ti.url, Audiences: []string{"staging"}, Keys: ti.keys,
		GitHub: lookupFunc(func(context.Context, string) (tokenreview.Identity, error) {
			return tokenreview.Identity{}, fmt.Errorf("not a GitHub token: %w", tokenreview.ErrRefused)
		}),
		Actions: lookupFunc(func(context.Context, string) (tokenreview.Identity, error) {
			return tokenreview.Identity{}, fmt.Errorf("not an Actions token: %w", tokenreview.ErrRefused)
		})})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{session.TokenTypeAccessToken, session.TokenTypeJWT, session.TokenTypeIDToken} {
		if resp, _, oerr := x.Exchange(context.Background(), session.Request{GrantType: session.GrantTypeTokenExchange,
			SubjectToken: set, SubjectTokenType: typ, Audience: "staging"}); oerr == nil {
			t.Fatalf("a SET given as %s was exchanged for a session (%d bytes)", typ, len(resp.AccessToken))
		}
	}
}

// TestReceiverAppliesAReplayedSETOnce: a feed sending the same SETs again (ignoring ack) has
// them applied once: a leaver is queued for orphaning once.
func TestReceiverAppliesAReplayedSETOnce(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	ev := &fakeEvictor{}
	r := newTestReceiver(t, ti, "staging", 0, ev)
	r.cfg.Orphaner = &fakeOrphaner{uids: make(chan string, 4)}
	now := time.Now()
	sets := map[string]string{}
	for _, rv := range []Revocation{{UserID: "1001", At: now}, {UserID: "1001", LeftOrg: "acme", At: now}} {
		set, err := ti.feed.sign(rv)
		if err != nil {
			t.Fatal(err)
		}
		sets[rv.ID()] = set
		sets["replayed-"+rv.ID()[:8]] = set // the same SET under another jti key
	}
	ti.pollHandler = answerSets(sets, false)
	for range 3 {
		if err := r.pollOnce(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
	if users, _ := ev.snapshot(); !slices.Equal(users, []string{"1001"}) {
		t.Fatalf("evicted %v, want 1001 once", users)
	}
	if n := len(r.orphans); n != 1 {
		t.Fatalf("the leaver was queued for orphaning %d times, want once", n)
	}
}

// hostileIssuer is an issuer URL whose documents and polls a test writes, and a second https
// server on another origin that counts the requests reaching it.
type hostileIssuer struct {
	srv, other *httptest.Server
	otherHits  atomic.Int32
	handler    atomic.Pointer[http.HandlerFunc]
}

// handle answers the issuer's requests from now on (a server goroutine of an earlier case may
// still be running).
func (h *hostileIssuer) handle(f http.HandlerFunc) { h.handler.Store(&f) }

func newHostileIssuer(t *testing.T) *hostileIssuer {
	h := &hostileIssuer{}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.handler.Load())(w, r) }))
	t.Cleanup(h.srv.Close)
	h.other = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.otherHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"sets":{}}`)
	}))
	t.Cleanup(h.other.Close)
	return h
}

func (h *hostileIssuer) receiver(t *testing.T) *Receiver {
	t.Helper()
	// httptest's servers share one certificate: this client trusts the other origin too, as
	// a client of a public CA would.
	r, err := NewReceiver(ReceiverConfig{Issuer: h.srv.URL, Audience: "staging", Client: h.srv.Client(), Evictor: &fakeEvictor{}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// documents answers the configuration with conf, the stream with stream and polls with poll.
func (h *hostileIssuer) documents(confEndpoint, pollURL string, poll http.HandlerFunc) {
	h.handle(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case ConfigurationPath:
			_ = json.NewEncoder(w).Encode(Configuration{SpecVersion: "1_0", Issuer: h.srv.URL, ConfigurationEndpoint: confEndpoint})
		case StreamPath:
			_ = json.NewEncoder(w).Encode(Stream{Delivery: Delivery{Method: PollDeliveryMethod, EndpointURL: pollURL}})
		case PollPath:
			poll(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// TestReceiverReadsTheFeedFromTheIssuersOriginOnly: discovery naming another host or http://,
// and redirects of the documents or the polls (another host, http://), are errors: nothing
// reaches the other origin, and the verifier's freshness does not advance.
func TestReceiverReadsTheFeedFromTheIssuersOriginOnly(t *testing.T) {
	h := newHostileIssuer(t)
	plainHTTP := "http" + strings.TrimPrefix(h.srv.URL, "https")
	okPoll := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"sets":{}}`) }
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func()
	}{
		{"configuration endpoint on another host", func() { h.documents(h.other.URL+StreamPath, h.srv.URL+PollPath, okPoll) }},
		{"configuration endpoint over http", func() { h.documents(plainHTTP+StreamPath, h.srv.URL+PollPath, okPoll) }},
		{"configuration endpoint with user information", func() {
			h.documents("https://user@"+strings.TrimPrefix(h.srv.URL, "https://")+StreamPath, h.srv.URL+PollPath, okPoll)
		}},
		{"poll endpoint on another host", func() { h.documents(h.srv.URL+StreamPath, h.other.URL+PollPath, okPoll) }},
		{"poll endpoint over http", func() { h.documents(h.srv.URL+StreamPath, plainHTTP+PollPath, okPoll) }},
		{"configuration redirected to another host", func() {
			h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, okPoll)
			inner := *h.handler.Load()
			h.handle(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == ConfigurationPath {
					redirect(h.other.URL)(w, r)
					return
				}
				inner(w, r)
			})
		}},
		{"poll redirected to another host", func() { h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, redirect(h.other.URL)) }},
		{"poll redirected to http", func() { h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, redirect(plainHTTP)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			r := h.receiver(t)
			if err := r.pollOnce(context.Background(), true); err == nil {
				t.Fatal("the poll succeeded")
			}
			if last, _ := r.Stale(time.Now()); !last.IsZero() {
				t.Fatal("the feed counts as read")
			}
			if n := h.otherHits.Load(); n != 0 {
				t.Fatalf("%d requests reached the other origin", n)
			}
		})
	}
	// The same documents on the issuer's origin are read.
	h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, okPoll)
	if err := h.receiver(t).pollOnce(context.Background(), true); err != nil {
		t.Fatalf("the issuer's own feed: %v", err)
	}
}

// TestReceiverBoundsWhatAFeedSends: an answer above its limit, a body trickled in, a document
// that never comes, a feed that always says more is available, and one flooding jtis cost the
// receiver a bounded time, memory and poll size.
func TestReceiverBoundsWhatAFeedSends(t *testing.T) {
	h := newHostileIssuer(t)

	h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"sets":{},"x":"`)
		_, _ = w.Write(make([]byte, maxAnswerBytes))
		_, _ = io.WriteString(w, `"}`)
	})
	if err := h.receiver(t).pollOnce(context.Background(), true); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an answer above the limit: %v", err)
	}

	h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"sets":`)
		w.(http.Flusher).Flush()
		for range 100 { // a byte every 100 ms for at most 10 s
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			_, _ = io.WriteString(w, " ")
			w.(http.Flusher).Flush()
		}
	})
	r := h.receiver(t)
	r.poller.Timeout = 500 * time.Millisecond // PollTimeout, shortened
	start := time.Now()
	if err := r.pollOnce(context.Background(), true); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a trickled answer: %v after %v, want an error at the poll's timeout", err, time.Since(start))
	}

	h.handle(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	noTimeout := *h.srv.Client()
	noTimeout.Timeout = 0
	r, err := NewReceiver(ReceiverConfig{Issuer: h.srv.URL, Audience: "staging", Client: &noTimeout, Evictor: &fakeEvictor{}})
	if err != nil {
		t.Fatal(err)
	}
	r.docTimeout = 300 * time.Millisecond // 5 s for a client without a timeout, shortened
	start = time.Now()
	if err := r.pollOnce(context.Background(), true); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("discovery that never answers: %v after %v, want an error at the document timeout", err, time.Since(start))
	}

	var polls atomic.Int32
	h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, func(w http.ResponseWriter, _ *http.Request) {
		n := polls.Add(1)
		sets := map[string]string{}
		for i := range MaxEventsPerPoll {
			sets["junk-"+strconv.Itoa(int(n))+"-"+strconv.Itoa(i)] = "e30.e30.e30"
		}
		b, _ := json.Marshal(PollAnswer{Sets: sets, MoreAvailable: true})
		_, _ = w.Write(b)
	})
	r = h.receiver(t)
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatalf("a feed always saying more: %v", err)
	}
	if n := polls.Load(); n != maxRounds {
		t.Fatalf("%d polls in one pollOnce, want at most %d", n, maxRounds)
	}
	req := r.request(false)
	if len(req.Ack) > maxSeen || len(r.seen) > maxSeen {
		t.Fatalf("%d acks, %d jtis kept after a flood: want at most %d", len(req.Ack), len(r.seen), maxSeen)
	}
	b, _ := json.Marshal(req)
	if _, err := DecodePollRequest(b); err != nil {
		t.Fatalf("the next poll would be refused by the feed: %v", err)
	}
}

// TestReceiverCursorStaysWithinItsWindow: more revocations within CursorOverlap than the feed
// takes acks for keep the receiver's poll acceptable (since moves up, acks stay below MaxAcks,
// every ack is at or after since); an event time in the future (an issuer replica's clock
// ahead) does not move the cursor past revocations still to come.
func TestReceiverCursorStaysWithinItsWindow(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	ev := &fakeEvictor{}
	r := newTestReceiver(t, ti, "staging", 0, ev)
	now := time.Now()
	for i := range MaxAcks + 100 {
		r.seen["jti-"+strconv.Itoa(i)] = now.Add(-time.Duration(i%240) * time.Second).Truncate(time.Second)
	}
	req := r.request(false)
	b, _ := json.Marshal(req)
	if _, err := DecodePollRequest(b); err != nil || len(req.Ack) > maxSeen {
		t.Fatalf("after a burst: %d acks, decode %v; want at most %d acks the feed accepts", len(req.Ack), err, maxSeen)
	}
	for _, jti := range req.Ack {
		if r.seen[jti].Unix() < req.Since {
			t.Fatalf("ack %s at %v is before since %d", jti, r.seen[jti], req.Since)
		}
	}

	r = newTestReceiver(t, ti, "staging", 0, ev)
	ti.log.Add(Revocation{UserID: "1", At: now.Add(time.Hour)})
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if since := r.request(true).Since; since > now.Unix() {
		t.Fatalf("since %d is past now %d after an event an hour ahead", since, now.Unix())
	}
	ti.log.Add(Revocation{UserID: "2", At: now})
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if users, _ := ev.snapshot(); !slices.Contains(users, "2") {
		t.Fatalf("evicted %v: the revocation after an event in the future did not arrive", users)
	}
}

// TestPollTakesAnyCursorAndMaxEvents: since and maxEvents at their extremes are answered, or
// refused as not a number of the range, never a failure of the server.
func TestPollTakesAnyCursorAndMaxEvents(t *testing.T) {
	ti := newTestIssuer(t, 200*time.Millisecond)
	rv := Revocation{UserID: "1002", At: time.Now()}
	ti.log.Add(rv)
	for _, tc := range []struct {
		body string
		code int
		n    int
	}{
		{`{"returnImmediately":true,"since":0}`, 200, 1},
		{`{"returnImmediately":true,"since":null}`, 200, 1},
		{`{"returnImmediately":true,"since":` + strconv.FormatInt(math.MaxInt64, 10) + `}`, 200, 0},
		{`{"since":` + strconv.FormatInt(math.MaxInt64, 10) + `}`, 200, 0}, // a long poll: ends empty
		{`{"returnImmediately":true,"since":-9223372036854775808}`, 400, 0},
		{`{"returnImmediately":true,"since":9223372036854775808}`, 400, 0},
		{`{"returnImmediately":true,"since":1e400}`, 400, 0},
		{`{"returnImmediately":true,"since":1.5}`, 400, 0},
		{`{"returnImmediately":true,"since":"NaN"}`, 400, 0},
		{`{"returnImmediately":true,"since":NaN}`, 400, 0},
		{`{"returnImmediately":true,"maxEvents":` + strconv.FormatInt(math.MaxInt64, 10) + `}`, 200, 1},
		{`{"returnImmediately":true,"maxEvents":1e30}`, 400, 0},
		{`{"returnImmediately":true,"maxEvents":1}`, 200, 1},
		{`{"maxEvents":0,"since":-1}`, 400, 0},
	} {
		code, a := ti.poll(t, tc.body)
		if code != tc.code || len(a.Sets) != tc.n {
			t.Errorf("%s: %d with %d SETs, want %d with %d", tc.body, code, len(a.Sets), tc.code, tc.n)
		}
	}
}

// TestReceiverPacesAFeedThatAnswersAtOnce: a feed answering every long poll at once (its long
// poll slots all taken, or misbehaving) is polled every MinPollInterval, not in a loop, and
// keeps the verifier fresh.
func TestReceiverPacesAFeedThatAnswersAtOnce(t *testing.T) {
	h := newHostileIssuer(t)
	var polls atomic.Int32
	h.documents(h.srv.URL+StreamPath, h.srv.URL+PollPath, func(w http.ResponseWriter, _ *http.Request) {
		polls.Add(1)
		_, _ = io.WriteString(w, `{"sets":{}}`)
	})
	r := h.receiver(t)
	r.cfg.MaxStaleness = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	time.Sleep(1500 * time.Millisecond)
	if _, stale := r.Stale(time.Now()); stale {
		t.Error("stale while the feed answers")
	}
	cancel()
	<-done
	if n := polls.Load(); n < 2 || n > 5 {
		t.Fatalf("%d polls in 1.5 s, want about one every %v", n, MinPollInterval)
	}
}

// TestLargePollsDoNotWait: a poll whose body is above MaxLongPollBytes (a long ack list) is
// answered at once rather than held, so that waiting polls cannot hold MaxLongPolls bodies of
// MaxPollBytes; its acks are honoured.
func TestLargePollsDoNotWait(t *testing.T) {
	ti := newTestIssuer(t, 5*time.Second)
	rv := Revocation{UserID: "1002", At: time.Now()}
	ti.log.Add(rv)
	acks := []string{rv.ID()}
	for i := 0; len(strings.Join(acks, `","`)) <= MaxLongPollBytes; i++ {
		acks = append(acks, "unknown-"+strconv.Itoa(i))
	}
	start := time.Now()
	code, a := ti.poll(t, `{"ack":["`+strings.Join(acks, `","`)+`"]}`)
	if code != 200 || len(a.Sets) != 0 || time.Since(start) > 2*time.Second {
		t.Fatalf("a long poll of %d acks: %d %v after %v, want an empty answer at once", len(acks), code, ids(a), time.Since(start))
	}
	// A small one waits (and ends empty after the long poll).
	ti.feed.longPoll = 500 * time.Millisecond
	start = time.Now()
	if code, a := ti.poll(t, `{"ack":["`+rv.ID()+`"]}`); code != 200 || len(a.Sets) != 0 || time.Since(start) < 400*time.Millisecond {
		t.Fatalf("a small long poll: %d %v after %v, want it to wait", code, ids(a), time.Since(start))
	}
}

// TestReceiverPollsAgainAtOnceAfterANewRevocation: the pacing of MinPollInterval applies to
// answers with nothing new only: a revocation following another closely arrives as fast.
func TestReceiverPollsAgainAtOnceAfterANewRevocation(t *testing.T) {
	ti := newTestIssuer(t, 10*time.Second)
	ev := &fakeEvictor{}
	r := newTestReceiver(t, ti, "staging", 0, ev)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a long poll", func() bool { return r.polling.Load() != 0 })
	ti.log.Add(Revocation{UserID: "1", At: time.Now()})
	waitFor(t, "the first revocation", func() bool { users, _ := ev.snapshot(); return len(users) == 1 })
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	ti.log.Add(Revocation{UserID: "2", At: time.Now()})
	waitFor(t, "the second revocation", func() bool { users, _ := ev.snapshot(); return len(users) == 2 })
	if d := time.Since(start); d >= MinPollInterval-100*time.Millisecond {
		t.Fatalf("the second revocation took %v, want it well within MinPollInterval (%v)", d, MinPollInterval)
	}
}
