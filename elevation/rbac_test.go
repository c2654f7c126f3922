package elevation

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/octogate/octogate/subjectaccessreview"
)

func TestRBACFollowsActiveRequests(t *testing.T) {
	p := mustPolicy(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := func(name string) client.Object { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns("prod"), ns("prod-eu"), ns("staging")).Build()
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }})
	r := &RBAC{Client: c, Store: s, Log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()

	approve := func(ar *AccessRequest) {
		st, err := Act(p, ar, ActionApprove, "", alice, t0)
		if err != nil {
			t.Fatal(err)
		}
		ar.Status = st
		s.Upsert(ar, false)
	}
	narrowed := created(t, p, spec("prod-debug", "INC-1", time.Hour, "prod"), bob)
	narrowed.Name = "prod-debug-aaaaa"
	wide := created(t, p, spec("prod-debug", "INC-2", 30*time.Minute, ""), bob)
	wide.Name = "prod-debug-bbbbb"
	pending := created(t, p, spec("two-keys", "", 10*time.Minute, ""), bob)
	s.Upsert(pending, false)
	approve(narrowed)
	approve(wide)
	glass := created(t, p, spec("break-glass", "INC-9", 10*time.Minute, ""), bob)
	s.Upsert(glass, false)

	next, err := r.Reconcile(ctx, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(t0.Add(90 * time.Second)) {
		t.Errorf("next reconcile %v, want the resync %v (before the first end)", next, t0.Add(90*time.Second))
	}
	if next, _ := r.Reconcile(ctx, t0.Add(9*time.Minute+50*time.Second)); !next.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("next reconcile %v, want the break-glass end %v", next, t0.Add(10*time.Minute))
	}
	bindings := func() []string {
		var out []string
		var rbs rbacv1.RoleBindingList
		_ = c.List(ctx, &rbs)
		for _, b := range rbs.Items {
			if len(b.Subjects) != 1 || b.Subjects[0].Name != bob.Username || b.Subjects[0].Kind != rbacv1.UserKind || b.RoleRef.Name != b.Name {
				t.Errorf("RoleBinding %s/%s: %+v %+v", b.Namespace, b.Name, b.Subjects, b.RoleRef)
			}
			out = append(out, "rb "+b.Namespace+"/"+b.Name)
		}
		var crbs rbacv1.ClusterRoleBindingList
		_ = c.List(ctx, &crbs)
		for _, b := range crbs.Items {
			out = append(out, "crb "+b.Name)
		}
		var roles rbacv1.ClusterRoleList
		_ = c.List(ctx, &roles)
		for _, r := range roles.Items {
			out = append(out, "role "+r.Name)
		}
		slices.Sort(out)
		return out
	}
	want := []string{
		"crb octogate:access:" + glass.Name,
		"rb prod-eu/octogate:access:prod-debug-bbbbb",
		"rb prod/octogate:access:prod-debug-aaaaa",
		"rb prod/octogate:access:prod-debug-bbbbb",
		"role octogate:access:" + glass.Name,
		"role octogate:access:prod-debug-aaaaa",
		"role octogate:access:prod-debug-bbbbb",
	}
	slices.Sort(want)
	if got := bindings(); !slices.Equal(got, want) {
		t.Fatalf("objects\n%v\nwant\n%v", got, want)
	}
	var role rbacv1.ClusterRole
	if err := c.Get(ctx, client.ObjectKey{Name: "octogate:access:prod-debug-aaaaa"}, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods/exec"}) || role.Labels[LabelElevation] != "prod-debug" {
		t.Fatalf("role %+v", role)
	}
	// Past the break-glass end and the wide request's end: only the narrowed one stays.
	if _, err := r.Reconcile(ctx, t0.Add(31*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want = []string{"rb prod/octogate:access:prod-debug-aaaaa", "role octogate:access:prod-debug-aaaaa"}
	if got := bindings(); !slices.Equal(got, want) {
		t.Fatalf("after the ends: %v, want %v", got, want)
	}
	// Revoked: nothing stays.
	revoked := roundTrip(t, narrowed)
	if revoked.Status, err = Act(p, narrowed, ActionRevoke, "", bob, t0.Add(32*time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.Upsert(revoked, false)
	if _, err := r.Reconcile(ctx, t0.Add(32*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := bindings(); len(got) != 0 {
		t.Fatalf("after revocation: %v", got)
	}
}

// TestRBACRemovedWhenTheRequesterLeaves: the RBAC kept for an active request is removed at the
// next reconcile once its requester left the org (Store.EndLeaver), long before its end time.
func TestRBACRemovedWhenTheRequesterLeaves(t *testing.T) {
	p := mustPolicy(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}).Build()
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }})
	r := &RBAC{Client: c, Store: s, Log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	ar := created(t, p, spec("prod-debug", "INC-1", time.Hour, "prod"), bob)
	st, err := Act(p, ar, ActionApprove, "", alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	ar.Status = st
	s.Upsert(ar, false)
	count := func() int {
		var rbs rbacv1.RoleBindingList
		var roles rbacv1.ClusterRoleList
		_ = c.List(ctx, &rbs)
		_ = c.List(ctx, &roles)
		return len(rbs.Items) + len(roles.Items)
	}
	if _, err := r.Reconcile(ctx, t0.Add(time.Minute)); err != nil || count() != 2 {
		t.Fatalf("before the leave: %v, %d objects, want a ClusterRole and a RoleBinding", err, count())
	}
	select {
	case <-s.Changed():
	default:
	}
	s.EndLeaver(bob.UID, "acme", t0.Add(2*time.Minute))
	select {
	case <-s.Changed():
	default:
		t.Fatal("the leave did not wake the RBAC keeper")
	}
	if _, err := r.Reconcile(ctx, t0.Add(2*time.Minute)); err != nil || count() != 0 {
		t.Fatalf("after the leave: %v, %d objects left", err, count())
	}
}
