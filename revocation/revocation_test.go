package revocation

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

type fakeEvictor struct {
	mu     sync.Mutex
	users  []string
	groups []string
	at     []time.Time
}

func (f *fakeEvictor) EvictUser(uid string, at time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users, f.at = append(f.users, uid), append(f.at, at)
	return 1
}

// fakeEnder records the leavers it is told of, as "org uid".
type fakeEnder struct {
	mu  sync.Mutex
	got []string
}

func (f *fakeEnder) EndLeaver(uid, org string, _ time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, org+" "+uid)
	return 1
}

func (f *fakeEnder) snapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func (f *fakeEvictor) EvictGroup(g string, at time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups, f.at = append(f.groups, g), append(f.at, at)
	return 2
}

func (f *fakeEvictor) snapshot() (users, groups []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.users), slices.Clone(f.groups)
}

func TestKeys(t *testing.T) {
	for _, r := range []Revocation{{UserID: "1002"}, {Team: "acme/platform-admins"}} {
		got, ok := parseKey(r.key())
		if !ok || got != r {
			t.Errorf("%+v -> %q -> %+v %v", r, r.key(), got, ok)
		}
	}
	for _, k := range []string{"user.", "team.acme", "team..x", "group.x", ""} {
		if _, ok := parseKey(k); ok {
			t.Errorf("parseKey(%q) accepted", k)
		}
	}
}

func TestMergeKeepsTheLatestPrunesOldAndBoundsSize(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	data := map[string]string{
		"user.1": now.Add(-time.Hour).Format(time.RFC3339),   // older than keep: pruned
		"user.2": now.Add(-time.Minute).Format(time.RFC3339), // kept, updated by the batch
		"user.3": now.Add(-time.Minute).Format(time.RFC3339), // kept
		"junk":   "not a time",
	}
	got := merge(data, map[string]time.Time{"user.2": now, "team.acme.a": now.Add(-time.Second)}, now, 10*time.Minute)
	want := map[string]string{
		"user.2":      now.Format(time.RFC3339),
		"user.3":      now.Add(-time.Minute).Format(time.RFC3339),
		"team.acme.a": now.Add(-time.Second).Format(time.RFC3339),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merge = %v, want %v", got, want)
	}
	batch := map[string]time.Time{}
	for i := range MaxEntries + 10 {
		batch[fmt.Sprintf("user.%d", i)] = now.Add(-time.Duration(i) * time.Millisecond * 10)
	}
	if got := merge(nil, batch, now, time.Hour); len(got) != MaxEntries || got["user.0"] == "" {
		t.Fatalf("%d entries (newest kept: %v), want %d", len(got), got["user.0"] != "", MaxEntries)
	}
}

