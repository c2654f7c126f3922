package subjectaccessreview

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"

	"github.com/octogate/octogate/webhooks/door"

	"github.com/octogate/octogate/internal/policyfixture"
)

func mustLoad(t testing.TB, path string) *Policy {
	t.Helper()
	p, err := LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile(%s): %v", path, err)
	}
	return p
}

func mustParse(t testing.TB, doc string) *Policy {
	t.Helper()
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return p
}

// res builds a resource request; nonRes a non-resource one.
func res(user string, groups []string, verb, group, resource, sub, ns, name string) Attributes {
	return Attributes{User: user, Groups: groups, ResourceRequest: true, Verb: verb, APIGroup: group,
		Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func nonRes(user string, groups []string, verb, path string) Attributes {
	return Attributes{User: user, Groups: groups, Verb: verb, Path: path}
}

type authzCase struct {
	name  string
	attrs Attributes
	want  Verdict
	rule  string
}

var (
	acme    = []string{"github:acme", "system:authenticated"}
	admins  = []string{"github:acme", "github:acme/admins", "system:authenticated"}
	interns = []string{"github:acme", "github:acme/interns", "system:authenticated"}
	teamA   = []string{"github:acme", "github:acme/team-a", "system:authenticated"}
	saCI    = []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"}
)

// The expected decisions follow RBAC's matching rules (k8s.io/kubernetes
// pkg/apis/rbac/v1/evaluation_helpers.go: VerbMatches, APIGroupMatches, ResourceMatches,
// ResourceNameMatches, NonResourceURLMatches) plus first-match-wins rule order.
var tableCases = []authzCase{
	// verbs, core group, plain resources
	{"listed verb on a core resource is allowed", res("github:alice", acme, "get", "", "pods", "", "default", "web"), Allow, "alice-reads-pods"},
	{"list across all namespaces (empty namespace) matches a rule without namespaces", res("github:alice", acme, "list", "", "pods", "", "", ""), Allow, "alice-reads-pods"},
	{"unlisted verb has no opinion", res("github:alice", acme, "create", "", "pods", "", "default", ""), NoOpinion, ""},
	{"core-group rule does not match the same resource in another group", res("github:alice", acme, "get", "apps", "pods", "", "default", "web"), NoOpinion, ""},
	{"requested verb * matches only a rule verb *", res("github:alice", acme, "*", "", "pods", "", "default", ""), NoOpinion, ""},
	{"requested resource * matches only a rule resource *", res("github:alice", acme, "get", "", "*", "", "default", ""), NoOpinion, ""},
	// subresources
	{"resource rule does not cover its subresources", res("github:alice", acme, "get", "", "pods", "exec", "default", "web"), NoOpinion, ""},
	{"resource/subresource entry matches that subresource", res("github:alice", acme, "get", "", "pods", "log", "default", "web"), Allow, "alice-reads-logs"},
	{"resource/subresource entry needs the listed verb", res("github:alice", acme, "list", "", "pods", "log", "default", ""), NoOpinion, ""},
	{"*/scale matches deployments/scale", res("github:carol", acme, "update", "apps", "deployments", "scale", "default", "web"), Allow, "carol-scales-anything"},
	{"*/scale matches statefulsets/scale", res("github:carol", acme, "update", "apps", "statefulsets", "scale", "default", "db"), Allow, "carol-scales-anything"},
	{"*/scale does not match the resource itself", res("github:carol", acme, "update", "apps", "deployments", "", "default", "web"), NoOpinion, ""},
	{"*/scale does not match another subresource", res("github:carol", acme, "update", "apps", "deployments", "status", "default", "web"), NoOpinion, ""},
	{"pods/* matches any pod subresource", res("github:carol", acme, "create", "", "pods", "exec", "default", "web"), Allow, "carol-any-pod-subresource"},
	{"pods/* does not match pods itself", res("github:carol", acme, "get", "", "pods", "", "default", "web"), NoOpinion, ""},
	{"pods/* does not match another resource's subresource", res("github:carol", acme, "get", "", "services", "proxy", "default", "web"), NoOpinion, ""},
	{"resource * covers subresources too", res("github:erin", admins, "create", "", "pods", "exec", "default", "web"), Allow, "allow-admins-everything"},
	// resourceNames
	{"resourceNames match a get of that name", res("github:dave", acme, "get", "", "configmaps", "", "default", "app-config"), Allow, "dave-one-configmap"},
	{"resourceNames match an update of that name", res("github:dave", acme, "update", "", "configmaps", "", "default", "app-config"), Allow, "dave-one-configmap"},
	{"resourceNames do not match another name", res("github:dave", acme, "get", "", "configmaps", "", "default", "other"), NoOpinion, ""},
	{"resourceNames never match list (no name)", res("github:dave", acme, "list", "", "configmaps", "", "default", ""), NoOpinion, ""},
	{"resourceNames never match create (no name)", res("github:dave", acme, "create", "", "configmaps", "", "default", ""), NoOpinion, ""},
	// API groups
	{"verb * with a named group allows any verb", res("github:erin", acme, "delete", "apps", "deployments", "", "prod", "web"), Allow, "erin-apps-deployments"},
	{"requested verb * matches rule verb *", res("github:erin", acme, "*", "apps", "deployments", "", "prod", ""), Allow, "erin-apps-deployments"},
	{"named group does not match another group", res("github:erin", acme, "get", "extensions", "deployments", "", "prod", "web"), NoOpinion, ""},
	{"named resource does not match another resource of the group", res("github:erin", acme, "get", "apps", "replicasets", "", "prod", "web"), NoOpinion, ""},
	// namespaces
	{"namespace glob with trailing * matches", res("github:frank", teamA, "delete", "", "pods", "", "team-a-dev", "web"), Allow, "team-a-namespaces"},
	{"namespace glob with leading * matches", res("github:frank", teamA, "get", "", "pods", "", "frank-sandbox", "web"), Allow, "team-a-namespaces"},
	{"namespace outside every glob has no opinion", res("github:frank", teamA, "get", "", "pods", "", "team-b", "web"), NoOpinion, ""},
	{"list across all namespaces does not match a namespaced rule", res("github:frank", teamA, "list", "", "pods", "", "", ""), NoOpinion, ""},
	{"a Namespace object matches by its own name", res("github:frank", teamA, "delete", "", "namespaces", "", "team-a-dev", "team-a-dev"), Allow, "team-a-namespaces"},
	{"cluster-scoped request does not match a namespaced rule", res("github:frank", teamA, "get", "", "clusterroles", "", "", "admin"), NoOpinion, ""},
	{"cluster-scoped request matches a rule without namespaces", res("github:frank", acme, "get", "", "nodes", "", "", "node-1"), Allow, "members-read-nodes"},
	{"cluster-scoped rule still needs the verb", res("github:frank", acme, "delete", "", "nodes", "", "", "node-1"), NoOpinion, ""},
	// subjects
	{"user prefix subject matches", res("github:bot-ci", nil, "get", "", "services", "", "default", "api"), Allow, "bots-read-services"},
	{"user prefix subject needs the whole prefix", res("github:bot", nil, "get", "", "services", "", "default", "api"), NoOpinion, ""},
	{"ServiceAccount subject matches its username", res("system:serviceaccount:ci:deployer", saCI, "patch", "apps", "deployments", "", "team-a-dev", "web"), Allow, "ci-deployer-patches"},
	{"ServiceAccount subject does not match a longer name", res("system:serviceaccount:ci:deployer2", saCI, "patch", "apps", "deployments", "", "team-a-dev", "web"), NoOpinion, ""},
	{"ServiceAccount subject does not match another namespace", res("system:serviceaccount:other:deployer", nil, "patch", "apps", "deployments", "", "team-a-dev", "web"), NoOpinion, ""},
	{"ServiceAccount * matches every account of the namespace", nonRes("system:serviceaccount:monitoring:prometheus", nil, "get", "/metrics"), Allow, "monitoring-scrapes"},
	{"user with no matching subject has no opinion", res("github:nobody", nil, "get", "", "pods", "", "default", "web"), NoOpinion, ""},
	// non-resource URLs
	{"exact non-resource URL", nonRes("github:frank", acme, "get", "/healthz"), Allow, "members-discovery"},
	{"exact non-resource URL is not a prefix", nonRes("github:frank", acme, "get", "/healthz/etcd"), NoOpinion, ""},
	{"non-resource prefix * matches below it", nonRes("github:frank", acme, "get", "/apis/apps/v1"), Allow, "members-discovery"},
	{"non-resource prefix /apis/* does not match /apis", nonRes("github:frank", acme, "get", "/apis"), NoOpinion, ""},
	{"non-resource rule needs the verb", nonRes("github:frank", acme, "post", "/version"), NoOpinion, ""},
	{"non-resource * matches every path", nonRes("github:erin", admins, "get", "/logs/kube-apiserver.log"), Allow, "allow-admins-everything"},
	{"resource rules never match a non-resource request", nonRes("github:alice", acme, "get", "/api/v1/pods"), NoOpinion, ""},
	// rule order
	{"earlier Deny beats later Allow (group)", res("github:erin", append(admins, "github:acme/interns"), "get", "", "secrets", "", "default", "db"), Deny, "deny-interns-secrets"},
	{"earlier Allow beats later Deny", res("github:erin", admins, "delete", "", "nodes", "", "", "node-1"), Allow, "allow-admins-everything"},
	{"earlier Deny beats later Allow (user)", res("github:bob", nil, "get", "", "pods", "", "default", "web"), Deny, "deny-bob-get-pods"},
	{"Deny rule applies only to its own requests", res("github:bob", nil, "list", "", "pods", "", "default", ""), NoOpinion, ""},
	{"Deny subject group without a matching request has no opinion", res("github:ivy", interns, "get", "", "configmaps", "", "default", "x"), NoOpinion, ""},
	// exempt users
	{"system user in an allowed group has no opinion", res("system:kube-scheduler", admins, "get", "", "pods", "", "default", "web"), NoOpinion, ""},
	{"system:masters member in an allowed group has no opinion", res("github:erin", append(admins, "system:masters"), "get", "", "pods", "", "default", "web"), NoOpinion, ""},
}

func TestAuthorizeTable(t *testing.T) {
	p := mustLoad(t, filepath.Join("testdata", "rbac-table-policy.yaml"))
	if len(tableCases) < 40 {
		t.Fatalf("table has %d cases, want at least 40", len(tableCases))
	}
	for _, tc := range tableCases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Authorize(&tc.attrs)
			if got.Verdict != tc.want || got.Rule != tc.rule {
				t.Fatalf("Authorize(%+v) = %v by %q, want %v by %q", tc.attrs, got.Verdict, got.Rule, tc.want, tc.rule)
			}
		})
	}
}

