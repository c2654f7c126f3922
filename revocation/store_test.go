package revocation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRevokeSessionsIsSharedServedAndHonouredForItsOwnAudience: a logout of staging and prod
// at one issuer replica lands in the ConfigMap under new keys (the old ones stay readable), is
// served on both replicas' feeds with the same jtis, and evicts only on a replica whose own
// audience it names.
func TestRevokeSessionsIsSharedServedAndHonouredForItsOwnAudience(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	enders := map[string]*fakeEnder{}
	replica := func(audience string) (*Shared, *fakeEvictor, *Log) {
		ev, log, end := &fakeEvictor{}, NewLog(time.Hour), &fakeEnder{}
		s, err := NewShared(Config{Client: client, Namespace: "ns", Keep: time.Hour, Evictor: ev, Audience: audience, Log: log, Teams: NewTeams("github:", time.Hour), Leavers: end})
		enders[fmt.Sprintf("%p", s)] = end
		if err != nil {
			t.Fatal(err)
		}
		return s, ev, log
	}
	a, evA, logA := replica("prod")
	b, evB, logB := replica("prod")
	at := time.Now()
	if err := a.RevokeSessions(ctx, "1002", []string{"staging", "prod", "staging"}, at); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeSessions(ctx, "1002", []string{"Bad/Name"}, at); err == nil {
		t.Fatal("an invalid cluster name was accepted")
	}
	if err := a.RevokeSessions(ctx, "alice", nil, at); err == nil {
		t.Fatal("a login was accepted as a uid")
	}
	if err := a.Left(ctx, "acme", "1003", at); err != nil {
		t.Fatal(err)
	}
	if err := a.flush(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"left.acme.1003", "sessions.1002.prod", "sessions.1002.staging"}; !slices.Equal(keys, want) {
		t.Fatalf("ConfigMap keys %v, want %v", keys, want)
	}
	b.observe(cm, false)
	if users, _ := evA.snapshot(); !slices.Equal(users, []string{"1002"}) {
		t.Fatalf("replica a evicted %v, want 1002 once (prod only)", users)
	}
	if users, _ := evB.snapshot(); !slices.Equal(users, []string{"1002"}) {
		t.Fatalf("replica b evicted %v, want 1002 once (prod only)", users)
	}
	// The leaver's grants end on both replicas: a at Left, b from the ConfigMap.
	if got := enders[fmt.Sprintf("%p", a)].snapshot(); !slices.Equal(got, []string{"acme 1003"}) {
		t.Fatalf("replica a ended %v, want acme 1003", got)
	}
	if got := enders[fmt.Sprintf("%p", b)].snapshot(); !slices.Equal(got, []string{"acme 1003"}) {
		t.Fatalf("replica b ended %v, want acme 1003", got)
	}
	sa, _ := logA.Snapshot()
	sb, _ := logB.Snapshot()
	if len(sa) != 3 || !slices.Equal(sortedIDs(sa...), sortedIDs(sb...)) {
		t.Fatalf("feeds differ: %v vs %v", sa, sb)
	}
	// Team revocations reach the session verifier whether or not a member is cached.
	a.Revoke(ctx, Revocation{Team: "acme/sre", At: at})
	if !a.cfg.Teams.RevokedSince([]string{"github:acme/sre"}, at.Add(-time.Second)) || a.cfg.Teams.RevokedSince([]string{"github:acme/sre"}, at.Add(time.Second)) {
		t.Fatal("team revocation not recorded for sessions issued before it only")
	}
}

// TestMergeRestampsLateEntries: a revocation written more than LateAfter after its time gets
// the write's time, so that it lands inside receivers' cursor window.
func TestMergeRestampsLateEntries(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	got := merge(nil, map[string]time.Time{"user.1": now.Add(-10 * time.Minute), "user.2": now.Add(-time.Second)}, now, time.Hour)
	if got["user.1"] != now.Format(time.RFC3339) || got["user.2"] != now.Add(-time.Second).Format(time.RFC3339) {
		t.Fatalf("%v", got)
	}
}

