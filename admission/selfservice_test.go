package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/namespacetemplate"
)

const selfServiceTemplates = `apiVersion: octogate.dev/v1alpha1
kind: NamespaceTemplates
templates:
- name: sre
  match: {groups: ["github:acme/sre"]}
  maxNamespacesPerUser: 2
  maxNamespaces: 3
  names: ["{{login}}-*", "{{team}}-*"]
- name: members
  maxNamespacesPerUser: 3
  names: ["{{login}}-*"]
  allowedLabels: [istio-injection, "example.com/*"]
  allowedAnnotations: ["example.com/*"]
`

type fixedTemplates struct{ t *namespacetemplate.Templates }

func (f fixedTemplates) Templates() *namespacetemplate.Templates { return f.t }

// fakeLister answers from a fixed list of namespaces (name, template, uid), as the cache
// would after leaving out namespaces being deleted.
type fakeLister struct {
	mu  sync.Mutex
	nss [][3]string
}

func (f *fakeLister) CountedNamespaces(_ context.Context, template, uid string) ([]string, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ns := range f.nss {
		if ns[1] == template && (uid == "" || ns[2] == uid) {
			out = append(out, ns[0])
		}
	}
	return out, nil, nil
}

var (
	bob = authenticationv1.UserInfo{Username: "github:bob:1002", UID: "1002",
		Groups: []string{"github:acme", "system:authenticated"},
		Extra:  map[string]authenticationv1.ExtraValue{extraLogin: {"Bob"}}}
	sreCarol = authenticationv1.UserInfo{Username: "github:carol:1003", UID: "1003",
		Groups: []string{"github:acme", "github:acme/sre", "system:authenticated"},
		Extra:  map[string]authenticationv1.ExtraValue{extraLogin: {"carol"}}}
	platformAdmin = authenticationv1.UserInfo{Username: "github:alice:1001", UID: "1001",
		Groups: []string{"github:acme", "github:acme/platform-admins"},
		Extra:  map[string]authenticationv1.ExtraValue{extraLogin: {"alice"}}}
)

func selfServiceValidator(t *testing.T, lister *fakeLister) *validator {
	t.Helper()
	tp, err := namespacetemplate.Parse([]byte(selfServiceTemplates))
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(Config{AdminGroups: []string{"github:acme/platform-admins"}, Logger: quiet,
		Templates: fixedTemplates{tp}, Namespaces: lister, UsernamePrefix: "github:"})
	v.outcome = (&outcomes{}).record
	return v
}

func createRequest(t *testing.T, name string, annotations map[string]string, user authenticationv1.UserInfo) ctrladmission.Request {
	t.Helper()
	obj, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	return ctrladmission.Request{AdmissionRequest: namespaceRequest(admissionv1.Create, string(obj), "", user)}
}