// TestHandlerTable sends every table case as a real SubjectAccessReview, built with the
// Kubernetes API types, in both versions, and checks the answer's status.
func TestHandlerTable(t *testing.T) {
	a, err := New(Config{PolicyFile: filepath.Join("testdata", "rbac-table-policy.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tableCases {
		for _, version := range []string{APIVersionV1, APIVersionV1beta1} {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				var got door.Outcome
				a.record = func(_ context.Context, o door.Outcome) { got = o }
				status := postReview(t, a, version, sarBody(t, version, tc.attrs))
				wantReason := ReasonNoMatch
				if tc.rule != "" {
					wantReason = "octogate: rule " + tc.rule
				} else if exempt(&tc.attrs) {
					wantReason = ReasonSystemUser
				}
				if status.Allowed != (tc.want == Allow) || status.Denied != (tc.want == Deny) || status.Reason != wantReason {
					t.Fatalf("status = %+v, want %v with reason %q", status, tc.want, wantReason)
				}
				if got.User != tc.attrs.User || got.Decision != outcomeDecision(tc.want) || got.Reason != wantReason {
					t.Fatalf("recorded %+v", got)
				}
			})
		}
	}
}

// sarBody marshals attrs as a SubjectAccessReview of the given version using k8s.io/api types.
func sarBody(t testing.TB, version string, attrs Attributes) []byte {
	t.Helper()
	var obj any
	switch version {
	case APIVersionV1:
		sar := authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: attrs.User, Groups: attrs.Groups}}
		sar.APIVersion, sar.Kind = version, "SubjectAccessReview"
		if attrs.ResourceRequest {
			sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: attrs.Namespace, Verb: attrs.Verb,
				Group: attrs.APIGroup, Version: "v1", Resource: attrs.Resource, Subresource: attrs.Subresource, Name: attrs.Name}
		} else {
			sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb}
		}
		obj = sar
	case APIVersionV1beta1:
		sar := authorizationv1beta1.SubjectAccessReview{Spec: authorizationv1beta1.SubjectAccessReviewSpec{User: attrs.User, Groups: attrs.Groups}}
		sar.APIVersion, sar.Kind = version, "SubjectAccessReview"
		if attrs.ResourceRequest {
			sar.Spec.ResourceAttributes = &authorizationv1beta1.ResourceAttributes{Namespace: attrs.Namespace, Verb: attrs.Verb,
				Group: attrs.APIGroup, Version: "v1", Resource: attrs.Resource, Subresource: attrs.Subresource, Name: attrs.Name}
		} else {
			sar.Spec.NonResourceAttributes = &authorizationv1beta1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb}
		}
		obj = sar
	}
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// postReview sends body to the handler, requires 200 and an answer in wantVersion, and
// returns its status.
func postReview(t testing.TB, h http.Handler, wantVersion string, body []byte) authorizationv1.SubjectAccessReviewStatus {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authorize", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var answer authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Fatalf("answer is not a SubjectAccessReview: %v\n%s", err, rec.Body)
	}
	if answer.APIVersion != wantVersion || answer.Kind != "SubjectAccessReview" {
		t.Fatalf("answered as %s %s, want %s SubjectAccessReview", answer.APIVersion, answer.Kind, wantVersion)
	}
	return answer.Status
}

