package subjectaccessreview

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// elevationPolicy has one rule and the elevations of docs/elevation.md.
const elevationPolicy = validHeader + `rules:
- name: members-read-prod
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get, list], apiGroups: [""], resources: [pods]}]
elevations:
- name: prod-debug
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/sre"}, {kind: User, name: "github:erin:*"}]
  namespaces: [prod, "prod-*"]
  resourceRules: [{verbs: [get, create], apiGroups: [""], resources: [pods/exec]}]
  maxDuration: 1h
  requireReason: true
- name: metrics
  subjects: [{kind: User, name: "github:bob:1002"}]
  approvers: [{kind: Group, name: "github:acme/sre"}]
  approvals: 2
  nonResourceRules: [{verbs: [get], nonResourceURLs: ["/metrics"]}]
  maxDuration: 15m
- name: break-glass
  subjects: [{kind: Group, name: "github:acme/oncall"}]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
  maxDuration: 30m
  requireReason: true
  breakGlass: true
`

func TestElevationsLoad(t *testing.T) {
	p, err := Parse([]byte(elevationPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.ElevationNames(), []string{"break-glass", "metrics", "prod-debug"}; !slices.Equal(got, want) {
		t.Fatalf("ElevationNames = %v, want %v", got, want)
	}
	e, ok := p.Elevation("prod-debug")
	if !ok || e.MaxDuration != time.Hour || e.Approvals != 1 || !e.RequireReason || e.BreakGlass || !slices.Equal(e.Namespaces, []string{"prod", "prod-*"}) {
		t.Fatalf("prod-debug = %+v, %v", e, ok)
	}
	if e, _ := p.Elevation("metrics"); e.Approvals != 2 || e.MaxDuration != 15*time.Minute {
		t.Fatalf("metrics = %+v", e)
	}
	if e, _ := p.Elevation("break-glass"); !e.BreakGlass {
		t.Fatalf("break-glass = %+v", e)
	}
	if _, ok := p.Elevation("nope"); ok {
		t.Fatal("unknown elevation found")
	}
	// An elevation grants nothing by itself: the policy's answers are the rules'.
	exec := res("github:bob:1002", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web")
	if d := p.Authorize(&exec); d.Verdict != NoOpinion {
		t.Fatalf("exec before any request: %+v", d)
	}
}

func TestElevationErrorsNameFieldPaths(t *testing.T) {
	elevation := func(fields string) string {
		return validHeader + "elevations:\n- name: e\n" + fields
	}
	const ok = `  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/sre"}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
  maxDuration: 1h
`
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"unknown field", elevation(ok + "  maxDurations: 1h\n"), []string{"elevations[0].maxDurations: unknown field"}},
		{"everything missing", validHeader + "elevations:\n- {}\n", []string{
			"elevations[0].name: required", "elevations[0].subjects: required", "elevations[0].approvers: required unless breakGlass is true",
			"elevations[0].resourceRules: at least one", "elevations[0].maxDuration: required",
		}},
		{"name not a DNS label", validHeader + "elevations:\n- name: Prod_Debug\n" + ok, []string{`elevations[0].name: "Prod_Debug" must be at most 63 lowercase`}},
		{"duplicate name", elevation(ok) + "- name: e\n" + ok, []string{`elevations[1].name: "e" duplicates elevations[0].name`}},
		{"service account subject", elevation(strings.Replace(ok, `{kind: Group, name: "github:acme"}`, `{kind: ServiceAccount, name: ci, namespace: ci}`, 1)), []string{`elevations[0].subjects[0].kind: "ServiceAccount" is not allowed here`}},
		{"bad approver kind", elevation(strings.Replace(ok, `{kind: Group, name: "github:acme/sre"}`, `{kind: Team, name: sre}`, 1)), []string{`elevations[0].approvers[0].kind: "Team" must be User, Group or ServiceAccount`}},
		{"three approvals", elevation(ok + "  approvals: 3\n"), []string{"elevations[0].approvals: 3 must be 1 or 2"}},
		{"not a duration", elevation(strings.Replace(ok, "maxDuration: 1h", "maxDuration: an hour", 1)), []string{`elevations[0].maxDuration: "an hour" is not a Go duration`}},
		{"longer than a day", elevation(strings.Replace(ok, "maxDuration: 1h", "maxDuration: 25h", 1)), []string{`elevations[0].maxDuration: "25h" must be positive and at most 24h0m0s`}},
		{"negative duration", elevation(strings.Replace(ok, "maxDuration: 1h", "maxDuration: -1h", 1)), []string{`elevations[0].maxDuration: "-1h" must be positive`}},
		{"break-glass without a reason", elevation(ok + "  breakGlass: true\n"), []string{"elevations[0].requireReason: must be true when breakGlass is true"}},
		{"bad verb", elevation(strings.Replace(ok, "verbs: [get]", "verbs: [GET]", 1)), []string{`elevations[0].resourceRules[0].verbs[0]: "GET" must be`}},
		{"namespaces with non-resource rules", elevation(ok + "  namespaces: [prod]\n  nonResourceRules: [{verbs: [get], nonResourceURLs: [/metrics]}]\n"), []string{"elevations[0].namespaces: must be empty when nonResourceRules are set"}},
		{"bad namespace glob", elevation(ok + "  namespaces: [Prod]\n"), []string{`elevations[0].namespaces[0]: "Prod" must be a namespace name`}},
		{"empty clusters", elevation(ok + "  clusters: []\n"), []string{"elevations[0].clusters: must not be empty (omit clusters for an elevation of every cluster)"}},
		{"bad cluster name", elevation(ok + "  clusters: [prod, Staging_EU]\n"), []string{`elevations[0].clusters[1]: "Staging_EU" must be lowercase letters, digits, '-' and '.'`}},
		{"duplicate cluster", elevation(ok + "  clusters: [prod, staging, prod]\n"), []string{`elevations[0].clusters[2]: "prod" duplicates elevations[0].clusters[0]`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			msg, at := err.Error(), 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q\nlacks (in order) %q", msg, w)
				}
				at += i + len(w)
			}
		})
	}
	// Break-glass needs no approvers.
	if _, err := Parse([]byte(elevation(`  subjects: [{kind: Group, name: "github:acme/oncall"}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
  maxDuration: 1h
  requireReason: true
  breakGlass: true
`))); err != nil {
		t.Fatalf("break-glass without approvers refused: %v", err)
	}
}