func TestObserve(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	newShared := func(ev *fakeEvictor) *Shared {
		s, err := NewShared(Config{Client: fake.NewClientset(), Namespace: "octogate-system", Keep: 10 * time.Minute,
			Evictor: ev, GroupPrefix: "github:"})
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return now }
		return s
	}
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}, Data: data}
	}

	t.Run("a replica starting later honours revocations younger than Keep, from their time", func(t *testing.T) {
		ev := &fakeEvictor{}
		s := newShared(ev)
		s.observe(cm(map[string]string{
			"user.1002":      now.Add(-5 * time.Minute).Format(time.RFC3339),
			"user.1003":      now.Add(-11 * time.Minute).Format(time.RFC3339),
			"team.acme.plat": now.Add(-time.Minute).Format(time.RFC3339),
		}), true)
		if !slices.Equal(ev.users, []string{"1002"}) || !slices.Equal(ev.groups, []string{"github:acme/plat"}) {
			t.Fatalf("evicted users %v groups %v", ev.users, ev.groups)
		}
		for _, at := range ev.at {
			if !at.Before(now) {
				t.Fatalf("initial revocation applied at %v, want its recorded time", at)
			}
		}
	})
	t.Run("a live change evicts once, at the local time, and not again on the next update", func(t *testing.T) {
		ev := &fakeEvictor{}
		s := newShared(ev)
		data := map[string]string{"user.1002": now.Add(-time.Second).Format(time.RFC3339)}
		s.observe(cm(data), false)
		s.observe(cm(data), false)
		if !slices.Equal(ev.users, []string{"1002"}) || !ev.at[0].Equal(now) {
			t.Fatalf("evicted %v at %v", ev.users, ev.at)
		}
		data["user.1002"] = now.Format(time.RFC3339) // revoked again later
		s.observe(cm(data), false)
		if len(ev.users) != 2 {
			t.Fatalf("a later revocation of the same user was not applied: %v", ev.users)
		}
	})
	t.Run("this replica's own revocation coming back from the ConfigMap is not applied twice", func(t *testing.T) {
		ev := &fakeEvictor{}
		s := newShared(ev)
		at := now.Add(300 * time.Millisecond)
		s.Revoke(context.Background(), Revocation{UserID: "1002", At: at})
		s.observe(cm(map[string]string{"user.1002": at.Truncate(time.Second).Format(time.RFC3339)}), false)
		if len(ev.users) != 1 {
			t.Fatalf("evicted %d times", len(ev.users))
		}
	})
}

func TestFlushWritesTheConfigMap(t *testing.T) {
	client := fake.NewClientset()
	now := time.Now()
	s, err := NewShared(Config{Client: client, Namespace: "ns", Keep: time.Hour, Evictor: &fakeEvictor{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.Revoke(ctx, Revocation{UserID: "1", At: now})
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.Revoke(ctx, Revocation{Team: "acme/x", At: now})
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 2 || cm.Data["user.1"] == "" || cm.Data["team.acme.x"] == "" || len(s.pending) != 0 {
		t.Fatalf("ConfigMap data %v, pending %v", cm.Data, s.pending)
	}
}

// TestEveryReplicaEvicts: two replicas share one API (the fake clientset); a revocation
// delivered to replica 1 reaches replica 2 within 2 s, and a replica started afterwards
// honours it.
func TestEveryReplicaEvicts(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(ev *fakeEvictor) *Shared {
		s, err := NewShared(Config{Client: client, Namespace: "octogate-system", Keep: time.Hour, Evictor: ev, GroupPrefix: "github:"})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // only that Run returns matters here; its error after cancel is the context's
		select {
		case <-s.Synced():
		case <-time.After(10 * time.Second):
			t.Fatal("not synced")
		}
		return s
	}
	ev1, ev2 := &fakeEvictor{}, &fakeEvictor{}
	r1, _ := start(ev1), start(ev2)
	sent := time.Now()
	r1.Revoke(ctx, Revocation{UserID: "1002", At: sent})
	r1.Revoke(ctx, Revocation{Team: "acme/platform", At: sent})
	for {
		ev2.mu.Lock()
		got := len(ev2.users) == 1 && len(ev2.groups) == 1
		ev2.mu.Unlock()
		if got {
			break
		}
		if time.Since(sent) > 2*time.Second {
			t.Fatalf("replica 2 evicted users %v groups %v within 2s", ev2.users, ev2.groups)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("replica 2 evicted %v after the revocation at replica 1", time.Since(sent).Round(time.Millisecond))
	ev3 := &fakeEvictor{}
	start(ev3)
	for {
		users, groups := ev3.snapshot()
		if slices.Equal(users, []string{"1002"}) && slices.Equal(groups, []string{"github:acme/platform"}) {
			break
		}
		if time.Since(sent) > 5*time.Second {
			t.Fatalf("a replica started later evicted users %v groups %v", users, groups)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if users, _ := ev1.snapshot(); len(users) != 1 {
		t.Fatalf("replica 1 evicted %v; its own revocation must not be applied twice", users)
	}
}
