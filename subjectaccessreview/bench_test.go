package subjectaccessreview

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigPolicy renders an n-rule policy shaped like a large organisation's: per-team rules with
// namespace globs, subresources and resourceNames, a few prefix subjects and denies, and as
// its last rule the only one for user github:last.
func bigPolicy(n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n")
	for i := 0; i < n-1; i++ {
		team := fmt.Sprintf("team-%d", i/4)
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `- name: rule-%d
  effect: Deny
  subjects: [{kind: Group, name: "github:acme/%s-contractors"}]
  resourceRules: [{verbs: [get, list, watch], apiGroups: [""], resources: [secrets]}]
`, i, team)
		case 1:
			fmt.Fprintf(&b, `- name: rule-%d
  effect: Allow
  subjects: [{kind: Group, name: "github:acme/%s"}, {kind: User, name: "github:%s-lead"}]
  namespaces: ["%s-*", "%s"]
  resourceRules:
  - {verbs: [get, list, watch, create, update, patch, delete], apiGroups: ["", apps, batch], resources: [pods, deployments, jobs, services, configmaps]}
  - {verbs: [get, create], apiGroups: [""], resources: [pods/log, pods/exec, pods/portforward]}
`, i, team, team, team, team)
		case 2:
			fmt.Fprintf(&b, `- name: rule-%d
  effect: Allow
  subjects: [{kind: ServiceAccount, namespace: %s, name: "deployer-*"}]
  namespaces: ["%s-*"]
  resourceRules:
  - {verbs: [patch, update], apiGroups: [apps], resources: [deployments, "*/scale"]}
  - {verbs: [get, update], apiGroups: [""], resources: [configmaps], resourceNames: [app-config, feature-flags]}
`, i, team, team)
		case 3:
			fmt.Fprintf(&b, `- name: rule-%d
  effect: Allow
  subjects: [{kind: User, name: "github:%s-bot-*"}]
  nonResourceRules: [{verbs: [get], nonResourceURLs: ["/metrics", "/apis/%s/*"]}]
`, i, team, team)
		}
	}
	fmt.Fprintf(&b, `- name: rule-%d
  effect: Allow
  subjects: [{kind: User, name: "github:last"}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`, n-1)
	return b.String()
}

func benchGroups() []string {
	groups := []string{"github:acme", "system:authenticated"}
	for i := 0; i < 10; i++ {
		groups = append(groups, fmt.Sprintf("github:acme/guild-%d", i))
	}
	// The team whose Allow rule is near the end of a 100-rule policy (rule 97).
	return append(groups, "github:acme/team-24")
}

// BenchmarkAuthorize measures one decision over a 100-rule policy: evaluation alone (user in
// 13 groups, deciding rule near the end; and a request no rule matches), and a whole
// SubjectAccessReview through the HTTP handler, decode and encode included.
func BenchmarkAuthorize(b *testing.B) {
	p := mustParse(b, bigPolicy(100))
	groups := benchGroups()
	match := res("github:octocat", groups, "get", "", "pods", "log", "team-24-prod", "web-0")
	if d := p.Authorize(&match); d.Verdict != Allow || d.Rule != "rule-97" {
		b.Fatalf("benchmark request decided %+v, want Allow by rule-97", d)
	}
	noMatch := res("github:octocat", groups, "delete", "", "nodes", "", "", "node-1")
	if d := p.Authorize(&noMatch); d.Verdict != NoOpinion {
		b.Fatalf("no-match request decided %+v", d)
	}

	b.Run("evaluate/match-near-end", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Authorize(&match)
		}
	})
	b.Run("evaluate/no-match", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Authorize(&noMatch)
		}
	})
	b.Run("http/v1", func(b *testing.B) {
		dir := b.TempDir()
		path := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(path, []byte(bigPolicy(100)), 0o600); err != nil {
			b.Fatal(err)
		}
		a, err := New(Config{PolicyFile: path})
		if err != nil {
			b.Fatal(err)
		}
		body := sarBody(b, APIVersionV1, match)
		if st := postReview(b, a, APIVersionV1, body); !st.Allowed {
			b.Fatalf("not allowed: %+v", st)
		}
		rd := bytes.NewReader(body)
		req := httptest.NewRequest(http.MethodPost, "/authorize", rd)
		w := &discardResponse{h: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			rd.Reset(body)
			a.ServeHTTP(w, req)
		}
	})
}

// discardResponse is a ResponseWriter that keeps nothing, so the benchmark counts the
// handler's own work rather than a recorder's buffering.
type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}
