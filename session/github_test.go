package session

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

// TestExchangeCostsAtMostOneLookupAndNoUnitOn304 drives exchanges through the real GitHub
// lookup of /authenticate (tokenreview.New's cache and client, as `octogate serve` wires them)
// against the GitHub stand-in, which charges a rate-limit unit for every answer but a 304
// ("Making a conditional request does not count against your primary rate limit if a 304
// response is returned",
// https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate).
// A cold exchange makes at most the calls of one /authenticate lookup; once the identity
// cache has expired, the next exchange revalidates with conditional requests, all answered
// 304, and spends no unit.
func TestExchangeCostsAtMostOneLookupAndNoUnitOn304(t *testing.T) {
	const (
		exchanged = "gho_alice_exchange05TK5m"
		reviewed  = "gho_alice_review1ktCdU"
		ttl       = 300 * time.Millisecond
	)
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{exchanged, reviewed},
		Memberships: []githubapi.Membership{{Org: "acme"}},
		Teams:       []githubapi.Team{{Org: "acme", Name: "Platform"}, {Org: "acme", Name: "Security"}}})
	authn, err := tokenreview.New(tokenreview.Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}, CacheTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Audiences: []string{clusterA}, Keys: mustKeys(t), GitHub: authn.GitHubLookup()})
	if err != nil {
		t.Fatal(err)
	}

	// One cold /authenticate lookup, with another token of the same user.
	rec := httptest.NewRecorder()
	authn.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+reviewed+`"}}`)))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"authenticated":true`) {
		t.Fatalf("review: HTTP %d %s", rec.Code, rec.Body)
	}
	lookupCalls := gh.TokenCalls(reviewed)
	if lookupCalls == 0 {
		t.Fatal("the review made no GitHub call")
	}

	exchange := func(what string) tokenreview.Identity {
		t.Helper()
		_, id, oerr := x.Exchange(context.Background(), exchangeReq(exchanged, TokenTypeAccessToken, clusterA))
		if oerr != nil {
			t.Fatalf("%s exchange: %v", what, oerr)
		}
		return id
	}

	cold := exchange("cold")
	calls, units := gh.TokenCalls(exchanged), gh.RateLimitUsed(exchanged)
	if calls == 0 || calls > lookupCalls {
		t.Fatalf("cold exchange: %d GitHub calls, want 1 to %d (one /authenticate lookup)", calls, lookupCalls)
	}
	if units != calls || gh.NotModified(exchanged) != 0 {
		t.Fatalf("cold exchange: %d units, %d 304s for %d calls; want every call a 200", units, gh.NotModified(exchanged), calls)
	}

	// The identity cache keeps the answer for ttl by the wall clock (tokenreview.Config has no
	// clock): wait it out, so that the next exchange must ask GitHub again.
	time.Sleep(ttl + 50*time.Millisecond)
	warm := exchange("after expiry")
	if warm.Username != cold.Username || warm.UID != cold.UID || strings.Join(warm.Groups, ",") != strings.Join(cold.Groups, ",") {
		t.Fatalf("after expiry: identity %+v, want %+v", warm, cold)
	}
	again := gh.TokenCalls(exchanged) - calls
	if again == 0 || again > lookupCalls {
		t.Fatalf("exchange after expiry: %d GitHub calls, want 1 to %d (one /authenticate lookup)", again, lookupCalls)
	}
	if n := gh.NotModified(exchanged); n != again {
		t.Errorf("exchange after expiry: %d of %d calls answered 304, want all (conditional requests with the kept ETags)", n, again)
	}
	if n := gh.RateLimitUsed(exchanged) - units; n != 0 {
		t.Errorf("exchange after expiry spent %d rate-limit units, want 0 (every answer was 304)", n)
	}
}
