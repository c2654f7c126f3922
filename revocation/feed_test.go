package revocation

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/session"
)

// testIssuer is an issuer over loopback TLS: OpenID discovery, JWKS and the feed.
type testIssuer struct {
	url  string
	log  *Log
	feed *Feed
	keys *session.Keys
	srv  *httptest.Server
	// pollHandler, when set, answers the polls instead of feed.
	pollHandler http.Handler
}

func newTestIssuer(t testing.TB, longPoll time.Duration) *testIssuer {
	t.Helper()
	return newStoppingTestIssuer(t, longPoll, nil)
}

// newStoppingTestIssuer is newTestIssuer whose feed's FeedConfig.Stopping is stopping.
func newStoppingTestIssuer(t testing.TB, longPoll time.Duration, stopping <-chan struct{}) *testIssuer {
	t.Helper()
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	ti := &testIssuer{log: NewLog(time.Hour), keys: keys}
	mux := http.NewServeMux()
	ti.srv = httptest.NewTLSServer(mux)
	t.Cleanup(ti.srv.Close)
	ti.url = ti.srv.URL
	ti.feed, err = NewFeed(FeedConfig{Issuer: ti.url, Keys: keys, Log: ti.log, LongPoll: longPoll, Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	discovery, jwks, _ := session.Routes(ti.url)
	conf, stream, poll := Routes(ti.url)
	mux.Handle(discovery, session.NewDiscoveryHandler(ti.url))
	mux.Handle(jwks, session.NewJWKSHandler(keys))
	mux.Handle(conf, ti.feed.ConfigurationHandler())
	mux.Handle(stream, ti.feed.StreamHandler())
	mux.Handle(poll, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ti.pollHandler != nil {
			ti.pollHandler.ServeHTTP(w, r)
			return
		}
		ti.feed.ServeHTTP(w, r)
	}))
	return ti
}

