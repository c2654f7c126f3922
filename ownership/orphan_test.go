package ownership

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/octogate/octogate/admission"
)

const testOrphanGroup = "github:acme/platform"

var testOrphaner *Orphaner

func createOwnedNamespace(t *testing.T, creator, uid string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "orphan-", Annotations: map[string]string{
		AnnotationCreator: creator, admission.AnnotationCreatorUID: uid,
	}}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func TestCreatorLeavingOrphansTheirNamespaces(t *testing.T) {
	requireAPIServer(t)
	ctx := context.Background()
	// The uid is unique to this test so namespaces of other tests never match.
	uid := fmt.Sprint(time.Now().UnixNano())
	bob := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "github:bob:" + uid}
	group := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: testOrphanGroup}
	mine := []*corev1.Namespace{createOwnedNamespace(t, bob.Name, uid), createOwnedNamespace(t, bob.Name, uid)}
	// Someone else now holds the login "bob": matched by uid, their namespace is not touched.
	theirs := createOwnedNamespace(t, bob.Name, uid+"7")
	for _, ns := range append(mine, theirs) {
		waitForBinding(t, ns.Name, bob)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: mine[0].Name}, Data: map[string]string{"k": "v"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the orphaner sees bob's namespaces", func(ctx context.Context) error {
		nss, err := testOrphaner.Namespaces(ctx, uid)
		if err != nil || len(nss) != 2 {
			return fmt.Errorf("%d namespaces, %w", len(nss), err)
		}
		return nil
	})
	n, err := testOrphaner.Orphan(ctx, uid, "removed from GitHub organization acme")
	if err != nil || n != 2 {
		t.Fatalf("Orphan = %d, %v; want 2", n, err)
	}
	for _, ns := range mine {
		waitForBinding(t, ns.Name, group)
		waitForEvent(t, ns.Name, ReasonOrphaned)
		got := &corev1.Namespace{}
		if err := admin.Get(ctx, types.NamespacedName{Name: ns.Name}, got); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339, got.Annotations[AnnotationOrphanedAt]); err != nil ||
			got.Annotations[AnnotationOrphanedReason] != "removed from GitHub organization acme" {
			t.Fatalf("annotations %v", got.Annotations)
		}
		if got.Annotations[AnnotationCreator] != bob.Name {
			t.Fatalf("creator annotation changed: %v", got.Annotations)
		}
	}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}, cm); err != nil {
		t.Fatalf("other objects in an orphaned namespace must stay: %v", err)
	}
	waitForBinding(t, theirs.Name, bob)

	t.Run("a second removal changes nothing (first time and reason kept)", func(t *testing.T) {
		before := &corev1.Namespace{}
		eventually(t, "cache sees the orphan annotation", func(ctx context.Context) error {
			nss, err := testOrphaner.Namespaces(ctx, uid)
			if err != nil {
				return err
			}
			for _, ns := range nss {
				if !Orphaned(&ns) {
					return fmt.Errorf("%s not orphaned yet in the cache", ns.Name)
				}
			}
			return nil
		})
		_ = admin.Get(ctx, types.NamespacedName{Name: mine[0].Name}, before)
		if n, err := testOrphaner.Orphan(ctx, uid, "another reason"); err != nil || n != 0 {
			t.Fatalf("Orphan again = %d, %v; want 0", n, err)
		}
		after := &corev1.Namespace{}
		_ = admin.Get(ctx, types.NamespacedName{Name: mine[0].Name}, after)
		if after.Annotations[AnnotationOrphanedReason] != before.Annotations[AnnotationOrphanedReason] {
			t.Fatalf("reason changed to %q", after.Annotations[AnnotationOrphanedReason])
		}
	})
	t.Run("an admin removing the annotations restores the creator's binding", func(t *testing.T) {
		patch := []byte(`{"metadata":{"annotations":{"` + AnnotationOrphanedAt + `":null,"` + AnnotationOrphanedReason + `":null}}}`)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mine[1].Name}}
		if err := admin.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		waitForBinding(t, mine[1].Name, bob)
	})
}
