package session

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

// TestClusterListFloodLeavesAuthenticateItsNewTokens: GET <issuer>/clusters is a public door
// like the token exchange. Its new tokens must count against the caller's address and the
// public doors' rate (tokenreview.FromClient), answering 429 beyond it, and never against
// /authenticate's own rate: otherwise anyone who reaches the issuer, with tokens of a valid
// checksum minted offline, makes kube-apiserver's reviews of new tokens answer 503.
func TestClusterListFloodLeavesAuthenticateItsNewTokens(t *testing.T) {
	const valid = "gho_alice_review1ktCdU"
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{valid}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	authn, err := tokenreview.New(tokenreview.Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}, NewTokenRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Audiences: []string{clusterA}, Keys: mustKeys(t), GitHub: authn.GitHubLookup()})
	if err != nil {
		t.Fatal(err)
	}
	store, err := fleet.New(fleet.Config{Audiences: []string{clusterA}})
	if err != nil {
		t.Fatal(err)
	}
	h := NewClustersHandler(x, store)
	codes := map[int]int{}
	for i := range 20 {
		req := httptest.NewRequest(http.MethodGet, ClustersPath, nil)
		req.RemoteAddr = "203.0.113.9:40000"
		req.Header.Set("Authorization", "Bearer "+ghtoken.Mint(fmt.Sprintf("gho_flood%030d", i)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		codes[rec.Code]++
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After: %s", rec.Body)
		}
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("20 unknown tokens from one address at the cluster list: answers %v, want 429 beyond the client's rate", codes)
	}
	rec := httptest.NewRecorder()
	authn.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+valid+`"}}`)))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"authenticated":true`) {
		t.Errorf("kube-apiserver's review of a new valid token after the flood: HTTP %d %s", rec.Code, rec.Body)
	}
}