func TestCatchAllDenyLeavesSystemUsersAlone(t *testing.T) {
	p := mustParse(t, `
apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: deny-everyone
  effect: Deny
  subjects: [{kind: User, name: "*"}, {kind: Group, name: "*"}]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
  nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`)
	cases := []authzCase{
		{"kube-controller-manager has no opinion", res("system:kube-controller-manager", []string{"system:authenticated"}, "list", "", "pods", "", "", ""), NoOpinion, ""},
		{"a node has no opinion", res("system:node:worker-1", []string{"system:nodes", "system:authenticated"}, "get", "", "secrets", "", "default", "x"), NoOpinion, ""},
		{"anonymous has no opinion", nonRes("system:anonymous", []string{"system:unauthenticated"}, "get", "/healthz"), NoOpinion, ""},
		{"system:masters member has no opinion", res("github:root", []string{"github:acme", "system:masters"}, "delete", "", "namespaces", "", "prod", "prod"), NoOpinion, ""},
		{"a malformed service-account name is a system user", res("system:serviceaccount:nons", nil, "get", "", "pods", "", "default", "x"), NoOpinion, ""},
		{"an ordinary user is denied", res("github:octocat", []string{"github:acme"}, "get", "", "pods", "", "default", "x"), Deny, "deny-everyone"},
		{"a user without groups is denied", nonRes("github:octocat", nil, "get", "/version"), Deny, "deny-everyone"},
		{"a service account is not caught by User or Group subjects", res("system:serviceaccount:ci:deployer", saCI, "get", "", "pods", "", "ci", "x"), NoOpinion, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Authorize(&tc.attrs)
			if got.Verdict != tc.want || got.Rule != tc.rule {
				t.Fatalf("got %v by %q, want %v by %q", got.Verdict, got.Rule, tc.want, tc.rule)
			}
			wantReason := ReasonSystemUser
			if isServiceAccount(tc.attrs.User) {
				wantReason = ReasonNoMatch // no ServiceAccount subject names it
			}
			if tc.want == NoOpinion && got.Reason != wantReason {
				t.Fatalf("reason %q, want %q", got.Reason, wantReason)
			}
		})
	}
}

