package elevation

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/subjectaccessreview"
)

type recorded struct {
	mu     sync.Mutex
	events []audit.Event
}

func (r *recorded) Log(e audit.Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }

func (r *recorded) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Event+" by "+e.User+" "+e.Reason)
	}
	r.events = nil
	return out
}

func TestStoreGrantsAndAuditsEveryStep(t *testing.T) {
	p := mustPolicy(t)
	now := t0
	rec := &recorded{}
	s, err := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }, Audit: rec, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ar := created(t, p, spec("prod-debug", "INC-123", time.Hour, "prod"), bob)
	s.Upsert(ar, false)
	if got := rec.names(); !slices.Equal(got, []string{"elevation.requested by github:bob:1002 "}) {
		t.Fatalf("events %v", got)
	}
	if g := s.Active(bob.Username, now); len(g) != 0 {
		t.Fatalf("a pending request grants %v", g)
	}
	if n := s.OpenRequests(bob.Username, now); n != 1 {
		t.Fatalf("open requests %d", n)
	}
	approved := roundTrip(t, ar)
	now = t0.Add(time.Minute)
	if approved.Status, err = Act(p, ar, ActionApprove, "", alice, now); err != nil {
		t.Fatal(err)
	}
	s.Upsert(approved, false)
	if got := rec.names(); !slices.Equal(got, []string{"elevation.approved by github:alice:1001 ", "elevation.started by github:bob:1002 approved"}) {
		t.Fatalf("events %v", got)
	}
	want := []subjectaccessreview.ActiveGrant{{Request: ar.Name, Elevation: "prod-debug", Namespace: "prod"}}
	if g := s.Active(bob.Username, now); !slices.Equal(g, want) {
		t.Fatalf("active %v", g)
	}
	// The end comes by itself: Active answers from the clock, CheckEnds records it once.
	now = t0.Add(61 * time.Minute)
	if g := s.Active(bob.Username, now); len(g) != 0 {
		t.Fatalf("active after the end: %v", g)
	}
	s.CheckEnds()
	s.CheckEnds()
	if got := rec.names(); !slices.Equal(got, []string{"elevation.ended by github:bob:1002 end_time"}) {
		t.Fatalf("events %v", got)
	}
	// Deleting an ended request records nothing more; deleting an active one records its end.
	s.Delete(approved)
	if got := rec.names(); len(got) != 0 {
		t.Fatalf("events %v", got)
	}
	bg := created(t, p, spec("break-glass", "INC-9", 10*time.Minute, ""), bob)
	now = t0
	s.Upsert(bg, false)
	if got := rec.names(); !slices.Equal(got, []string{"elevation.requested by github:bob:1002 ", "elevation.started by github:bob:1002 break_glass"}) {
		t.Fatalf("events %v", got)
	}
	s.Delete(bg)
	if got := rec.names(); !slices.Equal(got, []string{"elevation.ended by github:bob:1002 deleted"}) {
		t.Fatalf("deleting an active request: events %v", got)
	}
	// A restart's first list records no step again.
	s.Upsert(approved, true)
	if got := rec.names(); len(got) != 0 {
		t.Fatalf("initial list: events %v", got)
	}
}

func TestStoreRecordsRevocation(t *testing.T) {
	p := mustPolicy(t)
	now := t0
	rec := &recorded{}
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }, Audit: rec, Now: func() time.Time { return now }})
	ar := created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob)
	s.Upsert(ar, false)
	st, _ := Act(p, ar, ActionApprove, "", alice, now)
	active := roundTrip(t, ar)
	active.Status = st
	s.Upsert(active, false)
	rec.names()
	revoked := roundTrip(t, active)
	if revoked.Status, _ = Act(p, active, ActionRevoke, "done", erin, now.Add(time.Minute)); revoked.Status.Phase != PhaseRevoked {
		t.Fatal("not revoked")
	}
	s.Upsert(revoked, false)
	if got := rec.names(); !slices.Equal(got, []string{"elevation.revoked by github:erin:1005 ", "elevation.ended by github:erin:1005 revoked"}) {
		t.Fatalf("events %v", got)
	}
	if g := s.Active(bob.Username, now.Add(time.Minute)); len(g) != 0 {
		t.Fatalf("active after revocation: %v", g)
	}
}
