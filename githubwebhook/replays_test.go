package githubwebhook

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/octogate/octogate/internal/githubapi"
)

type fakeMembers struct {
	member bool
	err    error
	calls  []string
}

func (f *fakeMembers) IsMember(_ context.Context, org, uid string) (bool, error) {
	f.calls = append(f.calls, org+" "+uid)
	return f.member, f.err
}

func newReplayEnv(t *testing.T, members Members, removals Removals) *env {
	t.Helper()
	e := &env{rev: &fakeRevoker{}, orph: &fakeOrphaner{}}
	cfg := Config{Secret: secret, Orgs: []string{"acme"}, Revoker: e.rev, Orphaner: e.orph, Removals: removals,
		Logger: slog.New(slog.DiscardHandler)}
	if members != nil {
		cfg.Members = members
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

var removal = githubapi.OrganizationPayload("member_removed", acme, bob, admin)

// TestReplayedRemovalOrphansOnce: the signature does not cover X-GitHub-Delivery; the same
// signed member_removed sent again under a new delivery id (or in the other content type)
// evicts again and orphans nothing.
func TestReplayedRemovalOrphansOnce(t *testing.T) {
	e := newReplayEnv(t, nil, nil)
	if status, a := e.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret); status != 200 || a.Result != "evicted" || len(e.orph.calls) != 1 {
		t.Fatalf("first delivery: %d %+v, %d orphanings", status, a, len(e.orph.calls))
	}
	for _, d := range []githubapi.Delivery{
		{Event: "organization", Payload: removal, ID: "11111111-2222-3333-4444-555555555555"},
		{Event: "organization", Payload: removal, Form: true},
	} {
		status, a := e.deliver(t, d, secret)
		if status != 200 || a.Result != resultStaleRemoval || len(e.orph.calls) != 1 {
			t.Fatalf("replayed payload (form %v): %d %+v, %d orphanings; want 200 %s and no orphaning", d.Form, status, a, len(e.orph.calls), resultStaleRemoval)
		}
	}
	if n := len(e.rev.targets()); n != 3 {
		t.Fatalf("%d evictions, want one per delivery (eviction is harmless)", n)
	}
	// Another removal (another payload) is acted on.
	other := githubapi.OrganizationPayload("member_removed", acme, githubapi.Account{Login: "carol", ID: 1003}, admin)
	if status, a := e.deliver(t, githubapi.Delivery{Event: "organization", Payload: other}, secret); status != 200 || a.Result != "evicted" || len(e.orph.calls) != 2 {
		t.Fatalf("another removal: %d %+v, %d orphanings", status, a, len(e.orph.calls))
	}
	if e.orph.unconfirmed != 2 {
		t.Fatalf("without an org token, %d of 2 orphanings spared namespaces given back", e.orph.unconfirmed)
	}
}

// optimisticClientset is a fake clientset whose ConfigMap writes are compare-and-swaps on
// resourceVersion, as kube-apiserver's are: the fake's tracker keeps no resourceVersion, so
// without this two replicas' concurrent updates would both succeed. The fake runs its reactors
// under one lock, so each check and its write happen at once.
func optimisticClientset() *fake.Clientset {
	client := fake.NewClientset()
	version := 0
	next := func(obj runtime.Object) {
		version++
		obj.(*corev1.ConfigMap).ResourceVersion = strconv.Itoa(version)
	}
	client.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		next(a.(k8stesting.CreateAction).GetObject())
		return false, nil, nil // the tracker stores it
	})
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		stored, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), cm.Namespace, cm.Name)
		if err != nil {
			return true, nil, err
		}
		if stored.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
			return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, errors.New("the object has been modified"))
		}
		next(cm)
		return false, nil, nil
	})
	return client
}

// TestReplayIsRecognisedOnEveryReplica: two replicas sharing a ConfigMap (ConfigMapRemovals);
// a payload one of them acted on orphans nothing at the other, and the same payload sent to
// both at once orphans once.
func TestReplayIsRecognisedOnEveryReplica(t *testing.T) {
	client := optimisticClientset()
	shared := func() Removals { return &ConfigMapRemovals{Client: client, Namespace: "octogate-system"} }
	a, b := newReplayEnv(t, nil, shared()), newReplayEnv(t, nil, shared())
	if status, ans := a.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret); status != 200 || len(a.orph.calls) != 1 {
		t.Fatalf("replica a: %d %+v", status, ans)
	}
	if status, ans := b.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret); status != 200 || ans.Result != resultStaleRemoval || len(b.orph.calls) != 0 {
		t.Fatalf("replica b given the payload replica a acted on: %d %+v, %d orphanings", status, ans, len(b.orph.calls))
	}
	cm, err := client.CoreV1().ConfigMaps("octogate-system").Get(context.Background(), DefaultRemovalsName, metav1.GetOptions{})
	if err != nil || cm.Data[PayloadDigest(removal)] == "" {
		t.Fatalf("ConfigMap %s: %v %v", DefaultRemovalsName, cm, err)
	}

	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		r := shared()
		wg.Go(func() {
			if ok, err := r.Claim(context.Background(), PayloadDigest([]byte("concurrent"))); err != nil {
				t.Error(err)
			} else if ok {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if n := firsts.Load(); n != 1 {
		t.Fatalf("%d replicas claimed one payload at once, want 1", n)
	}
}

// TestRemovalIsConfirmedWithGitHub: with an org token, a member_removed orphans only when
// GitHub says the user is no member of the org now; a user who is a member (an old removal
// replayed, or undone since) keeps their namespaces; when GitHub cannot tell, nothing is
// orphaned and a redelivery retries.
func TestRemovalIsConfirmedWithGitHub(t *testing.T) {
	m := &fakeMembers{member: true}
	e := newReplayEnv(t, m, nil)
	status, a := e.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret)
	if status != 200 || a.Result != resultStaleRemoval || len(e.orph.calls) != 0 || len(e.rev.targets()) != 1 {
		t.Fatalf("removal of a member: %d %+v, %d orphanings", status, a, len(e.orph.calls))
	}
	if len(m.calls) != 1 || m.calls[0] != "acme 1002" {
		t.Fatalf("GitHub asked %q, want acme 1002", m.calls)
	}

	// A user with no namespace to orphan: neither recorded nor asked about.
	m1 := &fakeMembers{}
	e = newReplayEnv(t, m1, nil)
	e.orph.none = 1
	status, a = e.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret)
	if status != 200 || a.Result != "evicted" || len(e.orph.calls) != 0 || len(m1.calls) != 0 {
		t.Fatalf("removal of a user without namespaces: %d %+v, %d orphanings, GitHub asked %q", status, a, len(e.orph.calls), m1.calls)
	}
	if first, _ := e.h.removals.Claim(context.Background(), PayloadDigest(removal)); !first {
		t.Fatal("the removal of a user without namespaces was recorded")
	}

	m2 := &fakeMembers{err: errors.New("GitHub is down")}
	e = newReplayEnv(t, m2, nil)
	status, a = e.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret)
	if status != 502 || a.Result != "error" || len(e.orph.calls) != 0 {
		t.Fatalf("GitHub cannot tell: %d %+v, %d orphanings", status, a, len(e.orph.calls))
	}
	m2.err = nil
	status, a = e.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret)
	if status != 200 || a.Result != "evicted" || len(e.orph.calls) != 1 || e.orph.unconfirmed != 0 {
		t.Fatalf("redelivered once GitHub confirms: %d %+v, %d orphanings (%d unconfirmed)", status, a, len(e.orph.calls), e.orph.unconfirmed)
	}
}
