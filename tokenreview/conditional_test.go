package tokenreview

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// conditionalEnv is an env whose conditional transport (if any) runs on the env's clock.
func conditionalEnv(t *testing.T, gh *githubapi.Server, cacheBytes int) (*env, *conditionalTransport) {
	t.Helper()
	e := newEnv(t, gh, func(c *Config) {
		c.Orgs = []string{"acme"}
		c.ConditionalCacheBytes = cacheBytes
	})
	ct, _ := e.h.lookup.(*cache).next.(*gitHub).transport.(*conditionalTransport)
	if ct != nil {
		ct.now = e.clock.now
	}
	return e, ct
}

// githubRequests is octogate_github_requests_total{endpoint,code}.
func (e *env) githubRequests(endpoint, code string) float64 {
	return value(e.h.lookup.(*cache).m.githubRequests.WithLabelValues(endpoint, code))
}

func TestExpiredIdentityIsRevalidatedWithConditionalRequests(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cacheBytes int
		// units GitHub charges the token for each lookup after the first, while nothing changes
		wantUnitsPerExpiry int
		want304            float64
	}{
		{name: "conditional requests: 304s, no rate-limit unit", cacheBytes: 0, wantUnitsPerExpiry: 0, want304: 3},
		{name: "without them (-1): every expiry costs the full set", cacheBytes: -1, wantUnitsPerExpiry: 3, want304: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubapi.New()
			t.Cleanup(gh.Close)
			gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"tok-alice"},
				Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: teams("acme", 2)})
			e, _ := conditionalEnv(t, gh, tc.cacheBytes)

			first := e.review(t, "tok-alice")
			if !first.Status.Authenticated || gh.RateLimitUsed("tok-alice") != callSet {
				t.Fatalf("first review: %+v, %d units", first.Status, gh.RateLimitUsed("tok-alice"))
			}
			for i := range 3 {
				e.clock.advance(DefaultCacheTTL + time.Second)
				used, calls := gh.RateLimitUsed("tok-alice"), gh.TokenCalls("tok-alice")
				a := e.review(t, "tok-alice")
				if !a.Status.Authenticated || a.Status.User.Username != first.Status.User.Username ||
					!slices.Equal(a.Status.User.Groups, first.Status.User.Groups) {
					t.Fatalf("expiry %d: %+v, want %+v", i, a.Status, first.Status)
				}
				if n := gh.TokenCalls("tok-alice") - calls; n != callSet {
					t.Fatalf("expiry %d: %d GitHub calls, want %d (every call is revalidated)", i, n, callSet)
				}
				if n := gh.RateLimitUsed("tok-alice") - used; n != tc.wantUnitsPerExpiry {
					t.Fatalf("expiry %d: %d rate-limit units, want %d", i, n, tc.wantUnitsPerExpiry)
				}
			}
			if n := e.githubRequests("/user", "304"); n != tc.want304 {
				t.Fatalf("octogate_github_requests_total{endpoint=/user,code=304} %v, want %v", n, tc.want304)
			}
		})
	}
}

// callSet is the GitHub calls of one lookup with one allowed org and one page of teams.
const callSet = 3

func TestChangedResourceIsFetchedAgain(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	alice := githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"tok-alice"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Platform"}}}
	gh.AddUser(alice)
	e, _ := conditionalEnv(t, gh, 0)
	if a := e.review(t, "tok-alice"); !slices.Contains(a.Status.User.Groups, "github:acme/platform") || slices.Contains(a.Status.User.Groups, "github:acme/security") {
		t.Fatalf("first review groups %v", a.Status.User.Groups)
	}

	// The user joins a team: GET /user/teams answers 200 with the new list, the rest 304.
	alice.Teams = append(alice.Teams, githubapi.Team{Org: "acme", Name: "Security"})
	gh.AddUser(alice)
	e.clock.advance(DefaultCacheTTL + time.Second)
	used := gh.RateLimitUsed("tok-alice")
	if a := e.review(t, "tok-alice"); !slices.Contains(a.Status.User.Groups, "github:acme/security") {
		t.Fatalf("after joining a team: groups %v", a.Status.User.Groups)
	}
	if n := gh.RateLimitUsed("tok-alice") - used; n != 1 {
		t.Fatalf("%d units, want 1 (the changed /user/teams)", n)
	}

	// Then the membership becomes pending: the membership answers 200 and the user is refused.
	if err := gh.SetMembership("alice", "acme", "pending"); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(DefaultCacheTTL + time.Second)
	if a := e.review(t, "tok-alice"); a.Status.Authenticated {
		t.Fatalf("pending member authenticated: %+v", a.Status)
	}
}

