package main

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
)

// The people's GitHub tokens, of GitHub's format (the checksum the issuer checks offline).
var (
	clustersTokenAlice = ghtoken.Mint("gho_clusters_alice")
	clustersTokenBob   = ghtoken.Mint("gho_clusters_bob")
	clustersTokenCarol = ghtoken.Mint("gho_clusters_carol")
)

// fleetIssuer serves session's real cluster list and token exchange for a clusters file with prod limited to
// acme/sre and staging open to every member, looking GitHub tokens up at apiURL.
func fleetIssuer(t *testing.T, apiURL string) (string, string) {
	t.Helper()
	issuer, ca, _ := fleetIssuerWithLogout(t, apiURL)
	return issuer, ca
}

// fleetIssuerWithLogout is fleetIssuer with session's real logout endpoint, which revokes
// through the returned recorder; the issuer refuses the sessions it revoked.
func fleetIssuerWithLogout(t *testing.T, apiURL string) (string, string, *recordingRevoker) {
	t.Helper()
	lookup, err := tokenreview.NewLookup(tokenreview.Config{GitHubAPIURL: apiURL, Orgs: []string{"acme=2001"}})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "clusters.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: octogate.dev/v1alpha1
kind: SessionClusters
clusters:
- {name: prod, server: "https://prod.example.com:6443", accepts: webhook, labels: {env: prod, tier: a}, subjects: [{kind: Group, name: "github:acme/sre"}]}
- {name: staging, server: "https://staging.example.com:6443", accepts: apiserver}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := fleet.New(fleet.Config{File: file})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	x, err := session.NewExchanger(session.ExchangerConfig{Issuer: srv.URL, Targets: store, Keys: keys, GitHub: lookup})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(session.ClustersPath, session.NewClustersHandler(x, store))
	mux.Handle(session.TokenPath, session.NewTokenHandler(x))
	revoker := &recordingRevoker{}
	logout, err := session.NewRevokeHandler(x, revoker, revoker.revokedSince)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle(session.RevokePath, logout)
	h = mux
	ca := filepath.Join(dir, "issuer-ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, ca, revoker
}

// recordingRevoker is a session.SessionRevoker that records the revocations, whose
// revokedSince is the issuer's refusal of the sessions revoked for every cluster.
type recordingRevoker struct {
	mu    sync.Mutex
	calls []string // "uid clusters..."
	at    map[string]time.Time
}

func (r *recordingRevoker) RevokeSessions(_ context.Context, uid string, clusters []string, at time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, strings.Join(append([]string{uid}, clusters...), " "))
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	if len(clusters) == 0 {
		r.at[uid] = at
	}
	return nil
}

func (r *recordingRevoker) revokedSince(uid string, iat time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[uid]
	return ok && !at.Before(iat)
}

func (r *recordingRevoker) revocations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func TestClustersCommandPrintsThePersonsClusters(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{clustersTokenAlice},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "SRE", Slug: "sre"}}})
	gh.AddUser(githubapi.User{Login: "bob", ID: 1002, Tokens: []string{clustersTokenBob},
		Memberships: []githubapi.Membership{{Org: "acme"}}})
	gh.AddUser(githubapi.User{Login: "carol", ID: 1003, Tokens: []string{clustersTokenCarol}})
	issuer, ca := fleetIssuer(t, gh.URL())

	for _, tc := range []struct {
		name, token string
		code        int
		out         string
		errWant     string
	}{
		{name: "alice, in acme/sre, sees prod and staging", token: clustersTokenAlice, out: "" +
			"NAME      ACCEPTS     SERVER                             LABELS\n" +
			"prod      webhook     https://prod.example.com:6443      env=prod,tier=a\n" +
			"staging   apiserver   https://staging.example.com:6443   <none>\n"},
		{name: "bob sees staging only", token: clustersTokenBob, out: "" +
			"NAME      ACCEPTS     SERVER                             LABELS\n" +
			"staging   apiserver   https://staging.example.com:6443   <none>\n"},
		{name: "carol, not a member, is refused with the reason", token: clustersTokenCarol, code: 1, errWant: "invalid_token: [not_member]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("GITHUB_TOKEN", tc.token)
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, "clusters", "--issuer", issuer, "--session-ca-file", ca)
			if code != tc.code || out != tc.out || !strings.Contains(stderr.String(), tc.errWant) {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit %d, stdout:\n%s\nstderr with %q", code, out, stderr, tc.code, tc.out, tc.errWant)
			}
			if strings.Contains(stderr.String()+out, tc.token) {
				t.Errorf("the output shows the token")
			}
		})
	}
}

func TestDoctorExplainsAClusterLimitedToOthers(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddUser(githubapi.User{Login: "bob", ID: 1002, Tokens: []string{clustersTokenBob},
		Memberships: []githubapi.Membership{{Org: "acme"}}})
	issuer, ca := fleetIssuer(t, gh.URL())
	isolate(t)
	t.Setenv(envGitHubToken, clustersTokenBob)
	stderr := &syncBuffer{}
	out, code := runOctogate(t, stderr, "doctor", "--kubeconfig", "/nonexistent", "--session-issuer", issuer, "--audience", "prod", "--session-ca-file", ca)
	for _, w := range []string{"error:    invalid_target", "reason:   cluster_not_allowed", `may not use cluster "prod"`, "limits it to other people or teams", "octogate clusters --issuer URL"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout does not say %q:\n%s", w, out)
		}
	}
	if code != 1 || strings.Contains(out, "not in the issuer's OCTOGATE_SESSION_AUDIENCES") {
		t.Errorf("exit %d, want 1 with the cluster_not_allowed explanation only:\n%s", code, out)
	}
}