func TestEmptyPolicyHasNoOpinion(t *testing.T) {
	for name, p := range map[string]*Policy{
		"nil policy":      nil,
		"zero policy":     {},
		"policy no rules": mustParse(t, "apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\nrules: []\n"),
	} {
		attrs := res("github:octocat", acme, "get", "", "pods", "", "default", "x")
		if d := p.Authorize(&attrs); d.Verdict != NoOpinion || d.Reason != ReasonNoMatch {
			t.Errorf("%s: %+v", name, d)
		}
	}
}

// TestExamplePolicy keeps examples/policy.yaml valid and doing what its comments say.
func TestExamplePolicy(t *testing.T) {
	path := filepath.Join("..", "examples", "policy.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	p := mustLoad(t, path)
	sre := []string{"github:acme", "github:acme/sre"}
	cases := []authzCase{
		{"platform admin deletes production", res("github:lead", []string{"github:acme", "github:acme/platform-admins"}, "delete", "", "namespaces", "", "production", "production"), Allow, "platform-admins-everything"},
		{"contractor cannot read secrets even if RBAC would allow", res("github:temp", []string{"github:acme", "github:acme/contractors"}, "get", "", "secrets", "", "team-a", "db"), Deny, "contractors-no-secrets"},
		{"member cannot delete production", res("github:octocat", acme, "delete", "", "namespaces", "", "production", "production"), Deny, "protect-production-namespaces"},
		{"CI service account cannot delete production", res("system:serviceaccount:ci:deployer-web", saCI, "delete", "", "namespaces", "", "production", "production"), Deny, "protect-production-namespaces"},
		{"member is kept out of kube-system", res("github:octocat", acme, "get", "", "configmaps", "", "kube-system", "x"), Deny, "no-one-else-in-system-namespaces"},
		{"SRE reads logs in a team namespace", res("github:sre1", sre, "get", "", "pods", "log", "team-a", "web"), Allow, "sre-debug-team-namespaces"},
		{"SRE execs in production", res("github:sre1", sre, "create", "", "pods", "exec", "production", "web"), Allow, "sre-debug-team-namespaces"},
		{"SRE exec outside the globs is left to RBAC", res("github:sre1", sre, "create", "", "pods", "exec", "default", "web"), NoOpinion, ""},
		{"release manager scales in production", res("github:rm", []string{"github:acme", "github:acme/release-managers"}, "patch", "apps", "deployments", "scale", "production-eu", "web"), Allow, "release-managers-scale-production"},
		{"CI deployer rolls out", res("system:serviceaccount:ci:deployer-web", saCI, "patch", "apps", "deployments", "", "team-a", "web"), Allow, "ci-deployers-roll-out"},
		{"CI deployer updates the named configmap", res("system:serviceaccount:ci:deployer-web", saCI, "update", "", "configmaps", "", "team-a", "app-config"), Allow, "ci-deployers-roll-out"},
		{"CI deployer cannot list configmaps through resourceNames", res("system:serviceaccount:ci:deployer-web", saCI, "list", "", "configmaps", "", "team-a", ""), NoOpinion, ""},
		{"member lists nodes", res("github:octocat", acme, "list", "", "nodes", "", "", ""), Allow, "members-read-cluster-info"},
		{"member reads discovery", nonRes("github:octocat", acme, "get", "/apis/apps/v1"), Allow, "members-read-cluster-info"},
		{"member creates a namespace", res("github:octocat", acme, "create", "", "namespaces", "", "", ""), Allow, "members-create-namespaces"},
		{"member deletes own namespace: RBAC decides", res("github:octocat", acme, "delete", "", "namespaces", "", "octocat-dev", "octocat-dev"), NoOpinion, ""},
		{"outsider has no opinion", res("github:stranger", []string{"github:other"}, "create", "", "namespaces", "", "", ""), NoOpinion, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Authorize(&tc.attrs)
			if got.Verdict != tc.want || got.Rule != tc.rule {
				t.Fatalf("got %v by %q, want %v by %q", got.Verdict, got.Rule, tc.want, tc.rule)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"team-a", "team-a", true},
		{"team-a", "team-ab", false},
		{"team-*", "team-", true},
		{"team-*", "team-x", true},
		{"team-*", "tea", false},
		{"*-sandbox", "a-sandbox", true},
		{"*-sandbox", "sandbox", false},
		{"*", "anything", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"ab*ba", "aba", false},
		{"ab*ba", "abba", true},
		{"a**b", "ab", true},
	}
	for _, tc := range cases {
		p := mustParse(t, `
apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: r
  effect: Allow
  subjects: [{kind: User, name: u}]
  namespaces: ["`+tc.pattern+`"]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`)
		attrs := res("u", nil, "get", "", "pods", "", tc.s, "")
		if got := p.Authorize(&attrs).Verdict == Allow; got != tc.want {
			t.Errorf("glob %q on %q = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestManyRulesBeyondStackBitset(t *testing.T) {
	p := mustParse(t, policyfixture.Large(300))
	// The last rule of policyfixture.Large is the only one for github:last; it sits past 256 rules.
	attrs := res("github:last", nil, "get", "", "pods", "", "default", "x")
	if d := p.Authorize(&attrs); d.Verdict != Allow || d.Rule != "last-reads-pods" {
		t.Fatalf("%+v", d)
	}
}