// TestOneTokensAnswerIsNeverServedToAnother plays a server that gives the same ETag to every
// user and answers 304 to any If-None-Match, as a cache ignoring Vary: Authorization would:
// a store keyed by URL alone would then hand alice's body to bob.
func TestOneTokensAnswerIsNeverServedToAnother(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"tok-alice"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Admins"}}})
	gh.AddUser(githubapi.User{Login: "bob", ID: 1002, Tokens: []string{"tok-bob"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Interns"}}})
	var mu sync.Mutex
	conditional := map[string]int{} // If-None-Match requests by token
	sameETag := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.Header.Get("If-None-Match") != "" {
			mu.Lock()
			conditional[tok]++
			mu.Unlock()
			w.WriteHeader(http.StatusNotModified)
			return
		}
		rec := httptest.NewRecorder()
		gh.Handler().ServeHTTP(rec, r)
		maps.Copy(w.Header(), rec.Header())
		if rec.Code == http.StatusOK {
			w.Header().Set("ETag", `"same-for-everyone"`)
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(sameETag.Close)
	e := newEnv(t, gh, func(c *Config) { c.GitHubAPIURL = sameETag.URL; c.Orgs = []string{"acme"} })

	for _, tc := range []struct {
		token, wantUsername, wantTeam string
		wantConditional               int
	}{
		{"tok-alice", "github:alice:1001", "github:acme/admins", 0},
		{"tok-bob", "github:bob:1002", "github:acme/interns", 0},
	} {
		a := e.review(t, tc.token)
		if a.Status.User.Username != tc.wantUsername || !slices.Contains(a.Status.User.Groups, tc.wantTeam) {
			t.Fatalf("%s: %s %v, want %s with %s", tc.token, a.Status.User.Username, a.Status.User.Groups, tc.wantUsername, tc.wantTeam)
		}
		mu.Lock()
		n := conditional[tc.token]
		mu.Unlock()
		if n != tc.wantConditional {
			t.Fatalf("%s: %d requests with If-None-Match, want %d (no other token's ETag)", tc.token, n, tc.wantConditional)
		}
	}
	// Each token's own answer is revalidated once its identity expires.
	e.h.lookup.(*cache).next.(*gitHub).transport.(*conditionalTransport).now = e.clock.now
	e.clock.advance(DefaultCacheTTL + time.Second)
	if a := e.review(t, "tok-bob"); a.Status.User.Username != "github:bob:1002" || !slices.Contains(a.Status.User.Groups, "github:acme/interns") {
		t.Fatalf("bob revalidated: %s %v", a.Status.User.Username, a.Status.User.Groups)
	}
	mu.Lock()
	defer mu.Unlock()
	if conditional["tok-bob"] != callSet {
		t.Fatalf("bob's revalidation sent %d conditional requests, want %d", conditional["tok-bob"], callSet)
	}
}

// countingTransport answers every GET with a 200 of size bytes and an ETag, or 304 when asked
// with that ETag, and records the If-None-Match of each request.
type countingTransport struct {
	mu          sync.Mutex
	size        int
	ifNoneMatch []string
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inm := req.Header.Get("If-None-Match")
	c.ifNoneMatch = append(c.ifNoneMatch, inm)
	etag := `"` + req.URL.Path + `"`
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Etag": {etag}}, Request: req,
		Body: io.NopCloser(strings.NewReader(strings.Repeat("x", c.size)))}
	if inm == etag {
		resp.StatusCode, resp.Body = http.StatusNotModified, http.NoBody
	}
	return resp, nil
}

func (c *countingTransport) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ifNoneMatch[len(c.ifNoneMatch)-1]
}

func TestConditionalStoreBounds(t *testing.T) {
	get := func(t *testing.T, rt http.RoundTripper, token, path string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "https://api.github.com"+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		_ = resp.Body.Close()
	}
	const body = 1000
	// The size of one kept answer of /user/N.
	sizer := newConditionalTransport(&countingTransport{size: body}, 1<<30)
	get(t, sizer, "tok", "/user/0")
	entrySize := sizer.bytes
	if entrySize < body {
		t.Fatalf("an answer of %d bytes accounted as %d", body, entrySize)
	}

	t.Run("memory stays within maxBytes, least recently used out first", func(t *testing.T) {
		base := &countingTransport{size: body}
		ct := newConditionalTransport(base, 10*entrySize)
		for i := range 100 {
			get(t, ct, fmt.Sprintf("tok-%d", i), fmt.Sprintf("/user/%d", i%10))
			if ct.bytes > ct.maxBytes {
				t.Fatalf("after %d answers: %d bytes kept, bound %d", i+1, ct.bytes, ct.maxBytes)
			}
		}
		if n := ct.entries.Len(); n != 10 {
			t.Fatalf("%d answers kept, want 10", n)
		}
		get(t, ct, "tok-99", "/user/9")
		if base.last() == "" {
			t.Fatal("the most recent answer was not kept")
		}
		get(t, ct, "tok-0", "/user/0")
		if base.last() != "" {
			t.Fatal("the oldest answer was kept")
		}
	})
	t.Run("an answer larger than an eighth of maxBytes is passed on, not kept", func(t *testing.T) {
		base := &countingTransport{size: body}
		ct := newConditionalTransport(base, 4*body)
		get(t, ct, "tok", "/user")
		if n := ct.entries.Len(); n != 0 || ct.bytes != 0 {
			t.Fatalf("%d answers, %d bytes kept", n, ct.bytes)
		}
	})
	t.Run("an answer unconfirmed for StaleFor is forgotten; each 304 confirms it", func(t *testing.T) {
		clock := newClock()
		base := &countingTransport{size: body}
		ct := newConditionalTransport(base, 100*entrySize)
		ct.now = clock.now
		get(t, ct, "tok", "/user")
		for range 3 {
			clock.advance(StaleFor - time.Second)
			get(t, ct, "tok", "/user")
			if base.last() == "" {
				t.Fatal("an answer confirmed less than StaleFor ago was not revalidated")
			}
		}
		clock.advance(StaleFor)
		get(t, ct, "tok", "/user")
		if base.last() != "" {
			t.Fatal("an answer unconfirmed for StaleFor was revalidated")
		}
	})
}

// FuzzConditionalTransport sends GETs answered with any status, ETag and body, twice: the
// transport never panics, and every 200 it returns carries the body the server sent for it or,
// on a 304, the body it kept for the same token and URL.
func FuzzConditionalTransport(f *testing.F) {
	f.Add(200, `"abc"`, []byte(`{"login":"alice"}`), 304)
	f.Add(200, `W/"abc"`, []byte(`[]`), 200)
	f.Add(200, ``, []byte(`{}`), 304)
	f.Add(404, `"abc"`, []byte(`{"message":"Not Found"}`), 304)
	f.Add(200, "\"\x00\"", []byte{}, 500)
	f.Fuzz(func(t *testing.T, firstStatus int, etag string, body []byte, secondStatus int) {
		if firstStatus < 100 || firstStatus > 999 || secondStatus < 100 || secondStatus > 999 {
			return
		}
		statuses := []int{firstStatus, secondStatus}
		n := 0
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			status := statuses[n]
			n++
			h := http.Header{}
			h.Set("ETag", etag)
			return &http.Response{StatusCode: status, Header: h, Request: req, Body: io.NopCloser(strings.NewReader(string(body)))}, nil
		})
		ct := newConditionalTransport(base, 1<<20)
		var kept []byte
		for i := range statuses {
			req := httptest.NewRequest(http.MethodGet, "https://api.github.com/user", nil)
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := ct.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && string(got) != string(body):
				t.Fatalf("call %d: 200 with %q, want %q", i, got, body)
			case statuses[i] == http.StatusNotModified && kept != nil && resp.StatusCode != http.StatusOK:
				t.Fatalf("call %d: a 304 for a kept answer gave %d", i, resp.StatusCode)
			}
			if statuses[i] == http.StatusOK && etag != "" {
				kept = body
			}
		}
		if ct.bytes < 0 || ct.bytes > ct.maxBytes {
			t.Fatalf("%d bytes kept", ct.bytes)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
