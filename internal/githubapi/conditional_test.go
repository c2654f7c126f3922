package githubapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// get sends one GET with tok and, when set, If-None-Match.
func get(t *testing.T, s *Server, path, tok, ifNoneMatch string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestConditionalRequests(t *testing.T) {
	s := New()
	t.Cleanup(s.Close)
	s.AddUser(User{Login: "alice", Tokens: []string{"tok-alice", "tok-alice-2"}, Memberships: []Membership{{Org: "acme"}},
		Teams: []Team{{Org: "acme", Name: "Platform"}}})
	s.AddUser(User{Login: "bob", Tokens: []string{"tok-bob"}, Memberships: []Membership{{Org: "acme"}}})

	for _, path := range []string{"user", "user/memberships/orgs/acme", "user/teams?per_page=100", "api/v3/user"} {
		t.Run(path+": 200 has a strong ETag and Vary; If-None-Match with it is 304, no body, no unit", func(t *testing.T) {
			s.ResetCalls()
			first, body := get(t, s, path, "tok-alice", "")
			etag := first.Header.Get("ETag")
			if first.StatusCode != http.StatusOK || len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Fatalf("first answer %d ETag %q", first.StatusCode, etag)
			}
			if v := first.Header.Get("Vary"); v != "Accept, Authorization" {
				t.Fatalf("Vary %q", v)
			}
			if again, _ := get(t, s, path, "tok-alice", ""); again.Header.Get("ETag") != etag {
				t.Fatalf("same body, ETag %q then %q", etag, again.Header.Get("ETag"))
			}
			used := s.RateLimitUsed("tok-alice")
			if used != 2 || first.Header.Get("X-RateLimit-Used") != "1" || first.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(rateLimitPerHour-1) {
				t.Fatalf("two 200s cost %d units; first X-RateLimit-Used %q, Remaining %q", used, first.Header.Get("X-RateLimit-Used"), first.Header.Get("X-RateLimit-Remaining"))
			}
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				resp, b := get(t, s, path, "tok-alice", inm)
				if resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != etag {
					t.Fatalf("If-None-Match %s: %d, %d body bytes, ETag %q", inm, resp.StatusCode, len(b), resp.Header.Get("ETag"))
				}
				if got := resp.Header.Get("X-RateLimit-Used"); got != strconv.Itoa(used) {
					t.Fatalf("304: X-RateLimit-Used %s, want %d (unchanged)", got, used)
				}
				if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(rateLimitPerHour-used) {
					t.Fatalf("304: X-RateLimit-Remaining %s, want %d", got, rateLimitPerHour-used)
				}
			}
			if n := s.RateLimitUsed("tok-alice"); n != used {
				t.Fatalf("304s cost %d units", n-used)
			}
			if n := s.NotModified("tok-alice"); n != 4 {
				t.Fatalf("NotModified %d, want 4", n)
			}
			if n := s.TokenCalls("tok-alice"); n != 6 {
				t.Fatalf("TokenCalls %d, want 6 (every request counts as received)", n)
			}
			if resp, b := get(t, s, path, "tok-alice", `"stale"`); resp.StatusCode != http.StatusOK || string(b) != string(body) {
				t.Fatalf("unknown ETag: %d %s", resp.StatusCode, b)
			}
		})
	}

	t.Run("a changed resource answers 200 with a new ETag", func(t *testing.T) {
		first, _ := get(t, s, "user/teams", "tok-alice", "")
		s.AddUser(User{Login: "alice", Tokens: []string{"tok-alice", "tok-alice-2"}, Memberships: []Membership{{Org: "acme"}},
			Teams: []Team{{Org: "acme", Name: "Platform"}, {Org: "acme", Name: "Security"}}})
		resp, b := get(t, s, "user/teams", "tok-alice", first.Header.Get("ETag"))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == first.Header.Get("ETag") || len(b) == 0 {
			t.Fatalf("after a team was added: %d ETag %q (was %q)", resp.StatusCode, resp.Header.Get("ETag"), first.Header.Get("ETag"))
		}
	})

	t.Run("units are per token", func(t *testing.T) {
		s.ResetCalls()
		get(t, s, "user", "tok-alice", "")
		get(t, s, "user", "tok-alice-2", "")
		get(t, s, "user", "tok-alice-2", "")
		bob, _ := get(t, s, "user", "tok-bob", "")
		if a, a2, b := s.RateLimitUsed("tok-alice"), s.RateLimitUsed("tok-alice-2"), s.RateLimitUsed("tok-bob"); a != 1 || a2 != 2 || b != 1 {
			t.Fatalf("units alice %d, alice-2 %d, bob %d; want 1 2 1", a, a2, b)
		}
		if bob.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(rateLimitPerHour-1) {
			t.Fatalf("bob's Remaining %q", bob.Header.Get("X-RateLimit-Remaining"))
		}
	})

	t.Run("errors carry no ETag and cost a unit", func(t *testing.T) {
		s.ResetCalls()
		resp, _ := get(t, s, "user/memberships/orgs/umbrella", "tok-alice", "*")
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("ETag") != "" || s.RateLimitUsed("tok-alice") != 1 {
			t.Fatalf("404: ETag %q, units %d", resp.Header.Get("ETag"), s.RateLimitUsed("tok-alice"))
		}
	})
}

func FuzzNoneMatch(f *testing.F) {
	const etag = `"0123abcd"`
	for _, s := range []string{"", "*", etag, "W/" + etag, `"a", ` + etag, `"a","b"`, ` , ,`, `W/"0123abcd`, "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		if noneMatch(header, etag) && !strings.Contains(header, etag) && !strings.Contains(header, "*") {
			t.Fatalf("If-None-Match %q matched %s", header, etag)
		}
	})
}
