package ownership

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// within is how long the controller may take to act (the issue asks for 5 s).
const within = 5 * time.Second

// eventually polls cond every 50ms until it returns nil or within passes, then fails with
// its last error.
func eventually(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, within, err)
		case <-tick.C:
		}
	}
}

// createNamespace creates a Namespace whose creator annotation is creator (none when
// empty), as the mutating webhook would have left it.
func createNamespace(t *testing.T, creator string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "owned-"}}
	if creator != "" {
		ns.Annotations = map[string]string{AnnotationCreator: creator}
	}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitForBinding waits until the owner RoleBinding of ns binds testOwnerRole to want.
func waitForBinding(t *testing.T, ns string, want rbacv1.Subject) *rbacv1.RoleBinding {
	t.Helper()
	rb := &rbacv1.RoleBinding{}
	eventually(t, "RoleBinding "+ns+"/"+RoleBindingName+" binds "+want.Name, func(ctx context.Context) error {
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: RoleBindingName}, rb); err != nil {
			return err
		}
		wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testOwnerRole}
		switch {
		case rb.RoleRef != wantRef:
			return fmt.Errorf("roleRef %+v", rb.RoleRef)
		case len(rb.Subjects) != 1 || rb.Subjects[0] != want:
			return fmt.Errorf("subjects %+v", rb.Subjects)
		case rb.Labels[LabelManagedBy] != ManagedByValue:
			return fmt.Errorf("labels %v", rb.Labels)
		}
		return nil
	})
	return rb
}

func waitForQuota(t *testing.T, ns string) *corev1.ResourceQuota {
	t.Helper()
	q := &corev1.ResourceQuota{}
	eventually(t, "ResourceQuota "+ns+"/"+ResourceQuotaName, func(ctx context.Context) error {
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: ResourceQuotaName}, q); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(q.Spec, *testQuota) || q.Labels[LabelManagedBy] != ManagedByValue {
			return fmt.Errorf("spec %+v labels %v", q.Spec, q.Labels)
		}
		return nil
	})
	return q
}

var octocat = rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:octocat"}

func TestCreatorIsBoundAsOwner(t *testing.T) {
	requireAPIServer(t)
	tests := []struct {
		name    string
		creator string
		want    rbacv1.Subject
	}{
		{"GitHub user is bound as a User", "github:octocat", octocat},
		{"service account is bound as a ServiceAccount", "system:serviceaccount:ci:deployer",
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := createNamespace(t, tc.creator)
			waitForBinding(t, ns.Name, tc.want)
			waitForEvent(t, ns.Name, ReasonOwnerBound)
		})
	}
}

func TestOwnerBindingIsRepaired(t *testing.T) {
	requireAPIServer(t)
	tests := []struct {
		name   string
		damage func(ctx context.Context, rb *rbacv1.RoleBinding) error
		reason string
	}{
		{"deleted binding is recreated", func(ctx context.Context, rb *rbacv1.RoleBinding) error {
			return admin.Delete(ctx, rb)
		}, ReasonOwnerBound},
		{"edited subject is corrected", func(ctx context.Context, rb *rbacv1.RoleBinding) error {
			rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:mallory"}}
			return admin.Update(ctx, rb)
		}, ReasonOwnerBindingFixed},
		{"binding to another role is replaced (roleRef is immutable)", func(ctx context.Context, rb *rbacv1.RoleBinding) error {
			// The controller may recreate its binding between the delete and the create:
			// then delete that one and try again.
			namespace := rb.Namespace
			for range 20 {
				if err := admin.Delete(ctx, rb); client.IgnoreNotFound(err) != nil {
					return err
				}
				err := admin.Create(ctx, &rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: RoleBindingName, Labels: rb.Labels},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
					Subjects:   rb.Subjects,
				})
				if !apierrors.IsAlreadyExists(err) {
					return err
				}
				rb = &rbacv1.RoleBinding{}
				if err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: RoleBindingName}, rb); err != nil {
					return err
				}
			}
			return errors.New("the controller recreated its binding 20 times before ours could be created")
		}, ReasonOwnerBindingReplaced},
		{"binding stripped of its label is taken back", func(ctx context.Context, rb *rbacv1.RoleBinding) error {
			rb.Labels = nil
			rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "github:acme"})
			if err := admin.Update(ctx, rb); err != nil {
				return err
			}
			// Without the label no watch event reaches the controller: nudge it through
			// the Namespace, as any later change to it would.
			ns := &corev1.Namespace{}
			if err := admin.Get(ctx, types.NamespacedName{Name: rb.Namespace}, ns); err != nil {
				return err
			}
			ns.Labels = map[string]string{"nudge": "1"}
			return admin.Update(ctx, ns)
		}, ReasonOwnerBindingFixed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := createNamespace(t, "github:octocat")
			before := waitForBinding(t, ns.Name, octocat)
			if err := tc.damage(context.Background(), before); err != nil {
				t.Fatal(err)
			}
			waitForBinding(t, ns.Name, octocat)
			waitForEvent(t, ns.Name, tc.reason)
		})
	}
}

