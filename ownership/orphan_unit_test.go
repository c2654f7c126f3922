package ownership

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/octogate/octogate/admission"
)

type fakeEvents struct{ *events.FakeRecorder }

func (fakeEvents) AnnotatedEventf(_, _ runtime.Object, _ map[string]string, _, _, _, _ string, _ ...any) {
}

func namespace(name, creator, uid string, extra map[string]string) *corev1.Namespace {
	a := map[string]string{AnnotationCreator: creator, admission.AnnotationCreatorUID: uid}
	for k, v := range extra {
		a[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: a, ResourceVersion: "1"}}
}

// TestOrphanWithoutAPIServer runs the Orphaner and the reconciler against controller-runtime's
// fake client: matched by uid, annotated once, and the binding follows the annotation.
func TestOrphanWithoutAPIServer(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := fake.NewClientBuilder().
		WithIndex(&corev1.Namespace{}, creatorUIDField, func(o client.Object) []string {
			if uid := o.GetAnnotations()[admission.AnnotationCreatorUID]; uid != "" {
				return []string{uid}
			}
			return nil
		}).
		WithObjects(
			namespace("bob-a", "github:bob:1002", "1002", nil),
			namespace("bob-old", "github:bob:1002", "1002", map[string]string{AnnotationOrphanedAt: "2020-01-01T00:00:00Z", AnnotationOrphanedReason: "first"}),
			namespace("new-bob", "github:bob:2002", "2002", nil), // the login bob, now someone else's
		).Build()
	rec := events.NewFakeRecorder(10)
	o := &Orphaner{client: c, api: c, events: fakeEvents{rec}, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now }}
	ctx := context.Background()

	n, err := o.Orphan(ctx, "1002", "removed from GitHub organization acme")
	if err != nil || n != 1 {
		t.Fatalf("Orphan = %d, %v; want 1 (bob-old was orphaned before)", n, err)
	}
	get := func(name string) *corev1.Namespace {
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if a := get("bob-a").Annotations; a[AnnotationOrphanedAt] != "2026-12-01T12:00:00Z" || a[AnnotationOrphanedReason] != "removed from GitHub organization acme" {
		t.Fatalf("bob-a annotations %v", a)
	}
	if a := get("bob-old").Annotations; a[AnnotationOrphanedReason] != "first" {
		t.Fatalf("an orphaned namespace was orphaned again: %v", a)
	}
	if Orphaned(get("new-bob")) {
		t.Fatal("matched by login, not uid")
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, ReasonOrphaned) || !strings.Contains(e, "github:bob:1002") {
			t.Fatalf("event %q", e)
		}
	default:
		t.Fatal("no event")
	}

	for _, tc := range []struct {
		name, ns, group string
		want            *rbacv1.Subject
	}{
		{"orphaned namespace binds the fallback group", "bob-a", "github:acme/platform",
			&rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "github:acme/platform"}},
		{"orphaned namespace without a fallback group binds no one", "bob-old", "", nil},
		{"a namespace not orphaned binds its creator", "new-bob", "github:acme/platform",
			&rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:bob:2002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &reconciler{client: c, owned: c, apiReader: c, events: fakeEvents{events.NewFakeRecorder(10)},
				log: slog.New(slog.DiscardHandler), clusterRole: "admin", orphanGroup: tc.group}
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: tc.ns}}); err != nil {
				t.Fatal(err)
			}
			rb := &rbacv1.RoleBinding{}
			err := c.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: RoleBindingName}, rb)
			switch {
			case tc.want == nil && err == nil:
				t.Fatalf("binding %+v, want none", rb.Subjects)
			case tc.want != nil && (err != nil || len(rb.Subjects) != 1 || rb.Subjects[0] != *tc.want):
				t.Fatalf("binding %+v %v, want %+v", rb.Subjects, err, *tc.want)
			}
		})
	}
}

