package ownership

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
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

// waitForGrant waits until the ClusterRole and ClusterRoleBinding of g are as the controller
// keeps them.
func waitForGrant(t *testing.T, g subjectaccessreview.Grant) {
	t.Helper()
	eventually(t, "ClusterRole and ClusterRoleBinding "+g.Name, func(ctx context.Context) error {
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
		var binding rbacv1.ClusterRoleBinding
		if err := admin.Get(ctx, client.ObjectKey{Name: g.Name}, &binding); err != nil {
			return err
		}
		if err := checkGrantMeta(g, binding.ObjectMeta); err != nil {
			return fmt.Errorf("ClusterRoleBinding: %w", err)
		}
		wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.Name}
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g.Name}}
		if binding.RoleRef != wantRef || !equality.Semantic.DeepEqual(binding.Subjects, wantSubjects) {
			return fmt.Errorf("ClusterRoleBinding roleRef %+v subjects %+v", binding.RoleRef, binding.Subjects)
		}
		return nil
	})
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

// waitForGone waits until neither a ClusterRole nor a ClusterRoleBinding named name exists.
func waitForGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, "ClusterRole and ClusterRoleBinding "+name+" deleted", func(ctx context.Context) error {
		for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
			err := admin.Get(ctx, client.ObjectKey{Name: name}, obj)
			if err == nil {
				return fmt.Errorf("%T still exists", obj)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
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

	var binding rbacv1.ClusterRoleBinding
	if err := admin.Get(ctx, client.ObjectKey{Name: g.Name}, &binding); err != nil {
		t.Fatal(err)
	}
	binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:mallory"})
	if err := admin.Update(ctx, &binding); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, g)

	if err := admin.Delete(ctx, &binding); err != nil {
		t.Fatal(err)
	}
	waitForGrant(t, g)
}

// TestProxyRBACAuthorizes asks kube-apiserver's RBAC, through SubjectAccessReviews, what a
// user who carries a rule's group may do: what the rule allows, and nothing else.
func TestProxyRBACAuthorizes(t *testing.T) {
	requireAPIServer(t)
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