func TestDefaultQuotaIsKept(t *testing.T) {
	requireAPIServer(t)
	tests := []struct {
		name   string
		damage func(ctx context.Context, q *corev1.ResourceQuota) error
		reason string
	}{
		{"deleted quota is recreated", func(ctx context.Context, q *corev1.ResourceQuota) error {
			return admin.Delete(ctx, q)
		}, ReasonQuotaCreated},
		{"edited quota is corrected", func(ctx context.Context, q *corev1.ResourceQuota) error {
			q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("1000")
			return admin.Update(ctx, q)
		}, ReasonQuotaFixed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := createNamespace(t, "github:octocat")
			q := waitForQuota(t, ns.Name)
			waitForEvent(t, ns.Name, ReasonQuotaCreated)
			if err := tc.damage(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			waitForQuota(t, ns.Name)
			if tc.reason != ReasonQuotaCreated {
				waitForEvent(t, ns.Name, tc.reason)
			}
		})
	}
}

func TestSystemCreatorsAreNeverBound(t *testing.T) {
	requireAPIServer(t)
	for _, creator := range []string{"system:admin", "system:kube-controller-manager", "system:serviceaccount:bad"} {
		t.Run(creator, func(t *testing.T) {
			ns := createNamespace(t, creator)
			// The quota shows the controller has reconciled the namespace.
			waitForQuota(t, ns.Name)
			assertNoBinding(t, ns.Name)
		})
	}
}

func TestBindingIsRemovedWhenTheCreatorBecomesASystemUser(t *testing.T) {
	requireAPIServer(t)
	ns := createNamespace(t, "github:octocat")
	waitForBinding(t, ns.Name, octocat)
	ns.Annotations[AnnotationCreator] = "system:admin"
	if err := admin.Update(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, ns.Name, ReasonOwnerBindingRemoved)
	assertNoBinding(t, ns.Name)
}

func assertNoBinding(t *testing.T, ns string) {
	t.Helper()
	err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: RoleBindingName}, &rbacv1.RoleBinding{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("RoleBinding %s/%s: err = %v, want NotFound", ns, RoleBindingName, err)
	}
}

// waitForEvent waits for an events.k8s.io Event with reason about Namespace ns. Events about
// cluster-scoped objects are stored in the default namespace.
func waitForEvent(t *testing.T, ns, reason string) {
	t.Helper()
	eventually(t, "Event "+reason+" on Namespace "+ns, func(ctx context.Context) error {
		var events eventsv1.EventList
		if err := admin.List(ctx, &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "Namespace" && e.Regarding.Name == ns && e.Reason == reason &&
				e.ReportingController == ControllerName {
				return nil
			}
		}
		return fmt.Errorf("%d events, none matches", len(events.Items))
	})
}