func TestElevationSubjectsAndGrants(t *testing.T) {
	p, err := Parse([]byte(elevationPolicy))
	if err != nil {
		t.Fatal(err)
	}
	bob, bobGroups := "github:bob:1002", []string{"github:acme", "github:acme/web"}
	alice, aliceGroups := "github:alice:1001", []string{"github:acme", "github:acme/sre"}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"an org member may request prod-debug", p.MayRequest("prod-debug", bob, bobGroups), true},
		{"someone outside the org may not", p.MayRequest("prod-debug", "github:carol:1003", nil), false},
		{"a service account may not, whatever its groups", p.MayRequest("prod-debug", "system:serviceaccount:ci:x", []string{"github:acme"}), false},
		{"an unknown elevation may not be requested", p.MayRequest("nope", bob, bobGroups), false},
		{"bob by name may request metrics", p.MayRequest("metrics", bob, nil), true},
		{"an sre member approves", p.MayApprove("prod-debug", alice, aliceGroups), true},
		{"a user prefix approver approves", p.MayApprove("prod-debug", "github:erin:1005", nil), true},
		{"a member outside sre does not", p.MayApprove("prod-debug", bob, bobGroups), false},
		{"exec in prod is granted", p.ElevationAllows("prod-debug", "", ptr(res(bob, bobGroups, "create", "", "pods", "exec", "prod", "web"))), true},
		{"exec in prod-eu is granted", p.ElevationAllows("prod-debug", "", ptr(res(bob, bobGroups, "create", "", "pods", "exec", "prod-eu", "web"))), true},
		{"a request narrowed to prod-eu does not grant prod", p.ElevationAllows("prod-debug", "prod-eu", ptr(res(bob, bobGroups, "create", "", "pods", "exec", "prod", "web"))), false},
		{"exec in staging is not granted", p.ElevationAllows("prod-debug", "", ptr(res(bob, bobGroups, "create", "", "pods", "exec", "staging", "web"))), false},
		{"delete in prod is not granted", p.ElevationAllows("prod-debug", "", ptr(res(bob, bobGroups, "delete", "", "pods", "", "prod", "web"))), false},
		{"a non-resource elevation grants its path", p.ElevationAllows("metrics", "", ptr(nonRes(bob, nil, "get", "/metrics"))), true},
		{"prod-eu may narrow prod-debug", p.ElevationNamespaceAllowed("prod-debug", "prod-eu"), true},
		{"staging may not narrow prod-debug", p.ElevationNamespaceAllowed("prod-debug", "staging"), false},
		{"any namespace may narrow an elevation without namespaces", p.ElevationNamespaceAllowed("break-glass", "staging"), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v", c.name, c.got)
		}
	}
	if got := p.ElevationsAllowing(ptr(res(bob, bobGroups, "create", "", "pods", "exec", "prod", "web"))); !slices.Equal(got, []string{"prod-debug"}) {
		t.Errorf("ElevationsAllowing(bob exec prod) = %v", got)
	}
	if got := p.ElevationsAllowing(ptr(res("github:carol:1003", nil, "create", "", "pods", "exec", "prod", "web"))); got != nil {
		t.Errorf("ElevationsAllowing(carol) = %v: carol may request none", got)
	}
	if got := p.ElevationsAllowing(ptr(res("system:kube-scheduler", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web"))); got != nil {
		t.Errorf("ElevationsAllowing(system user) = %v", got)
	}
}

func ptr[T any](v T) *T { return &v }

// fakeActive holds grants that end at end, as elevation.Store's do.
type fakeActive struct {
	grants map[string][]ActiveGrant
	end    time.Time
}

func (f fakeActive) Active(user string, now time.Time) []ActiveGrant {
	if !now.Before(f.end) {
		return nil
	}
	return f.grants[user]
}

func withUID(a Attributes, uid string) Attributes {
	a.UID = uid
	return a
}

func TestDecideWithElevations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(elevationPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	now := t0
	active := fakeActive{end: t0.Add(time.Hour), grants: map[string][]ActiveGrant{
		"github:bob:1002": {{Request: "prod-debug-x7k2p", Elevation: "prod-debug", Namespace: "prod", RequesterUID: "1002"}},
	}}
	a, err := New(Config{PolicyFile: path, Elevations: active, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	bobExec := res("github:bob:1002", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web")
	carolExec := res("github:carol:1003", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web")
	bobExecEU := res("github:bob:1002", []string{"github:acme"}, "create", "", "pods", "exec", "prod-eu", "web")
	bobRead := res("github:bob:1002", []string{"github:acme"}, "get", "", "pods", "", "prod", "web")
	const hint = "no rule allows this; elevation prod-debug would: octogate request prod-debug --reason ..."
	cases := []struct {
		name    string
		attrs   Attributes
		at      time.Time
		verdict Verdict
		reason  string
	}{
		{"bob's approved exec in prod is allowed", bobExec, t0, Allow, "octogate: elevation prod-debug (request prod-debug-x7k2p)"},
		{"the rules still decide first", bobRead, t0, Allow, "octogate: rule members-read-prod"},
		{"bob's request is narrowed to prod: prod-eu gets the hint", bobExecEU, t0, NoOpinion, hint},
		{"carol holds no grant and gets the hint", carolExec, t0, NoOpinion, hint},
		{"at its end time bob is back to the hint", bobExec, t0.Add(time.Hour), NoOpinion, hint},
		{"another person with bob's username (a recycled login) holds nothing", withUID(bobExec, "7777"), t0, NoOpinion, hint},
		{"bob's uid holds it", withUID(bobExec, "1002"), t0, Allow, "octogate: elevation prod-debug (request prod-debug-x7k2p)"},
		{"bob out of acme holds his grant no longer", res("github:bob:1002", []string{"github:other"}, "create", "", "pods", "exec", "prod", "web"), t0, NoOpinion, ReasonNoMatch},
		{"a request no elevation covers keeps the plain reason", res("github:bob:1002", []string{"github:acme"}, "delete", "", "pods", "", "prod", "web"), t0, NoOpinion, ReasonNoMatch},
		{"system users are never elevated nor hinted", res("system:kube-scheduler", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web"), t0, NoOpinion, ReasonSystemUser},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now = tc.at
			d := a.Decide(&tc.attrs)
			if d.Verdict != tc.verdict || d.Reason != tc.reason {
				t.Fatalf("decision %v %q, want %v %q", d.Verdict, d.Reason, tc.verdict, tc.reason)
			}
			if tc.verdict == Allow && strings.HasPrefix(d.Rule, ElevationRulePrefix) && d.Group() != "octogate:elevation:prod-debug" {
				t.Fatalf("an elevation's decision gives the proxy group %q", d.Group())
			}
		})
	}
}

func TestElevationsGetProxyGrants(t *testing.T) {
	p, err := Parse([]byte(elevationPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, g := range p.Grants() {
		if g.Name != "octogate:elevation:prod-debug" {
			continue
		}
		found = true
		if g.Rule != "elevation:prod-debug" || !slices.Equal(g.Namespaces, []string{"prod", "prod-*"}) || len(g.Rules) != 1 ||
			!slices.Equal(g.Rules[0].Resources, []string{"pods/exec"}) || !slices.Equal(g.Rules[0].Verbs, []string{"get", "create"}) {
			t.Fatalf("grant %+v", g)
		}
	}
	if !found {
		t.Fatal("no grant for elevation prod-debug")
	}
}

// TestDenyRuleWinsOverAnActiveElevation: an active elevation fills only what the rules leave
// without opinion; a Deny rule refuses its requester as anyone else, and the grant reaches no
// namespace, verb or non-resource URL beyond the elevation's.
func TestDenyRuleWinsOverAnActiveElevation(t *testing.T) {
	policy := strings.Replace(elevationPolicy, "rules:\n", `rules:
- name: no-exec-in-prod-payments
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: [prod-payments]
  resourceRules: [{verbs: ["*"], apiGroups: [""], resources: [pods/exec]}]
`, 1)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	active := fakeActive{end: t0.Add(time.Hour), grants: map[string][]ActiveGrant{
		"github:bob:1002": {{Request: "prod-debug-x7k2p", Elevation: "prod-debug", RequesterUID: "1002"}},
	}}
	a, err := New(Config{PolicyFile: path, Elevations: active, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	bob := []string{"github:acme"}
	for _, c := range []struct {
		name    string
		attrs   Attributes
		verdict Verdict
	}{
		{"exec in prod-eu, which the elevation covers", res("github:bob:1002", bob, "create", "", "pods", "exec", "prod-eu", "web"), Allow},
		{"exec in prod-payments, which a Deny rule covers", res("github:bob:1002", bob, "create", "", "pods", "exec", "prod-payments", "web"), Deny},
		{"exec in staging, outside the elevation's namespaces", res("github:bob:1002", bob, "create", "", "pods", "exec", "staging", "web"), NoOpinion},
		{"delete in prod, a verb the elevation lacks", res("github:bob:1002", bob, "delete", "", "pods", "", "prod", "web"), NoOpinion},
		{"exec on a cluster-scoped path", res("github:bob:1002", bob, "create", "", "pods", "exec", "", "web"), NoOpinion},
		{"/metrics, a non-resource URL", Attributes{User: "github:bob:1002", UID: "1002", Groups: bob, Verb: "get", Path: "/metrics"}, NoOpinion},
	} {
		if d := a.Decide(&c.attrs); d.Verdict != c.verdict {
			t.Errorf("%s: %v %q, want %v", c.name, d.Verdict, d.Reason, c.verdict)
		}
	}
}

// TestElevationsOfOtherClusters: an elevation with clusters applies where the policy's cluster
// (Config.Cluster, OCTOGATE_SESSION_AUDIENCE) is one of them: elsewhere, and on a cluster
// without a name, it is not hinted and an active grant of it allows nothing.
func TestElevationsOfOtherClusters(t *testing.T) {
	doc := strings.Replace(elevationPolicy, "  namespaces: [prod, \"prod-*\"]\n", "  namespaces: [prod, \"prod-*\"]\n  clusters: [prod-eu-1, prod-us-1]\n", 1)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	active := fakeActive{end: t0.Add(time.Hour), grants: map[string][]ActiveGrant{
		"github:bob:1002": {{Request: "prod-debug-x7k2p", Elevation: "prod-debug", Namespace: "prod"}},
	}}
	bobExec := res("github:bob:1002", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web")
	carolExec := res("github:carol:1003", []string{"github:acme"}, "create", "", "pods", "exec", "prod", "web")
	const hint = "no rule allows this; elevation prod-debug would: octogate request prod-debug --reason ..."
	for _, tc := range []struct {
		cluster    string
		here       bool
		bob, carol string
	}{
		{"prod-eu-1", true, "octogate: elevation prod-debug (request prod-debug-x7k2p)", hint},
		{"prod-us-1", true, "octogate: elevation prod-debug (request prod-debug-x7k2p)", hint},
		{"staging", false, ReasonNoMatch, ReasonNoMatch},
		{"", false, ReasonNoMatch, ReasonNoMatch},
	} {
		a, err := New(Config{PolicyFile: path, Elevations: active, Now: func() time.Time { return t0 }, Cluster: tc.cluster})
		if err != nil {
			t.Fatal(err)
		}
		p := a.Policy()
		if p.Cluster() != tc.cluster || p.ElevationHere("prod-debug") != tc.here || !p.ElevationHere("metrics") {
			t.Fatalf("cluster %q: Cluster %q, ElevationHere(prod-debug) %v, want %v; metrics names no clusters", tc.cluster, p.Cluster(), p.ElevationHere("prod-debug"), tc.here)
		}
		if d := a.Decide(&bobExec); d.Reason != tc.bob || (d.Verdict == Allow) != tc.here {
			t.Errorf("cluster %q: bob's exec %v %q, want %q", tc.cluster, d.Verdict, d.Reason, tc.bob)
		}
		if d := a.Decide(&carolExec); d.Reason != tc.carol || d.Verdict != NoOpinion {
			t.Errorf("cluster %q: carol's exec %v %q, want %q", tc.cluster, d.Verdict, d.Reason, tc.carol)
		}
		if e, _ := p.Elevation("prod-debug"); !slices.Equal(e.Clusters, []string{"prod-eu-1", "prod-us-1"}) {
			t.Errorf("Clusters = %v", e.Clusters)
		}
	}
	// The parsed policy has no cluster: InCluster gives a copy that has one.
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.ElevationHere("prod-debug") || !p.InCluster("prod-eu-1").ElevationHere("prod-debug") || p.Cluster() != "" {
		t.Fatal("InCluster changed the policy it was called on, or did not place the copy")
	}
}

// TestSummaryAndLogCountElevations: "policy check" and the load and reload log lines count
// the elevations too, not only the rules.
func TestSummaryAndLogCountElevations(t *testing.T) {
	p := mustParse(t, elevationPolicy)
	var b strings.Builder
	if err := p.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "policy is valid: 1 rules, evaluated in order, the first match decides; 3 elevations\n") ||
		!strings.Contains(out, "elevations: break-glass, metrics, prod-debug\n") {
		t.Errorf("summary:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(elevationPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	a, err := New(Config{PolicyFile: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.apply([]byte(elevationPolicy)); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"policy loaded", "policy reloaded"} {
		if !strings.Contains(logs.String(), `msg="`+msg+`"`) || strings.Count(logs.String(), "rules=1 elevations=3") != 2 {
			t.Errorf("%s: want rules=1 elevations=3 in:\n%s", msg, logs.String())
		}
	}
}