// TestRevokeSessionsReturnsOnlyOnceTheConfigMapHoldsIt: a logout is answered as done only
// when every replica will learn of it. With the Kubernetes API down or every write in
// conflict, RevokeSessions returns an error (the issuer answers 503), and the revocation stays
// queued for Run; once the API answers, it returns with the ConfigMap holding the logout.
func TestRevokeSessionsReturnsOnlyOnceTheConfigMapHoldsIt(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"API down", apierrors.NewServiceUnavailable("etcd is down")},
		{"every write in conflict", apierrors.NewConflict(corev1.Resource("configmaps"), DefaultName, errors.New("the object has been modified"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var down atomic.Bool
			down.Store(true)
			client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if down.Load() && a.GetVerb() != "get" {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			s, err := NewShared(Config{Client: client, Namespace: "ns", Keep: time.Hour, Evictor: &fakeEvictor{}, Log: NewLog(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RevokeSessions(ctx, "1002", []string{"staging"}, time.Now()); err == nil {
				t.Fatal("RevokeSessions returned no error while the ConfigMap could not be written")
			}
			if _, ok := s.pending["sessions.1002.staging"]; !ok {
				t.Fatalf("the failed logout is no longer queued for Run: pending %v", s.pending)
			}
			down.Store(false)
			if err := s.RevokeSessions(ctx, "1002", []string{"prod"}, time.Now()); err != nil {
				t.Fatal(err)
			}
			cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, DefaultName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cm.Data["sessions.1002.prod"] == "" || cm.Data["sessions.1002.staging"] == "" {
				t.Fatalf("ConfigMap data %v, want both logouts", cm.Data)
			}
		})
	}
}

// TestLogSaysWhichSessionsALogoutRevoked: a logout of staging revokes uid's staging sessions
// issued until it (to the second), not later ones, not another cluster's nor another user's.
func TestLogSaysWhichSessionsALogoutRevoked(t *testing.T) {
	l := NewLog(time.Hour)
	at := time.Now().Truncate(time.Second).Add(300 * time.Millisecond)
	l.Add(Revocation{UserID: "1002", Cluster: "staging", At: at})
	for _, tc := range []struct {
		uid, cluster string
		iat          time.Time
		want         bool
	}{
		{"1002", "staging", at.Add(-time.Minute), true},
		{"1002", "staging", at.Truncate(time.Second), true},
		{"1002", "staging", at.Add(time.Second), false},
		{"1002", "prod", at.Add(-time.Minute), false},
		{"1003", "staging", at.Add(-time.Minute), false},
		{"1002", "", at.Add(-time.Minute), false},
	} {
		if got := l.SessionsRevokedSince(tc.uid, tc.cluster, tc.iat); got != tc.want {
			t.Errorf("SessionsRevokedSince(%q, %q, %v) = %v, want %v", tc.uid, tc.cluster, tc.iat, got, tc.want)
		}
	}
	if (*Log)(nil).SessionsRevokedSince("1002", "staging", at) {
		t.Error("a nil Log revoked")
	}
}

// TestOnlyALeaverEnds: Leavers hears of confirmed org leavers only; a user revocation (which
// an org webhook also sends when someone is added, and a logout) ends nothing.
func TestOnlyALeaverEnds(t *testing.T) {
	end := &fakeEnder{}
	l := Local{Evictor: &fakeEvictor{}, Leavers: end}
	ctx, at := context.Background(), time.Now()
	l.Revoke(ctx, Revocation{UserID: "1002", At: at})
	l.Revoke(ctx, Revocation{Team: "acme/sre", At: at})
	if err := l.RevokeSessions(ctx, "1002", nil, at); err != nil {
		t.Fatal(err)
	}
	if err := l.Left(ctx, "acme", "1002", at); err != nil {
		t.Fatal(err)
	}
	if got := end.snapshot(); !slices.Equal(got, []string{"acme 1002"}) {
		t.Fatalf("ended %v, want the leaver acme 1002 only", got)
	}
}