func TestCreateIsHeldToNamesAndLimits(t *testing.T) {
	lister := &fakeLister{nss: [][3]string{
		{"bob-a", "members", "1002"}, {"bob-b", "members", "1002"}, {"bob-c", "members", "1002"},
		{"carol-a", "sre", "1003"}, {"sre-x", "sre", "1999"},
	}}
	members := map[string]string{namespacetemplate.AnnotationTemplate: "members"}
	sre := map[string]string{namespacetemplate.AnnotationTemplate: "sre"}
	tests := []struct {
		name        string
		ns          string
		annotations map[string]string
		user        authenticationv1.UserInfo
		want        string // "" = allowed
	}{
		{"per-user limit reached: the denial lists the namespaces", "bob-d", members, bob,
			`octogate: github:bob:1002 owns 3 of the 3 namespaces allowed by template "members": bob-a, bob-b, bob-c`},
		{"name outside the patterns lists the filled-in patterns", "team-x", members, bob,
			`octogate: namespace name "team-x" is not allowed by template "members"; allowed names for you: bob-*`},
		{"reserved name", "kube-bob", members, bob,
			`octogate: namespace name "kube-bob" is reserved (kube-*): only admins may create it`},
		{"default is reserved", "default", nil, sreCarol,
			`octogate: namespace name "default" is reserved (default): only admins may create it`},
		{"template total reached", "sre-tools", sre, authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}},
			`octogate: template "sre" has 3 of its 3 namespaces: carol-a, carol-b, sre-x`},
		{"team pattern and room left", "sre-tools", sre, authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}}, ""},
		{"admins are never limited nor held to names", "kube-admin-tools", members, platformAdmin, ""},
		{"no template annotation: the template is selected now", "bob-d", nil, bob,
			`octogate: github:bob:1002 owns 3 of the 3 namespaces allowed by template "members": bob-a, bob-b, bob-c`},
		{"a node selector annotation is not the creator's to choose", "bob-d", map[string]string{"scheduler.alpha.kubernetes.io/node-selector": "pool=big"}, bob,
			`octogate: namespaces of template "members" carry only octogate's labels and annotations and the keys the template allows (labels istio-injection, example.com/*; annotation example.com/*), not annotation scheduler.alpha.kubernetes.io/node-selector; ask an admin to add it`},
		{"kubectl apply's annotation is fine", "sre-tools", map[string]string{namespacetemplate.AnnotationTemplate: "sre", "kubectl.kubernetes.io/last-applied-configuration": "{}"}, authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}}, ""},
		{"co-owner team the creator is not in", "carol-b", map[string]string{namespacetemplate.AnnotationTemplate: "sre", namespacetemplate.AnnotationOwnerTeams: "acme/web"}, sreCarol,
			`octogate: annotation octogate.dev/owner-teams: github:carol:1003 is not a member of team acme/web (group github:acme/web): only teams you are in may co-own a namespace`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLister{nss: slices.Clone(lister.nss)}
			if tc.name == "template total reached" {
				l.nss = append(l.nss, [3]string{"carol-b", "sre", "1003"})
			}
			if tc.name == "team pattern and room left" || tc.name == "kubectl apply's annotation is fine" {
				l.nss = l.nss[:4]
			}
			v := selfServiceValidator(t, l)
			resp := v.Handle(context.Background(), createRequest(t, tc.ns, tc.annotations, tc.user))
			if tc.want == "" {
				if !resp.Allowed {
					t.Fatalf("denied: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed || resp.Result.Message != tc.want {
				t.Fatalf("allowed=%v message=%q\nwant denial %q", resp.Allowed, resp.Result.Message, tc.want)
			}
		})
	}
}

func TestConcurrentCreatesOneBelowTheLimitAdmitExactlyOne(t *testing.T) {
	lister := &fakeLister{nss: [][3]string{{"bob-a", "members", "1002"}, {"bob-b", "members", "1002"}}}
	v := selfServiceValidator(t, lister)
	members := map[string]string{namespacetemplate.AnnotationTemplate: "members"}
	var wg sync.WaitGroup
	allowed := make(chan string, 10)
	start := make(chan struct{})
	for i := range 10 {
		req := createRequest(t, fmt.Sprintf("bob-%d", i), members, bob)
		wg.Go(func() {
			<-start
			if resp := v.Handle(context.Background(), req); resp.Allowed {
				allowed <- req.Name
			}
		})
	}
	close(start)
	wg.Wait()
	close(allowed)
	var got []string
	for n := range allowed {
		got = append(got, n)
	}
	if len(got) != 1 {
		t.Fatalf("%d creates admitted (%v), want exactly 1", len(got), got)
	}
	// The reservation stands until the cache shows the namespace: the next create is denied
	// even though the cache still counts 2.
	resp := v.Handle(context.Background(), createRequest(t, "bob-z", members, bob))
	if resp.Allowed {
		t.Fatal("a create after the reserved one was admitted")
	}
}

func TestDryRunDoesNotReserve(t *testing.T) {
	lister := &fakeLister{nss: [][3]string{{"bob-a", "members", "1002"}, {"bob-b", "members", "1002"}}}
	v := selfServiceValidator(t, lister)
	members := map[string]string{namespacetemplate.AnnotationTemplate: "members"}
	dry := createRequest(t, "bob-dry", members, bob)
	yes := true
	dry.DryRun = &yes
	if resp := v.Handle(context.Background(), dry); !resp.Allowed {
		t.Fatalf("dry run denied: %s", resp.Result.Message)
	}
	if resp := v.Handle(context.Background(), createRequest(t, "bob-real", members, bob)); !resp.Allowed {
		t.Fatalf("real create after a dry run denied: %s", resp.Result.Message)
	}
}