// TestOrphanedCreatorOwnsNothing: the owner rules of /authorize read NamespaceOwners; while a
// namespace is orphaned its creator is not named there (so no get, delete, update or patch of
// it as its creator), and is named again once an admin gives it back. Co-owner teams named
// before the orphaning stay.
func TestOrphanedCreatorOwnsNothing(t *testing.T) {
	orphaned := map[string]string{AnnotationOrphanedAt: "2026-12-01T12:00:00Z", AnnotationOrphanedReason: "removed",
		"octogate.dev/owner-teams": "acme/sre"}
	c := fake.NewClientBuilder().WithObjects(
		namespace("bob-a", "github:bob:1002", "1002", orphaned),
		namespace("bob-b", "github:bob:1002", "1002", map[string]string{"octogate.dev/owner-teams": "acme/sre"}),
	).Build()
	x := &NamespaceIndex{reader: c}
	if uid, teams, ok := x.NamespaceOwners("bob-a"); !ok || uid != "" || len(teams) != 1 || teams[0] != "acme/sre" {
		t.Fatalf("orphaned bob-a: owners %q %v %v, want no creator and team acme/sre", uid, teams, ok)
	}
	if uid, teams, ok := x.NamespaceOwners("bob-b"); !ok || uid != "1002" || len(teams) != 1 {
		t.Fatalf("bob-b: owners %q %v %v, want creator 1002", uid, teams, ok)
	}
}

// TestOrphanUnlessGivenBack: an orphaning records AnnotationLastOrphanedAt, which stays when
// an admin gives the namespace back; a removal GitHub did not confirm then leaves that
// namespace alone and orphans the creator's others, while a confirmed one orphans it again.
func TestOrphanUnlessGivenBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := fake.NewClientBuilder().
		WithIndex(&corev1.Namespace{}, creatorUIDField, func(o client.Object) []string {
			return []string{o.GetAnnotations()[admission.AnnotationCreatorUID]}
		}).
		WithObjects(
			namespace("bob-restored", "github:bob:1002", "1002", nil),
			namespace("bob-new", "github:bob:1002", "1002", nil),
		).Build()
	o := &Orphaner{client: c, api: c, events: fakeEvents{events.NewFakeRecorder(10)}, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now }}
	ctx := context.Background()
	get := func(name string) *corev1.Namespace {
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if n, err := o.OrphanUnlessGivenBack(ctx, "1002", "removed"); n != 2 || err != nil {
		t.Fatalf("first removal: %d, %v; want 2 orphaned", n, err)
	}
	if a := get("bob-restored").Annotations; a[AnnotationLastOrphanedAt] != "2026-12-01T12:00:00Z" {
		t.Fatalf("annotations %v, want %s", a, AnnotationLastOrphanedAt)
	}
	// An admin gives bob-restored back (docs/revocation.md); bob-new was created later.
	ns := get("bob-restored")
	delete(ns.Annotations, AnnotationOrphanedAt)
	delete(ns.Annotations, AnnotationOrphanedReason)
	if err := c.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, get("bob-new")); err != nil {
		t.Fatal(err)
	}
	fresh := namespace("bob-new", "github:bob:1002", "1002", nil)
	fresh.ResourceVersion = ""
	if err := c.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if n, err := o.OrphanUnlessGivenBack(ctx, "1002", "replayed"); n != 1 || err != nil || Orphaned(get("bob-restored")) || !Orphaned(get("bob-new")) {
		t.Fatalf("unconfirmed removal: %d, %v; bob-restored orphaned %v, bob-new orphaned %v; want only bob-new",
			n, err, Orphaned(get("bob-restored")), Orphaned(get("bob-new")))
	}
	if n, err := o.Orphanable(ctx, "1002"); n != 1 || err != nil {
		t.Fatalf("Orphanable = %d, %v; want 1 (bob-restored)", n, err)
	}
	if n, err := o.Orphan(ctx, "1002", "confirmed"); n != 1 || err != nil || !Orphaned(get("bob-restored")) {
		t.Fatalf("confirmed removal: %d, %v; want bob-restored orphaned again", n, err)
	}
	if n, err := o.Orphanable(ctx, "1002"); n != 0 || err != nil {
		t.Fatalf("Orphanable = %d, %v; want 0 once all are orphaned", n, err)
	}
}
