package session

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/tokenreview"
)

func clustersHandler(t *testing.T) (*ClustersHandler, *issuerEnv) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(path, []byte(fleetClusters), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := fleet.New(fleet.Config{File: path, Audiences: []string{"legacy"}})
	if err != nil {
		t.Fatal(err)
	}
	e := fleetIssuer(t)
	e.github.errs["gho_down"] = &Error{Reason: tokenreview.ReasonGitHubUnavailable, Msg: "GitHub did not answer", kind: tokenreview.ErrUnavailable}
	return NewClustersHandler(e.x, store), e
}

func getClusters(h http.Handler, auth string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, ClustersPath, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	h.ServeHTTP(rec, req)
	return rec
}

func TestClusterListIsThePersonsClustersOnly(t *testing.T) {
	h, _ := clustersHandler(t)
	for _, tc := range []struct {
		token string
		user  string
		want  string
	}{
		{"gho_alice0iufm3", alice.Username, "legacy prod staging"},
		{"gho_bob", bob.Username, "legacy staging"},
	} {
		rec := getClusters(h, "Bearer "+tc.token)
		if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: HTTP %d %s", tc.token, rec.Code, rec.Body)
		}
		var list ClusterList
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list.Clusters {
			names = append(names, c.Name)
		}
		if list.Kind != ClusterListKind || list.User != tc.user || strings.Join(names, " ") != tc.want {
			t.Errorf("%s: %+v, want clusters %s", tc.token, list, tc.want)
		}
		if strings.Contains(rec.Body.String(), "subjects") || strings.Contains(rec.Body.String(), "github:acme/") {
			t.Errorf("%s: the list says who may use a cluster: %s", tc.token, rec.Body)
		}
		if tc.token == "gho_alice0iufm3" {
			prod := list.Clusters[1]
			if prod.Server != "https://prod.example.com:6443" || prod.Accepts != fleet.AcceptsWebhook || prod.Revocation != RevocationFeed {
				t.Errorf("prod %+v", prod)
			}
			if legacy := list.Clusters[0]; legacy.Revocation != "" {
				t.Errorf("a cluster known only by name has revocation %q", legacy.Revocation)
			}
			if list.SessionTTL != DefaultTTL.String() {
				t.Errorf("sessionTTL %q, want %v", list.SessionTTL, DefaultTTL)
			}
		}
	}
}

func TestClusterListRefusals(t *testing.T) {
	h, _ := clustersHandler(t)
	for _, tc := range []struct {
		name, auth string
		status     int
		reason     string
	}{
		{"no token", "", 401, "[invalid_token]"},
		{"not a bearer token", "Basic YWxpY2U6eA==", 401, "[invalid_token]"},
		{"a token GitHub refuses", "Bearer gho_carol", 401, "[not_member]"},
		{"a session (a JWT)", "Bearer eyJhbGciOiJFUzI1NiJ9.eyJhIjoxfQ.c2ln", 401, "[invalid_token]"},
		{"GitHub down", "Bearer gho_down", 503, "[github_unavailable]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := getClusters(h, tc.auth)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.reason) {
				t.Errorf("HTTP %d %s, want %d %s", rec.Code, rec.Body, tc.status, tc.reason)
			}
			if tc.status == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
			}
			if strings.Contains(rec.Body.String(), "gho_") {
				t.Errorf("the answer quotes the token: %s", rec.Body)
			}
		})
	}
	if got := ClustersRoute("https://h.example.com/octogate/"); got != "/octogate/clusters" {
		t.Errorf("ClustersRoute %q", got)
	}
}

func TestClusterListTakesASessionOfThisIssuer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(path, []byte(fleetClusters), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := fleet.New(fleet.Config{File: path})
	if err != nil {
		t.Fatal(err)
	}
	e := fleetIssuer(t)
	var revokedUID string
	h := NewClustersHandler(e.x, store, AcceptSessions(func(uid string, _ time.Time) bool { return uid == revokedUID }))
	resp, _, oerr := e.x.Exchange(context.Background(), exchangeReq("gho_alice0iufm3", TokenTypeAccessToken, "staging"))
	if oerr != nil {
		t.Fatal(oerr)
	}
	githubCalls := e.github.calls
	rec := getClusters(h, "Bearer "+resp.AccessToken)
	var list ClusterList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); rec.Code != 200 || err != nil || list.User != alice.Username || len(list.Clusters) != 2 {
		t.Fatalf("alice's staging session: HTTP %d %s", rec.Code, rec.Body)
	}
	if n := e.github.calls - githubCalls; n != 0 {
		t.Errorf("a session at the cluster list made %d GitHub lookups, want none (the issuer's keys verify it)", n)
	}
	if rec := getClusters(NewClustersHandler(e.x, store), "Bearer "+resp.AccessToken); rec.Code != 401 {
		t.Errorf("without AcceptSessions a session is refused: HTTP %d %s", rec.Code, rec.Body)
	}
	other := signMap(t, e.keys, map[string]any{"iss": testIssuer, "aud": "qa", "sub": "1001", "username": alice.Username, "uid": "1001",
		"iat": e.clock.t.Unix(), "nbf": e.clock.t.Unix(), "exp": e.clock.t.Add(time.Minute).Unix(), "jti": "x"})
	if rec := getClusters(h, "Bearer "+other); rec.Code != 401 {
		t.Errorf("a session for a cluster this issuer does not serve: HTTP %d %s", rec.Code, rec.Body)
	}
	revokedUID = alice.UID
	if rec := getClusters(h, "Bearer "+resp.AccessToken); rec.Code != 401 || !strings.Contains(rec.Body.String(), "[session_revoked]") {
		t.Errorf("a revoked session: HTTP %d %s", rec.Code, rec.Body)
	}
}