func TestUpdateProtectsOwnership(t *testing.T) {
	obj := func(annotations, labels map[string]string) string {
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "bob-a", "annotations": annotations, "labels": labels}})
		return string(b)
	}
	owned := map[string]string{AnnotationCreatorUID: "1002", namespacetemplate.AnnotationTemplate: "members"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range owned {
			m[a] = b
		}
		m[k] = v
		return m
	}
	uid := map[string]string{namespacetemplate.LabelCreatorUID: "1002"}
	sreMember := authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}}
	tests := []struct {
		name                   string
		oldA, newA, oldL, newL map[string]string
		user                   authenticationv1.UserInfo
		allowed                bool
	}{
		{"template annotation cannot change", owned, with(namespacetemplate.AnnotationTemplate, "sre"), uid, uid, bob, false},
		{"creator-uid label cannot change", owned, owned, uid, map[string]string{namespacetemplate.LabelCreatorUID: "1"}, bob, false},
		{"creator adds a team they are in", owned, with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), uid, uid, authenticationv1.UserInfo{Username: bob.Username, UID: "1002", Groups: []string{"github:acme/sre"}}, true},
		{"creator adds a team they are not in", owned, with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), uid, uid, bob, false},
		{"someone else sets teams", owned, with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), uid, uid, sreMember, false},
		{"co-owner team member removes the team", with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), owned, uid, uid, sreMember, true},
		{"owner-team label for a team the annotation does not name", owned, owned, uid, map[string]string{namespacetemplate.LabelCreatorUID: "1002", "octogate.dev/owner-team.acme.sre": "true"}, bob, false},
		{"admin changes the template", owned, with(namespacetemplate.AnnotationTemplate, "sre"), uid, uid, platformAdmin, true},
		{"others' label changes are not octogate's business", owned, owned, uid, map[string]string{namespacetemplate.LabelCreatorUID: "1002", "env": "dev"}, sreMember, true},
		{"the creator may not relabel", owned, owned, uid, map[string]string{namespacetemplate.LabelCreatorUID: "1002", "pod-security.kubernetes.io/enforce": "privileged"}, bob, false},
		{"a co-owner may not annotate beyond owner-teams", with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), map[string]string{AnnotationCreatorUID: "1002", namespacetemplate.AnnotationTemplate: "members", namespacetemplate.AnnotationOwnerTeams: "acme/sre", "note": "x"}, uid, uid, sreMember, false},
		{"the creator names a team with kubectl apply", owned, map[string]string{AnnotationCreatorUID: "1002", namespacetemplate.AnnotationTemplate: "members", namespacetemplate.AnnotationOwnerTeams: "acme/sre", "kubectl.kubernetes.io/last-applied-configuration": "{}"}, uid, uid, authenticationv1.UserInfo{Username: bob.Username, UID: "1002", Groups: []string{"github:acme/sre"}}, true},
		{"the creator's owner-team label for a named team", with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), with(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), uid, map[string]string{namespacetemplate.LabelCreatorUID: "1002", "octogate.dev/owner-team.acme.sre": "true"}, bob, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := selfServiceValidator(t, &fakeLister{})
			req := ctrladmission.Request{AdmissionRequest: namespaceRequest(admissionv1.Update, obj(tc.newA, tc.newL), obj(tc.oldA, tc.oldL), tc.user)}
			resp := v.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
		})
	}
}

func TestCreateTakesOnlyOctogateLabels(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}, "not label pod-security.kubernetes.io/enforce"},
		{map[string]string{"kubernetes.io/metadata.name": "bob-d", "octogate.dev/creator-uid": "1002", "octogate.dev/owner-team.acme.web": "true"}, ""},
	} {
		obj, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "bob-d", "labels": tc.labels}})
		if err != nil {
			t.Fatal(err)
		}
		v := selfServiceValidator(t, &fakeLister{})
		resp := v.Handle(context.Background(), ctrladmission.Request{AdmissionRequest: namespaceRequest(admissionv1.Create, string(obj), "", bob)})
		if tc.want == "" {
			if !resp.Allowed {
				t.Errorf("%v: denied: %s", tc.labels, resp.Result.Message)
			}
			continue
		}
		if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) {
			t.Errorf("%v: allowed=%v %q, want a denial with %q", tc.labels, resp.Allowed, resp.Result.Message, tc.want)
		}
	}
}

