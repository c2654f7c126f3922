package revocation

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRevokeSessionsIsSharedServedAndHonouredForItsOwnAudience: a logout of staging and prod
// at one issuer replica lands in the ConfigMap under new keys (the old ones stay readable), is
// served on both replicas' feeds with the same jtis, and evicts only on a replica whose own
// audience it names.
func TestRevokeSessionsIsSharedServedAndHonouredForItsOwnAudience(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	replica := func(audience string) (*Shared, *fakeEvictor, *Log) {
		ev, log := &fakeEvictor{}, NewLog(time.Hour)
		s, err := NewShared(Config{Client: client, Namespace: "ns", Keep: time.Hour, Evictor: ev, Audience: audience, Log: log, Teams: NewTeams("github:", time.Hour)})
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