func (ti *testIssuer) poll(t testing.TB, req string) (int, PollAnswer) {
	t.Helper()
	_, _, poll := Routes(ti.url)
	resp, err := ti.srv.Client().Post(ti.url+poll, "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var a PollAnswer
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, a
}

func ids(a PollAnswer) []string {
	var out []string
	for jti := range a.Sets {
		out = append(out, jti)
	}
	slices.Sort(out)
	return out
}

func sortedIDs(rs ...Revocation) []string {
	var out []string
	for _, r := range rs {
		r.At = r.At.Truncate(time.Second).UTC()
		out = append(out, r.ID())
	}
	slices.Sort(out)
	return out
}

func TestKeysOfEveryKind(t *testing.T) {
	for _, r := range []Revocation{{UserID: "1002"}, {Team: "acme/platform-admins"}, {UserID: "1002", Cluster: "staging.eu-1"}, {UserID: "1002", LeftOrg: "acme"}} {
		got, ok := parseKey(r.key())
		if !ok || got != r {
			t.Errorf("%+v -> %q -> %+v %v", r, r.key(), got, ok)
		}
	}
	for _, k := range []string{"sessions.1002", "sessions.x.staging", "sessions.1002.a/b", "left.acme", "left..1002", "left.acme.x", "session.1002.a"} {
		if _, ok := parseKey(k); ok {
			t.Errorf("parseKey(%q) accepted", k)
		}
	}
}

// TestSETRoundTrip: every kind of revocation survives signing and a receiver's verification,
// with its time to the second; the SET's typ, aud and lack of exp keep it from being a session.
func TestSETRoundTrip(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	r := newTestReceiver(t, ti, "staging", 0, &fakeEvictor{})
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for _, rv := range []Revocation{{UserID: "1002", At: at}, {Team: "acme/sre", At: at}, {UserID: "1002", Cluster: "staging", At: at}, {UserID: "1002", LeftOrg: "acme", At: at}} {
		set, err := ti.feed.sign(rv)
		if err != nil {
			t.Fatal(err)
		}
		got, known, err := r.verify(context.Background(), set)
		if err != nil || !known || got != rv {
			t.Errorf("%+v -> %+v %v %v", rv, got, known, err)
		}
		var hdr map[string]any
		decodeSegment(t, strings.Split(set, ".")[0], &hdr)
		var claims map[string]any
		decodeSegment(t, strings.Split(set, ".")[1], &claims)
		if hdr["typ"] != "secevent+jwt" || hdr["alg"] != "ES256" || hdr["kid"] == "" || claims["exp"] != nil || claims["sub"] != nil || claims["aud"] != ti.url+StreamPath || claims["jti"] != rv.ID() {
			t.Errorf("SET header %v claims %v", hdr, claims)
		}
	}
	// A session-shaped JWT of the same key is not a SET.
	if _, _, err := r.verify(context.Background(), "e30.e30.e30"); err == nil {
		t.Error("a non-JWS verified")
	}
}

func TestPollAckSinceAndMaxEvents(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	t0 := time.Now().Truncate(time.Second).Add(-time.Minute)
	rs := []Revocation{{UserID: "1", At: t0}, {UserID: "2", At: t0.Add(time.Second)}, {UserID: "3", At: t0.Add(2 * time.Second)}, {Team: "acme/sre", At: t0.Add(3 * time.Second)}}
	for _, r := range rs {
		ti.log.Add(r)
	}
	tests := []struct {
		name, req string
		want      []string
		more      bool
	}{
		{"everything without a cursor", `{"returnImmediately":true}`, sortedIDs(rs...), false},
		{"acked ones are left out", `{"returnImmediately":true,"ack":["` + rs[0].ID() + `","` + rs[2].ID() + `"]}`, sortedIDs(rs[1], rs[3]), false},
		{"older than since are left out", `{"returnImmediately":true,"since":` + itoa(t0.Add(2*time.Second).Unix()) + `}`, sortedIDs(rs[2], rs[3]), false},
		{"maxEvents gives the oldest and says more", `{"returnImmediately":true,"maxEvents":2}`, sortedIDs(rs[0], rs[1]), true},
		{"maxEvents 0 acknowledges only, at once, saying more are there", `{"maxEvents":0}`, nil, true},
		{"an empty body is {}", ``, sortedIDs(rs...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, a := ti.poll(t, tt.req)
			if code != 200 || !slices.Equal(ids(a), tt.want) || a.MoreAvailable != tt.more {
				t.Errorf("%d %v more=%v, want %v more=%v", code, ids(a), a.MoreAvailable, tt.want, tt.more)
			}
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestPollRefusesBadBodies(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	many := `{"ack":[` + strings.Repeat(`"a",`, MaxAcks) + `"a"]}`
	for name, body := range map[string]string{
		"not JSON":            `{`,
		"an array":            `[]`,
		"negative maxEvents":  `{"maxEvents":-1}`,
		"negative since":      `{"since":-5}`,
		"ack not strings":     `{"ack":[1]}`,
		"empty ack":           `{"ack":[""]}`,
		"too long ack":        `{"ack":["` + strings.Repeat("a", 65) + `"]}`,
		"too many acks":       many,
		"two values":          `{} {}`,
		"larger than allowed": `{"ack":["` + strings.Repeat("a", MaxPollBytes) + `"]}`,
	} {
		if code, _ := ti.poll(t, body); code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d, want 400 or 413", name, code)
		}
	}
}

// TestLongPollWakesOnANewRevocation: a waiting poll answers as soon as a revocation is added,
// not at the end of its long poll.
func TestLongPollWakesOnANewRevocation(t *testing.T) {
	ti := newTestIssuer(t, 20*time.Second)
	rv := Revocation{UserID: "1002", Cluster: "staging", At: time.Now()}
	go func() {
		time.Sleep(200 * time.Millisecond)
		ti.log.Add(rv)
	}()
	start := time.Now()
	code, a := ti.poll(t, `{}`)
	if code != 200 || !slices.Equal(ids(a), sortedIDs(rv)) {
		t.Fatalf("%d %v, want %v", code, ids(a), sortedIDs(rv))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the poll answered after %v", d)
	}
	// Nothing new: the long poll ends empty.
	short := newTestIssuer(t, 300*time.Millisecond)
	if code, a := short.poll(t, `{}`); code != 200 || len(a.Sets) != 0 {
		t.Fatalf("%d %v, want an empty answer", code, a)
	}
}

// TestLongPollsEndWhenTheServerStops: a waiting poll answers (empty) as soon as the server
// begins to stop, so that a graceful shutdown waits for no long poll; a poll that comes later
// answers at once.
func TestLongPollsEndWhenTheServerStops(t *testing.T) {
	stopping := make(chan struct{})
	ti := newStoppingTestIssuer(t, 20*time.Second, stopping)
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(stopping)
	}()
	for i := range 2 {
		start := time.Now()
		if code, a := ti.poll(t, `{}`); code != 200 || len(a.Sets) != 0 {
			t.Fatalf("poll %d: %d %v, want an empty answer", i, code, a)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("poll %d answered after %v, not when the server began to stop", i, d)
		}
	}
}

// TestLongPollsAreBounded: past MaxLongPolls waiting polls, or past MaxLongPollsPerClient of
// one client address, another long poll is answered at once with what there is (never
// refused), so that a flood of long polls cannot keep a receiver from reading the feed.
func TestLongPollsAreBounded(t *testing.T) {
	ti := newTestIssuer(t, 5*time.Second)
	rv := Revocation{UserID: "1002", At: time.Now().Add(-time.Minute)}
	ti.log.Add(rv)
	ack := `{"ack":["` + rv.ID() + `"]}`
	// Every slot taken.
	ti.feed.slots = make(chan struct{}, 1)
	ti.feed.slots <- struct{}{}
	start := time.Now()
	if code, a := ti.poll(t, ack); code != 200 || len(a.Sets) != 0 {
		t.Fatalf("%d %v, want 200 with nothing", code, a)
	}
	if code, a := ti.poll(t, `{}`); code != 200 || !slices.Equal(ids(a), sortedIDs(rv)) {
		t.Fatalf("%d %v, want 200 with %v", code, ids(a), sortedIDs(rv))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("polls past the bound waited %v, want an answer at once", d)
	}
	<-ti.feed.slots

	// One client holding its share while half the slots are taken: its next long poll is
	// answered at once; another client's waits.
	ti.feed.slots = make(chan struct{}, 4)
	ti.feed.perClient = 2
	held := make(chan int, 2)
	for range 2 {
		go func() { code, _ := ti.poll(t, ack); held <- code }()
	}
	waitFor(t, "two waiting polls", func() bool { return len(ti.feed.slots) == 2 })
	start = time.Now()
	if code, a := ti.poll(t, ack); code != 200 || len(a.Sets) != 0 || time.Since(start) > 2*time.Second {
		t.Fatalf("a third long poll of one client: %d %v after %v, want an empty answer at once", code, a, time.Since(start))
	}
	// Another client is not held back by the first one's: a revocation wakes its long poll.
	give, ok := ti.feed.takeSlot(netip.MustParseAddr("192.0.2.9"))
	if !ok {
		t.Fatal("another client's long poll found no slot")
	}
	give()
	ti.log.Add(Revocation{UserID: "1003", At: time.Now()})
	for range 2 {
		if code := <-held; code != 200 {
			t.Fatalf("a waiting poll: %d", code)
		}
	}
	waitFor(t, "every slot given back", func() bool {
		ti.feed.waitingMu.Lock()
		defer ti.feed.waitingMu.Unlock()
		return len(ti.feed.slots) == 0 && len(ti.feed.waiting) == 0
	})
	// Below half the slots, one client (a fleet behind one NAT address) takes more than its
	// share: its third long poll waits.
	ti.feed.slots = make(chan struct{}, 100)
	for range 2 {
		ti.feed.takeSlot(netip.MustParseAddr("192.0.2.10"))
	}
	if _, ok := ti.feed.takeSlot(netip.MustParseAddr("192.0.2.10")); !ok {
		t.Fatal("a third long poll of one client found no slot with 98 free")
	}
}

// TestLateRevocationStillReachesAReceiverPastIt: a revocation another replica wrote late
// (older than the newest the receiver has) arrives within CursorOverlap.
func TestLateRevocationStillReachesAReceiverPastIt(t *testing.T) {
	ti := newTestIssuer(t, time.Second)
	ev := &fakeEvictor{}
	r := newTestReceiver(t, ti, "staging", 0, ev)
	now := time.Now()
	ti.log.Add(Revocation{UserID: "1", At: now})
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	late := Revocation{UserID: "2", At: now.Add(-time.Minute)}
	ti.log.Add(late)
	req := r.request(true)
	if len(req.Ack) != 1 || req.Since == 0 {
		t.Fatalf("request %+v: want one ack and a cursor", req)
	}
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if users, _ := ev.snapshot(); !slices.Equal(users, []string{"1", "2"}) {
		t.Fatalf("evicted %v, want 1 then the late 2", users)
	}
	// Already applied: the next poll brings nothing again.
	before := len(ev.users)
	if err := r.pollOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if len(ev.users) != before {
		t.Fatalf("revocations applied again: %v", ev.users)
	}
}

func newTestReceiver(t testing.TB, ti *testIssuer, audience string, maxStale time.Duration, ev Evictor) *Receiver {
	t.Helper()
	r, err := NewReceiver(ReceiverConfig{Issuer: ti.url, Audience: audience, Client: ti.srv.Client(), Evictor: ev,
		GroupPrefix: "github:", Teams: NewTeams("github:", time.Hour), MaxStaleness: maxStale})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type fakeOrphaner struct{ uids chan string }

func (f *fakeOrphaner) OrphanUnlessGivenBack(_ context.Context, uid, _ string) (int, error) {
	f.uids <- uid
	return 1, nil
}

// TestReceiverAppliesWhatConcernsItsCluster: users and teams everywhere, a logout only where
// it names this cluster, a leaver orphaned; team sessions are refused through Teams.
func TestReceiverAppliesWhatConcernsItsCluster(t *testing.T) {
	ti := newTestIssuer(t, 10*time.Second)
	ev := &fakeEvictor{}
	r := newTestReceiver(t, ti, "staging", 0, ev)
	o := &fakeOrphaner{uids: make(chan string, 4)}
	r.cfg.Orphaner = o
	end := &fakeEnder{}
	r.cfg.Leavers = end
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	at := time.Now()
	for _, rv := range []Revocation{{UserID: "1", At: at}, {Team: "acme/sre", At: at}, {UserID: "2", Cluster: "staging", At: at},
		{UserID: "3", Cluster: "prod", At: at}, {UserID: "4", LeftOrg: "acme", At: at}} {
		ti.log.Add(rv)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		users, groups := ev.snapshot()
		if slices.Equal(sortedCopy(users), []string{"1", "2"}) && slices.Equal(groups, []string{"github:acme/sre"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evicted users %v groups %v, want [1 2] (not prod's 3) and github:acme/sre", users, groups)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case uid := <-o.uids:
		if uid != "4" {
			t.Fatalf("orphaned %s, want 4", uid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leaver was not orphaned")
	}
	if got := end.snapshot(); !slices.Equal(got, []string{"acme 4"}) {
		t.Fatalf("ended the grants of %v, want the leaver's (acme 4) only", got)
	}
	if !r.cfg.Teams.RevokedSince([]string{"github:acme", "github:acme/sre"}, at.Add(-time.Minute)) {
		t.Fatal("a session of acme/sre issued before the revocation is not refused")
	}
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestReceiverStalenessBound: fresh while the feed answers, stale past MaxStaleness once it
// cannot be read, fresh again when it can; a detail says so.
func TestReceiverStalenessBound(t *testing.T) {
	ti := newTestIssuer(t, 200*time.Millisecond)
	r := newTestReceiver(t, ti, "staging", 300*time.Millisecond, &fakeEvictor{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a first read", func() bool { last, _ := r.Stale(time.Now()); return !last.IsZero() })
	time.Sleep(500 * time.Millisecond) // longer than the bound, the feed answering
	if _, stale := r.Stale(time.Now()); stale {
		t.Fatal("stale while the feed answers")
	}
	ti.srv.CloseClientConnections()
	ti.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	waitFor(t, "stale", func() bool { _, stale := r.Stale(time.Now()); return stale })
	if d := r.Detail(); !strings.Contains(d, "session_feed_stale") {
		t.Fatalf("detail %q", d)
	}
	if newTestReceiver(t, ti, "x", 0, &fakeEvictor{}).Detail() == "" {
		t.Fatal("a receiver that never read the feed has no detail")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func decodeSegment(t *testing.T, seg string, v any) {
	t.Helper()
	b, err := base64URL(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func base64URL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