// TestDeletedNamespaceFreesItsSlot: once the cache has shown a reserved namespace, the
// reservation is done; when the namespace is then deleted and gone, its slot is free at once,
// not when the reservation would have expired.
func TestDeletedNamespaceFreesItsSlot(t *testing.T) {
	lister := &fakeLister{nss: [][3]string{{"bob-a", "members", "1002"}, {"bob-b", "members", "1002"}}}
	v := selfServiceValidator(t, lister)
	members := map[string]string{namespacetemplate.AnnotationTemplate: "members"}
	if resp := v.Handle(context.Background(), createRequest(t, "bob-c", members, bob)); !resp.Allowed {
		t.Fatalf("bob-c denied: %s", resp.Result.Message)
	}
	lister.mu.Lock()
	lister.nss = append(lister.nss, [3]string{"bob-c", "members", "1002"})
	lister.mu.Unlock()
	if resp := v.Handle(context.Background(), createRequest(t, "bob-d", members, bob)); resp.Allowed {
		t.Fatal("bob-d admitted with bob-a, bob-b and bob-c in the cache")
	}
	lister.mu.Lock()
	lister.nss = lister.nss[:2] // bob-c deleted and gone
	lister.mu.Unlock()
	if resp := v.Handle(context.Background(), createRequest(t, "bob-d", members, bob)); !resp.Allowed {
		t.Fatalf("bob-d denied after bob-c was deleted: %s", resp.Result.Message)
	}
}

