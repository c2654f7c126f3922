package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/octogate/octogate/subjectaccessreview"
)

// proxyPolicy has two Allow rules and a Deny rule between them.
const proxyPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: read-pods
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["team-*"]
  resourceRules: [{verbs: [get, list], apiGroups: [""], resources: [pods, "pods/*"]}]
- name: no-secrets
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: ["*"], apiGroups: [""], resources: [secrets]}]
- name: health
  effect: Allow
  subjects: [{kind: Group, name: "system:authenticated"}]
  nonResourceRules: [{verbs: [get], nonResourceURLs: [/healthz, "/livez*"]}]
`

// setProxyPolicy puts doc in force for the proxy RBAC controller, as a reload would.
func setProxyPolicy(t *testing.T, doc string) *subjectaccessreview.Policy {
	t.Helper()
	p, err := subjectaccessreview.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	testPolicy.Store(p)
	return p
}

// waitForGrant waits until the ClusterRole and the bindings of g are as the controller keeps
// them: a ClusterRoleBinding and no RoleBindings when g has no Namespaces, else a RoleBinding
// in each existing namespace g BindsIn, none elsewhere, and no ClusterRoleBinding.
func waitForGrant(t *testing.T, g subjectaccessreview.Grant) {
	t.Helper()
	eventually(t, "ClusterRole and bindings "+g.Name, func(ctx context.Context) error {
		var role rbacv1.ClusterRole
		if err := admin.Get(ctx, client.ObjectKey{Name: g.Name}, &role); err != nil {
			return err
		}
		if err := checkGrantMeta(g, role.ObjectMeta); err != nil {
			return fmt.Errorf("ClusterRole: %w", err)
		}
		if !equality.Semantic.DeepEqual(role.Rules, g.Rules) {
			return fmt.Errorf("ClusterRole rules %+v, want %+v", role.Rules, g.Rules)
		}
		wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.Name}
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g.Name}}
		var binding rbacv1.ClusterRoleBinding
		err := admin.Get(ctx, client.ObjectKey{Name: g.Name}, &binding)
		if len(g.Namespaces) > 0 {
			if err == nil {
				return errors.New("a ClusterRoleBinding binds a rule restricted to namespaces")
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		} else {
			if err != nil {
				return err
			}
			if err := checkGrantMeta(g, binding.ObjectMeta); err != nil {
				return fmt.Errorf("ClusterRoleBinding: %w", err)
			}
			if binding.RoleRef != wantRef || !equality.Semantic.DeepEqual(binding.Subjects, wantSubjects) {
				return fmt.Errorf("ClusterRoleBinding roleRef %+v subjects %+v", binding.RoleRef, binding.Subjects)
			}
		}
		bindings, err := roleBindingsOf(ctx, g.Name)
		if err != nil {
			return err
		}
		var namespaces corev1.NamespaceList
		if err := admin.List(ctx, &namespaces); err != nil {
			return err
		}
		for _, ns := range namespaces.Items {
			b, has := bindings[ns.Name]
			delete(bindings, ns.Name)
			switch {
			case !g.BindsIn(ns.Name) && has:
				return fmt.Errorf("RoleBinding in %s, which the rule's namespaces %v do not match", ns.Name, g.Namespaces)
			case !g.BindsIn(ns.Name) || ns.Status.Phase == corev1.NamespaceTerminating:
			case !has:
				return fmt.Errorf("no RoleBinding in %s", ns.Name)
			default:
				if err := checkGrantMeta(g, b.ObjectMeta); err != nil {
					return fmt.Errorf("RoleBinding in %s: %w", ns.Name, err)
				}
				if b.RoleRef != wantRef || !equality.Semantic.DeepEqual(b.Subjects, wantSubjects) {
					return fmt.Errorf("RoleBinding in %s: roleRef %+v subjects %+v", ns.Name, b.RoleRef, b.Subjects)
				}
			}
		}
		for ns := range bindings {
			return fmt.Errorf("RoleBinding in %s, which does not exist", ns)
		}
		return nil
	})
}

// roleBindingsOf returns the RoleBindings named name, by namespace.
func roleBindingsOf(ctx context.Context, name string) (map[string]rbacv1.RoleBinding, error) {
	var list rbacv1.RoleBindingList
	if err := admin.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[string]rbacv1.RoleBinding{}
	for _, b := range list.Items {
		if b.Name == name {
			out[b.Namespace] = b
		}
	}
	return out, nil
}

// ensureNamespace creates the Namespace name unless it exists.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func checkGrantMeta(g subjectaccessreview.Grant, m metav1.ObjectMeta) error {
	if m.Labels[LabelManagedBy] != ManagedByValue || m.Labels[LabelProxyRBAC] != "true" {
		return fmt.Errorf("labels %v", m.Labels)
	}
	if rule, ok := m.Annotations[AnnotationPolicyRule]; rule != g.Rule || ok != (g.Rule != "") {
		return fmt.Errorf("annotations %v, want %s=%q", m.Annotations, AnnotationPolicyRule, g.Rule)
	}
	return nil
}

// waitForGone waits until no ClusterRole, ClusterRoleBinding or RoleBinding named name exists.
func waitForGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, "ClusterRole and bindings "+name+" deleted", func(ctx context.Context) error {
		for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
			err := admin.Get(ctx, client.ObjectKey{Name: name}, obj)
			if err == nil {
				return fmt.Errorf("%T still exists", obj)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		bindings, err := roleBindingsOf(ctx, name)
		if err != nil {
			return err
		}
		for ns := range bindings {
			return fmt.Errorf("RoleBinding in %s still exists", ns)
		}
		return nil
	})
}

func grantNamed(t *testing.T, p *subjectaccessreview.Policy, name string) subjectaccessreview.Grant {
	t.Helper()
	for _, g := range p.Grants() {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("policy has no grant %s", name)
	return subjectaccessreview.Grant{}
}

func TestProxyRBACKeepsAClusterRoleAndBindingPerAllowRule(t *testing.T) {
	requireAPIServer(t)
	p := setProxyPolicy(t, proxyPolicy)
	if n := len(p.Grants()); n != 3 {
		t.Fatalf("the policy gives %d grants, want 3 (two Allow rules and the owner)", n)
	}
	for _, g := range p.Grants() {
		waitForGrant(t, g)
	}
	for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
		if err := admin.Get(context.Background(), client.ObjectKey{Name: "octogate:rule:no-secrets"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("the Deny rule has a %T: %v", obj, err)
		}
	}
}

func TestProxyRBACFollowsThePolicy(t *testing.T) {
	requireAPIServer(t)
	ctx := context.Background()
	p := setProxyPolicy(t, proxyPolicy)
	waitForGrant(t, grantNamed(t, p, "octogate:rule:health"))

	// A labelled object no rule names (left from an earlier policy) is deleted; one without
	// the labels is not the controller's.
	stale := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "octogate:rule:stale", Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelProxyRBAC: "true"}}}
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "octogate:rule:foreign"}}
	for _, obj := range []client.Object{stale, foreign} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), foreign) })

	removed := setProxyPolicy(t, `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: read-pods
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [get, list, watch], apiGroups: [""], resources: [pods]}]
`)
	waitForGone(t, "octogate:rule:health")
	waitForGone(t, "octogate:rule:stale")
	waitForGrant(t, grantNamed(t, removed, "octogate:rule:read-pods"))
	waitForGrant(t, grantNamed(t, removed, subjectaccessreview.OwnerGroup))
	if err := admin.Get(ctx, client.ObjectKey{Name: foreign.Name}, &rbacv1.ClusterRole{}); err != nil {
		t.Errorf("the unlabelled ClusterRole %s: %v", foreign.Name, err)
	}
}

func TestProxyRBACPutsBackEditedObjects(t *testing.T) {
	requireAPIServer(t)
	ctx := context.Background()
	ensureNamespace(t, "team-a")
	p := setProxyPolicy(t, proxyPolicy)
	g := grantNamed(t, p, "octogate:rule:read-pods")
	waitForGrant(t, g)

	var role rbacv1.ClusterRole
	if err := admin.Get(ctx, client.ObjectKey{Name: g.Name}, &role); err != nil {
		t.Fatal(err)
	}
	role.Rules = append(role.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}})
	delete(role.Labels, LabelProxyRBAC)
	if err := admin.Update(ctx, &role); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, g)

	// A RoleBinding of a rule restricted to namespaces.
	var rb rbacv1.RoleBinding
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: g.Name}, &rb); err != nil {
		t.Fatal(err)
	}
	rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:mallory"})
	if err := admin.Update(ctx, &rb); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, g)
	if err := admin.Delete(ctx, &rb); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, g)

	// The ClusterRoleBinding of an unrestricted rule.
	health := grantNamed(t, p, "octogate:rule:health")
	waitForGrant(t, health)
	var binding rbacv1.ClusterRoleBinding
	if err := admin.Get(ctx, client.ObjectKey{Name: health.Name}, &binding); err != nil {
		t.Fatal(err)
	}
	binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:mallory"})
	if err := admin.Update(ctx, &binding); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, health)

	if err := admin.Delete(ctx, &binding); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, health)
}

// restrictedPolicy allows everything in the namespaces matching globs (YAML flow sequence
// items), through rule in-web.
func restrictedPolicy(globs string) string {
	return `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: in-web
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: [` + globs + `]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
`
}

// canI asks kube-apiserver's RBAC whether a user carrying only group may verb resource in ns
// ("" for cluster scope).
func canI(t *testing.T, group, verb, resource, ns string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "github:u", Groups: []string{group},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: "rbac.authorization.k8s.io", Resource: resource, Namespace: ns},
	}}
	if err := admin.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// TestProxyRBACBindsARuleInItsNamespacesOnly: a rule restricted to namespaces gets its
// ClusterRole bound by RoleBindings in the existing namespaces its globs match, and nowhere
// else, so its group grants nothing outside them; the bindings follow new namespaces, changed
// globs and the rule's removal.
func TestProxyRBACBindsARuleInItsNamespacesOnly(t *testing.T) {
	requireAPIServer(t)
	ctx := context.Background()
	for _, ns := range []string{"web-a", "web-b", "other", "webx"} {
		ensureNamespace(t, ns)
	}
	const group = "octogate:rule:in-web"
	p := setProxyPolicy(t, restrictedPolicy(`"web-*"`))
	g := grantNamed(t, p, group)
	waitForGrant(t, g)
	bindings, err := roleBindingsOf(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bindings["web-a"]; !ok || bindings["other"].Name != "" || bindings["webx"].Name != "" {
		t.Fatalf("RoleBindings in %v", slices.Sorted(maps.Keys(bindings)))
	}

	t.Run("the group is allowed in matching namespaces only", func(t *testing.T) {
		for _, tc := range []struct {
			verb, resource, ns string
			want               bool
		}{
			{"create", "rolebindings", "web-a", true},
			{"bind", "clusterroles", "web-b", true},
			{"create", "rolebindings", "other", false},
			{"bind", "clusterroles", "other", false},
			{"escalate", "roles", "webx", false},
			{"create", "clusterrolebindings", "", false},
			{"bind", "clusterroles", "", false},
			{"list", "rolebindings", "", false},
		} {
			if got := canI(t, group, tc.verb, tc.resource, tc.ns); got != tc.want {
				t.Errorf("%s %s in %q: allowed = %v, want %v", tc.verb, tc.resource, tc.ns, got, tc.want)
			}
		}
	})

	t.Run("a new matching namespace gets its RoleBinding within seconds", func(t *testing.T) {
		start := time.Now()
		ensureNamespace(t, "web-new")
		eventually(t, "RoleBinding in web-new", func(ctx context.Context) error {
			return admin.Get(ctx, client.ObjectKey{Namespace: "web-new", Name: group}, &rbacv1.RoleBinding{})
		})
		t.Logf("RoleBinding in web-new %s after the namespace", time.Since(start).Round(time.Millisecond))
		if !canI(t, group, "create", "rolebindings", "web-new") {
			t.Error("the group may not create rolebindings in web-new")
		}
	})

	t.Run("globs that stop matching lose their RoleBindings", func(t *testing.T) {
		narrower := setProxyPolicy(t, restrictedPolicy(`"web-b", "other"`))
		waitForGrant(t, grantNamed(t, narrower, group))
		if canI(t, group, "create", "rolebindings", "web-a") || !canI(t, group, "create", "rolebindings", "other") {
			t.Error("RBAC does not follow the narrower globs")
		}
	})

	t.Run("a rule without namespaces gets a ClusterRoleBinding and no RoleBindings", func(t *testing.T) {
		unrestricted := setProxyPolicy(t, `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: in-web
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
`)
		waitForGrant(t, grantNamed(t, unrestricted, group))
		if !canI(t, group, "create", "clusterrolebindings", "") {
			t.Error("the unrestricted rule's group may not create clusterrolebindings")
		}
		// And back: the ClusterRoleBinding goes.
		waitForGrant(t, grantNamed(t, setProxyPolicy(t, restrictedPolicy(`"web-*"`)), group))
		if canI(t, group, "create", "clusterrolebindings", "") {
			t.Error("the ClusterRoleBinding outlived the rule's namespaces")
		}
	})

	t.Run("a rule removed loses its RoleBindings", func(t *testing.T) {
		setProxyPolicy(t, proxyPolicy)
		waitForGone(t, group)
	})
}

// TestProxyRBACAuthorizes asks kube-apiserver's RBAC, through SubjectAccessReviews, what a
// user who carries a rule's group may do: what the rule allows, and nothing else.
func TestProxyRBACAuthorizes(t *testing.T) {
	requireAPIServer(t)
	ensureNamespace(t, "team-a")
	p := setProxyPolicy(t, proxyPolicy)
	for _, g := range p.Grants() {
		waitForGrant(t, g)
	}
	resource := func(verb, resource, sub, ns string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Verb: verb, Resource: resource, Subresource: sub, Namespace: ns}
	}
	cases := []struct {
		name     string
		group    string
		resource *authorizationv1.ResourceAttributes
		path     string
		want     bool
	}{
		{"the rule's verb on its resource", "octogate:rule:read-pods", resource("get", "pods", "", "team-a"), "", true},
		{"pods/* gives the log subresource", "octogate:rule:read-pods", resource("get", "pods", "log", "team-a"), "", true},
		{"a verb the rule does not list", "octogate:rule:read-pods", resource("delete", "pods", "", "team-a"), "", false},
		{"a resource the rule does not list", "octogate:rule:read-pods", resource("get", "secrets", "", "team-a"), "", false},
		{"outside the rule's namespaces", "octogate:rule:read-pods", resource("get", "pods", "", "default"), "", false},
		{"across all namespaces", "octogate:rule:read-pods", resource("list", "pods", "", ""), "", false},
		{"the Deny rule's group gets nothing", "octogate:rule:no-secrets", resource("get", "secrets", "", "team-a"), "", false},
		{"a non-resource rule", "octogate:rule:health", nil, "/healthz", true},
		{"a non-resource prefix", "octogate:rule:health", nil, "/livez/etcd", true},
		{"a path the rule does not list", "octogate:rule:health", nil, "/metrics", false},
		{"owners delete namespaces", subjectaccessreview.OwnerGroup, resource("delete", "namespaces", "", "mine"), "", true},
		{"owners create no namespaces", subjectaccessreview.OwnerGroup, resource("create", "namespaces", "", ""), "", false},
		{"no group, no permission", "github:acme", resource("get", "pods", "", "team-a"), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				// No system:authenticated: the bootstrap roles bound to it (/healthz, discovery)
				// would allow some of these requests by themselves.
				User: "github:u", Groups: []string{tc.group}, ResourceAttributes: tc.resource,
			}}
			if tc.resource == nil {
				sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Verb: "get", Path: tc.path}
			}
			if err := admin.Create(context.Background(), sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed != tc.want {
				t.Errorf("allowed = %v (reason %q), want %v", sar.Status.Allowed, sar.Status.Reason, tc.want)
			}
		})
	}
}

// Before a policy is loaded Reconcile changes nothing: it has no client here to call.
func TestProxyRBACWithoutPolicyChangesNothing(t *testing.T) {
	r := &proxyRBAC{policy: func() *subjectaccessreview.Policy { return nil }}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: subjectaccessreview.OwnerGroup}}); err != nil {
		t.Fatal(err)
	}
}
