package ownership

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/octogate/octogate/namespacetemplate"
)

// switchableTemplates is a TemplateSource whose templates a test replaces, as a reload would.
type switchableTemplates struct {
	mu       sync.Mutex
	current  *namespacetemplate.Templates
	watchers []func(*namespacetemplate.Templates)
}

func (s *switchableTemplates) Templates() *namespacetemplate.Templates {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

func (s *switchableTemplates) OnChange(f func(*namespacetemplate.Templates)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, f)
}

func (s *switchableTemplates) set(t *testing.T, doc string) {
	t.Helper()
	tp, err := namespacetemplate.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.current = tp
	watchers := append([]func(*namespacetemplate.Templates){}, s.watchers...)
	s.mu.Unlock()
	for _, f := range watchers {
		f(tp)
	}
}

const templatesV1 = `apiVersion: octogate.dev/v1alpha1
kind: NamespaceTemplates
templates:
- name: members
  objects:
  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: compute}, spec: {hard: {pods: "5"}}}
  - {apiVersion: v1, kind: LimitRange, metadata: {name: defaults}, spec: {limits: [{type: Container, default: {cpu: 250m}}]}}
  - {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny}, spec: {podSelector: {}, policyTypes: [Ingress]}}
`

// templatesV2 drops the NetworkPolicy and changes the quota.
const templatesV2 = `apiVersion: octogate.dev/v1alpha1
kind: NamespaceTemplates
templates:
- name: members
  objects:
  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: compute}, spec: {hard: {pods: "7"}}}
  - {apiVersion: v1, kind: LimitRange, metadata: {name: defaults}, spec: {limits: [{type: Container, default: {cpu: 250m}}]}}
`

func TestTemplateObjectsAreKeptAndPrunedOnReload(t *testing.T) {
	requireAPIServer(t)
	testTemplates.set(t, templatesV1)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "templated-", Annotations: map[string]string{
		AnnotationCreator: "github:octocat", namespacetemplate.AnnotationTemplate: "members",
		namespacetemplate.AnnotationOwnerTeams: "acme/sre",
	}}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	quotaPods := func(want string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			q := &corev1.ResourceQuota{}
			if err := admin.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "compute"}, q); err != nil {
				return err
			}
			if got := q.Spec.Hard[corev1.ResourcePods]; got.String() != want || q.Labels[namespacetemplate.LabelTemplate] != "members" {
				return fmt.Errorf("pods %s labels %v", got.String(), q.Labels)
			}
			return nil
		}
	}
	exists := func(obj client.Object, name string, want bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			err := admin.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: name}, obj)
			if want {
				return err
			}
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there (err %w)", name, err)
			}
			return nil
		}
	}
	eventually(t, "quota compute with pods 5", quotaPods("5"))
	eventually(t, "LimitRange defaults", exists(&corev1.LimitRange{}, "defaults", true))
	eventually(t, "NetworkPolicy deny", exists(&networkingv1.NetworkPolicy{}, "deny", true))
	eventually(t, "RoleBinding octogate-owner-teams binds github:acme/sre", func(ctx context.Context) error {
		rb := &rbacv1.RoleBinding{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: OwnerTeamsRoleBindingName}, rb); err != nil {
			return err
		}
		if len(rb.Subjects) != 1 || rb.Subjects[0].Name != "github:acme/sre" || rb.Subjects[0].Kind != rbacv1.GroupKind {
			return fmt.Errorf("subjects %+v", rb.Subjects)
		}
		return nil
	})

	teamLabels := func(want ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			got := &corev1.Namespace{}
			if err := admin.Get(ctx, types.NamespacedName{Name: ns.Name}, got); err != nil {
				return err
			}
			var have []string
			for k, v := range got.Labels {
				if strings.HasPrefix(k, namespacetemplate.OwnerTeamLabelPrefix) && v == "true" {
					have = append(have, k)
				}
			}
			slices.Sort(have)
			if !slices.Equal(have, want) {
				return fmt.Errorf("owner-team labels %v, want %v", have, want)
			}
			return nil
		}
	}
	eventually(t, "label of co-owner team acme/sre", teamLabels("octogate.dev/owner-team.acme.sre"))
	current := &corev1.Namespace{}
	if err := admin.Get(context.Background(), types.NamespacedName{Name: ns.Name}, current); err != nil {
		t.Fatal(err)
	}
	current.Annotations[namespacetemplate.AnnotationOwnerTeams] = "acme/web, acme/data"
	if err := admin.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	eventually(t, "labels follow an edited owner-teams annotation", teamLabels("octogate.dev/owner-team.acme.data", "octogate.dev/owner-team.acme.web"))

	testTemplates.set(t, templatesV2)
	eventually(t, "quota compute with pods 7 after the reload", quotaPods("7"))
	eventually(t, "NetworkPolicy deny pruned", exists(&networkingv1.NetworkPolicy{}, "deny", false))
	eventually(t, "LimitRange defaults kept", exists(&corev1.LimitRange{}, "defaults", true))
}