// TestOwnersSetTheKeysTheirTemplateAllows: the label and annotation keys the namespace's
// template lists are the creator's to set at CREATE and the owners' (creator and co-owner
// teams) to set, change and remove at UPDATE; reserved and unlisted keys stay refused, with
// the allowed keys named. The template is the namespace's own (AnnotationTemplate), not the
// one the requester would get for a new namespace.
func TestOwnersSetTheKeysTheirTemplateAllows(t *testing.T) {
	nsJSON := func(name string, annotations, labels map[string]string) string {
		b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": name, "annotations": annotations, "labels": labels}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	members := map[string]string{namespacetemplate.AnnotationTemplate: "members"}
	sre := map[string]string{namespacetemplate.AnnotationTemplate: "sre"}
	erin := authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}}
	membersKeys := "labels istio-injection, example.com/*; annotation example.com/*"

	creates := []struct {
		name        string
		ns          string
		annotations map[string]string
		labels      map[string]string
		user        authenticationv1.UserInfo
		want        string // "" = allowed
	}{
		{"an allowed label", "bob-d", members, map[string]string{"istio-injection": "enabled"}, bob, ""},
		{"an allowed label glob and annotation glob", "bob-d", withKey(members, "example.com/dashboard", "grafana"), map[string]string{"example.com/cost-centre": "cc-42"}, bob, ""},
		{"a pod security label is still refused, the allowed keys named", "bob-d", members, map[string]string{"istio-injection": "enabled", "pod-security.kubernetes.io/enforce": "privileged"}, bob,
			`octogate: namespaces of template "members" carry only octogate's labels and annotations and the keys the template allows (` + membersKeys + `), not label pod-security.kubernetes.io/enforce; ask an admin to add it`},
		{"an unlisted label", "bob-d", members, map[string]string{"env": "prod"}, bob,
			`octogate: namespaces of template "members" carry only octogate's labels and annotations and the keys the template allows (` + membersKeys + `), not label env; ask an admin to add it`},
		{"a label under another prefix", "bob-d", members, map[string]string{"sub.example.com/x": "y"}, bob,
			`not label sub.example.com/x; ask an admin to add it`},
		{"an allowed label is not an allowed annotation", "bob-d", withKey(members, "istio-injection", "enabled"), nil, bob,
			`not annotation istio-injection; ask an admin to add it`},
		{"a template that lists no keys keeps today's message", "sre-tools", sre, map[string]string{"istio-injection": "enabled"}, erin,
			`octogate: namespaces of template "sre" carry only octogate's labels and annotations, not label istio-injection; ask an admin to add it`},
	}
	for _, tc := range creates {
		t.Run("create: "+tc.name, func(t *testing.T) {
			v := selfServiceValidator(t, &fakeLister{})
			resp := v.Handle(context.Background(), ctrladmission.Request{AdmissionRequest: namespaceRequest(admissionv1.Create, nsJSON(tc.ns, tc.annotations, tc.labels), "", tc.user)})
			checkDecision(t, resp, tc.want)
		})
	}

	// bob created bob-a under template members; team acme/sre co-owns it. carol is in
	// acme/sre, so a new namespace of hers would get template sre, which lists no keys.
	owned := withKey(withKey(members, AnnotationCreatorUID, "1002"), namespacetemplate.AnnotationOwnerTeams, "acme/sre")
	uid := map[string]string{namespacetemplate.LabelCreatorUID: "1002"}
	istio := withKey(uid, "istio-injection", "enabled")
	sreOwned := withKey(withKey(sre, AnnotationCreatorUID, "1003"), namespacetemplate.AnnotationOwnerTeams, "acme/web")
	bobInWeb := authenticationv1.UserInfo{Username: bob.Username, UID: bob.UID, Groups: []string{"github:acme", "github:acme/web"}}
	updates := []struct {
		name       string
		oldA, newA map[string]string
		oldL, newL map[string]string
		user       authenticationv1.UserInfo
		want       string // "" = allowed
	}{
		{"the creator adds an allowed label", owned, owned, uid, istio, bob, ""},
		{"a co-owner adds an allowed label", owned, owned, uid, istio, sreCarol, ""},
		{"a co-owner changes its value", owned, owned, istio, withKey(uid, "istio-injection", "disabled"), sreCarol, ""},
		{"the creator removes it", owned, owned, istio, uid, bob, ""},
		{"the creator sets a label of the allowed glob", owned, owned, uid, withKey(uid, "example.com/cost-centre", "cc-7"), bob, ""},
		{"a co-owner sets an allowed annotation", owned, withKey(owned, "example.com/runbook", "https://runbooks.example.com/bob-a"), uid, uid, sreCarol, ""},
		{"the creator removes an allowed annotation", withKey(owned, "example.com/runbook", "x"), owned, uid, uid, bob, ""},
		{"the pod security label is still refused, the allowed keys named", owned, owned, uid, withKey(istio, "pod-security.kubernetes.io/enforce", "privileged"), bob,
			`octogate: "github:bob:1002" owns namespace "bob-a" and may change only annotation octogate.dev/owner-teams and the keys template "members" allows (` + membersKeys + `) there, not label pod-security.kubernetes.io/enforce; ask an admin`},
		{"a co-owner's unlisted label is refused", owned, owned, uid, withKey(uid, "env", "prod"), sreCarol,
			`octogate: "github:carol:1003" owns namespace "bob-a" and may change only annotation octogate.dev/owner-teams and the keys template "members" allows (` + membersKeys + `) there, not label env; ask an admin`},
		{"kubernetes.io/metadata.name is not the owners'", owned, owned, withKey(uid, corev1.LabelMetadataName, "bob-a"), withKey(uid, corev1.LabelMetadataName, "x"), bob,
			`not label kubernetes.io/metadata.name; ask an admin`},
		{"the namespace's template decides, not the requester's: sre lists no keys", sreOwned, sreOwned, nil, map[string]string{"istio-injection": "enabled"}, bobInWeb,
			`octogate: "github:bob:1002" owns namespace "bob-a" and may change only annotation octogate.dev/owner-teams there, not label istio-injection; ask an admin`},
		{"a template no longer in the file allows nothing", withKey(owned, namespacetemplate.AnnotationTemplate, "gone"), withKey(owned, namespacetemplate.AnnotationTemplate, "gone"), uid, istio, bob,
			`octogate: "github:bob:1002" owns namespace "bob-a" and may change only annotation octogate.dev/owner-teams there, not label istio-injection; ask an admin`},
		{"no template recorded: nothing beyond owner-teams", map[string]string{AnnotationCreatorUID: "1002"}, map[string]string{AnnotationCreatorUID: "1002"}, uid, istio, bob,
			`not label istio-injection; ask an admin`},
	}
	for _, tc := range updates {
		t.Run("update: "+tc.name, func(t *testing.T) {
			v := selfServiceValidator(t, &fakeLister{})
			req := namespaceRequest(admissionv1.Update, nsJSON("bob-a", tc.newA, tc.newL), nsJSON("bob-a", tc.oldA, tc.oldL), tc.user)
			checkDecision(t, v.Handle(context.Background(), ctrladmission.Request{AdmissionRequest: req}), tc.want)
		})
	}
}

// withKey returns a copy of m with k set to v.
func withKey(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

// checkDecision fails unless resp allows (want "") or denies with a message that is want or,
// for a want starting "not ", ends with it.
func checkDecision(t *testing.T, resp ctrladmission.Response, want string) {
	t.Helper()
	if want == "" {
		if !resp.Allowed {
			t.Fatalf("denied: %s", resp.Result.Message)
		}
		return
	}
	msg := resp.Result.Message
	if resp.Allowed || !(msg == want || strings.HasPrefix(want, "not ") && strings.HasSuffix(msg, want)) {
		t.Fatalf("allowed=%v message=%q\nwant denial %q", resp.Allowed, msg, want)
	}
}

// TestOrphanedCreatorIsNoOwner: while a namespace is orphaned (its creator left the GitHub
// organization), its creator, a member again, may not name co-owner teams (which would give
// them the owner role back through a team's binding), nor may anyone but an admin; an admin
// may, and the creator may again once the namespace is given back.
func TestOrphanedCreatorIsNoOwner(t *testing.T) {
	obj := func(annotations map[string]string) string {
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "bob-a", "annotations": annotations,
				"labels": map[string]string{namespacetemplate.LabelCreatorUID: "1002"}}})
		return string(b)
	}
	annotations := func(kv ...string) map[string]string {
		m := map[string]string{AnnotationCreatorUID: "1002", namespacetemplate.AnnotationTemplate: "members"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	orphaned := []string{namespacetemplate.AnnotationOrphanedAt, "2026-12-01T12:00:00Z", "octogate.dev/orphaned-reason", "removed"}
	bobInSRE := authenticationv1.UserInfo{Username: bob.Username, UID: "1002", Groups: []string{"github:acme/sre"}}
	sreMember := authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}}
	for _, tc := range []struct {
		name       string
		oldA, newA map[string]string
		user       authenticationv1.UserInfo
		allowed    bool
	}{
		{"the orphaned creator names their own team", annotations(orphaned...),
			annotations(append(orphaned, namespacetemplate.AnnotationOwnerTeams, "acme/sre")...), bobInSRE, false},
		{"the orphaned creator removes a co-owner team", annotations(append(orphaned, namespacetemplate.AnnotationOwnerTeams, "acme/sre")...),
			annotations(orphaned...), bob, false},
		{"a co-owner team's member names another team of an orphaned namespace", annotations(append(orphaned, namespacetemplate.AnnotationOwnerTeams, "acme/sre")...),
			annotations(append(orphaned, namespacetemplate.AnnotationOwnerTeams, "acme/sre,acme/web")...), authenticationv1.UserInfo{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre", "github:acme/web"}}, false},
		{"the orphaned creator gives the namespace back to themselves", annotations(orphaned...), annotations(), bobInSRE, false},
		{"an admin names a team of an orphaned namespace", annotations(orphaned...),
			annotations(append(orphaned, namespacetemplate.AnnotationOwnerTeams, "acme/sre")...), platformAdmin, true},
		{"the creator names their team once the namespace is given back", annotations(),
			annotations(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), bobInSRE, true},
		{"a co-owner team's member of a namespace not orphaned names no one new", annotations(namespacetemplate.AnnotationOwnerTeams, "acme/sre"),
			annotations(namespacetemplate.AnnotationOwnerTeams, "acme/sre"), sreMember, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := selfServiceValidator(t, &fakeLister{})
			req := ctrladmission.Request{AdmissionRequest: namespaceRequest(admissionv1.Update, obj(tc.newA), obj(tc.oldA), tc.user)}
			resp := v.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, "orphaned") {
				t.Fatalf("denial %q does not say the namespace is orphaned", resp.Result.Message)
			}
		})
	}
}
