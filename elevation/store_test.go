package elevation

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	want := []subjectaccessreview.ActiveGrant{{Request: ar.Name, Elevation: "prod-debug", Namespace: "prod", RequesterUID: bob.UID}}
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

// TestStoreGrantsOnlyWhatThePolicyInForceAllows: a status the webhooks would never admit
// (Active without an approval, or approved by the requester) grants nothing, and a policy
// that changed after the approval bounds the grant: a shorter maxDuration ends it sooner,
// an elevation no longer break-glass ends a break-glass request.
func TestStoreGrantsOnlyWhatThePolicyInForceAllows(t *testing.T) {
	p := mustPolicy(t)
	policy := p
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return policy }})
	with := func(from, to string) *subjectaccessreview.Policy {
		q, err := subjectaccessreview.Parse([]byte(strings.Replace(testPolicy, from, to, 1)))
		if err != nil || !strings.Contains(testPolicy, from) {
			t.Fatalf("policy with %q: %v", to, err)
		}
		return q
	}
	at := metav1.NewTime(t0)
	end := metav1.NewTime(t0.Add(time.Hour))

	forged := created(t, p, spec("prod-debug", "INC-1", time.Hour, ""), bob)
	forged.Name = "forged"
	forged.Status.Phase, forged.Status.StartTime, forged.Status.EndTime = PhaseActive, &at, &end
	selfApproved := roundTrip(t, forged)
	selfApproved.Name = "self-approved"
	selfApproved.Status.Approvals = []Step{{By: bobRenamed.Username, UID: bobRenamed.UID, At: at}}
	s.Upsert(forged, false)
	s.Upsert(selfApproved, false)
	if g := s.Active(bob.Username, t0.Add(time.Minute)); len(g) != 0 {
		t.Fatalf("a status no webhook admitted grants %v", g)
	}

	approved := created(t, p, spec("prod-debug", "INC-2", time.Hour, ""), bob)
	st, err := Act(p, approved, ActionApprove, "", alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	approved.Status = st
	s.Upsert(approved, false)
	if g := s.Active(bob.Username, t0.Add(30*time.Minute)); len(g) != 1 {
		t.Fatalf("an approved request: %v", g)
	}
	policy = with("maxDuration: 1h", "maxDuration: 15m")
	if g := s.Active(bob.Username, t0.Add(14*time.Minute)); len(g) != 1 {
		t.Fatalf("within the new maxDuration: %v", g)
	}
	if g := s.Active(bob.Username, t0.Add(15*time.Minute)); len(g) != 0 {
		t.Fatalf("maxDuration reduced to 15m, still granted at 15m: %v", g)
	}

	policy = p
	bg := created(t, p, spec("break-glass", "INC-3", 10*time.Minute, ""), bob)
	s.Upsert(bg, false)
	if g := s.Active(bob.Username, t0.Add(time.Minute)); len(g) != 2 {
		t.Fatalf("break-glass and the approved request: %v", g)
	}
	policy = with("  requireReason: true\n  breakGlass: true\n", "  requireReason: true\n  approvers: [{kind: Group, name: \"github:acme/sre\"}]\n")
	if g := s.Active(bob.Username, t0.Add(time.Minute)); len(g) != 1 || g[0].Elevation != "prod-debug" {
		t.Fatalf("break-glass no longer allowed, still granted: %v", g)
	}
}

func TestStoreReserveCountsUntilTheInformerShowsTheRequest(t *testing.T) {
	p := mustPolicy(t)
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }})
	if s.Synced() {
		t.Fatal("a new store is synced")
	}
	for i, name := range []string{"a", "b", "c"} {
		if s.Reserve(bob.Username, name, 3, t0) != nil {
			t.Fatalf("reservation %d refused", i)
		}
	}
	if s.Reserve(bob.Username, "d", 3, t0) == nil || s.OpenRequests(bob.Username, t0) != 3 {
		t.Fatalf("a fourth reservation at limit 3; open %d", s.OpenRequests(bob.Username, t0))
	}
	// The informer shows "a": it counts once, not twice.
	ar := created(t, p, spec("prod-debug", "INC-1", time.Hour, ""), bob)
	ar.Name = "a"
	s.Upsert(ar, false)
	if n := s.OpenRequests(bob.Username, t0); n != 3 {
		t.Fatalf("open %d after the informer showed a reserved request", n)
	}
	// Reservations the informer never shows (a create refused later) lapse.
	if n := s.OpenRequests(bob.Username, t0.Add(ReservationTTL)); n != 1 {
		t.Fatalf("open %d after the reservations lapsed", n)
	}
	if err := s.Reserve(bob.Username, "d", 3, t0.Add(ReservationTTL)); err != nil {
		t.Fatalf("reservation refused after the others lapsed: %v", err)
	}
}

// TestStoreForgetsARequestUpdatedToSomethingUndecodable: an update the store cannot decode
// (only possible with the webhooks bypassed) must not leave the previous, active version
// granting.
func TestStoreForgetsARequestUpdatedToSomethingUndecodable(t *testing.T) {
	p := mustPolicy(t)
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }})
	ar := created(t, p, spec("break-glass", "INC-1", 10*time.Minute, ""), bob)
	ar.TypeMeta = metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: Kind}
	b, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	s.fromInformer(u, false)
	if g := s.Active(bob.Username, t0); len(g) != 1 {
		t.Fatalf("break-glass: %v", g)
	}
	bad := u.DeepCopy()
	if err := unstructured.SetNestedField(bad.Object, "ten minutes", "spec", "duration"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(bad.Object, "Revoked", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	s.fromInformer(bad, false)
	if g := s.Active(bob.Username, t0); len(g) != 0 {
		t.Fatalf("the earlier version still grants: %v", g)
	}
}

// TestStoreRefusesALoopOfCreateAndWithdraw: withdrawn requests are not open, but each one
// was notified; a loop of create and withdraw stops at CreateLimit per CreateWindow.
func TestStoreRefusesALoopOfCreateAndWithdraw(t *testing.T) {
	p := mustPolicy(t)
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }})
	at := t0
	for i := range CreateLimit + 1 {
		name := fmt.Sprintf("prod-debug-%05d", i)
		err := s.Reserve(bob.Username, name, 0, at)
		if i == CreateLimit {
			if !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), "created 20 requests within 1h0m0s") {
				t.Fatalf("create %d: %v", i, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		ar := created(t, p, spec("prod-debug", "INC-1", time.Hour, ""), bob)
		ar.Name = name
		if ar.Status, err = Act(p, ar, ActionRevoke, "", bob, at); err != nil {
			t.Fatal(err)
		}
		s.Upsert(ar, false)
		at = at.Add(time.Second)
	}
	if err := s.Reserve(alice.Username, "someone-else", 0, at); err != nil {
		t.Fatalf("another person: %v", err)
	}
	if err := s.Reserve(bob.Username, "later", 0, t0.Add(CreateWindow)); err != nil {
		t.Fatalf("a window later: %v", err)
	}
}

// TestStoreEndsARequestDeletedButKeptByAFinalizer: a requester who adds a finalizer to their
// own request keeps the object after an approver deletes it; the grant ends at the delete
// all the same, and the end is recorded once.
func TestStoreEndsARequestDeletedButKeptByAFinalizer(t *testing.T) {
	p := mustPolicy(t)
	rec := &recorded{}
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }, Audit: rec, Now: func() time.Time { return t0.Add(time.Minute) }})
	ar := created(t, p, spec("break-glass", "INC-1", 10*time.Minute, ""), bob)
	ar.Finalizers = []string{"bob.example/keep"}
	s.Upsert(ar, false)
	rec.names()
	terminating := roundTrip(t, ar)
	deleted := metav1.NewTime(t0.Add(time.Minute))
	terminating.DeletionTimestamp = &deleted
	s.Upsert(terminating, false)
	if g := s.Active(bob.Username, t0.Add(time.Minute)); len(g) != 0 {
		t.Fatalf("a deleted request still grants: %v", g)
	}
	s.Delete(terminating)
	if got := rec.names(); !slices.Equal(got, []string{"elevation.ended by github:bob:1002 deleted"}) {
		t.Fatalf("events %v", got)
	}
}

// TestStoreEndsALeaversRequests: a confirmed org leaver's active request grants nothing from
// the leave on and its end is recorded once, with reason member_removed; a pending one never
// starts; another person's and a request filed after the leave are untouched.
func TestStoreEndsALeaversRequests(t *testing.T) {
	p := mustPolicy(t)
	now := t0
	rec := &recorded{}
	s, _ := NewStore(StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }, Audit: rec, Now: func() time.Time { return now }})
	approve := func(ar *AccessRequest, at time.Time) *AccessRequest {
		t.Helper()
		st, err := Act(p, ar, ActionApprove, "", alice, at)
		if err != nil {
			t.Fatal(err)
		}
		out := roundTrip(t, ar)
		out.Status = st
		return out
	}
	active := created(t, p, spec("prod-debug", "INC-1", time.Hour, "prod"), bob)
	active.Name = "prod-debug-aaaaa"
	s.Upsert(active, false)
	active = approve(active, now)
	s.Upsert(active, false)
	pending := created(t, p, spec("prod-debug", "INC-2", time.Hour, "prod"), bob)
	pending.Name = "prod-debug-bbbbb"
	s.Upsert(pending, false)
	erins := created(t, p, spec("prod-debug", "INC-3", time.Hour, "prod"), erin)
	erins.Name = "prod-debug-ccccc"
	s.Upsert(erins, false)
	erinsActive := roundTrip(t, erins)
	erinsActive.Status, _ = Act(p, erins, ActionApprove, "", alice, now)
	s.Upsert(erinsActive, false)
	rec.names()

	left := t0.Add(10 * time.Minute)
	now = left
	if n := s.EndLeaver("1002", "acme", left); n != 1 {
		t.Fatalf("EndLeaver ended %d active requests, want 1", n)
	}
	if got := rec.names(); !slices.Equal(got, []string{"elevation.ended by github:bob:1002 member_removed"}) {
		t.Fatalf("events %v", got)
	}
	if g := s.Active(bob.Username, now); len(g) != 0 {
		t.Fatalf("a leaver's elevation is active: %v", g)
	}
	if s.Holds(active, now) {
		t.Fatal("Holds: a leaver's request still holds (the RBAC keeper would keep its RBAC)")
	}
	if n := s.OpenRequests(bob.Username, now); n != 0 {
		t.Fatalf("a leaver has %d open requests", n)
	}
	if g := s.Active(erin.Username, now); len(g) != 1 {
		t.Fatalf("another person's elevation ended: %v", g)
	}
	// Again (the feed, another replica's ConfigMap entry): nothing more.
	if n := s.EndRequester("1002", left, "revoked"); n != 0 {
		t.Fatalf("a second end ended %d", n)
	}
	// The pending request approved after the leave never starts, nor ends again at its end time.
	s.Upsert(approve(pending, left.Add(time.Minute)), false)
	now = t0.Add(3 * time.Hour)
	s.CheckEnds()
	if got := rec.names(); !slices.Equal(got, []string{"elevation.approved by github:alice:1001 ", "elevation.ended by github:erin:1005 end_time"}) {
		t.Fatalf("events after the leave %v", got)
	}
	// bob rejoins and asks again: a request filed after the leave is his.
	now = left.Add(time.Hour)
	again := created(t, p, spec("prod-debug", "INC-4", time.Hour, "prod"), bob)
	again.Name = "prod-debug-ddddd"
	again.Status.RequestedAt.Time = now
	s.Upsert(again, false)
	s.Upsert(approve(again, now), false)
	if g := s.Active(bob.Username, now); len(g) != 1 || g[0].Request != again.Name {
		t.Fatalf("a request filed after the leave: active %v", g)
	}
	// A requester recorded without a uid is matched by the id in the username.
	noUID := created(t, p, spec("prod-debug", "INC-5", time.Hour, "prod"), erin)
	noUID.Name = "prod-debug-eeeee"
	noUID.Status.Requester.UID = ""
	s.Upsert(noUID, false)
	s.Upsert(approve(noUID, now), false)
	rec.names()
	if n := s.EndLeaver("1005", "acme", now.Add(time.Second)); n != 1 {
		t.Fatalf("EndLeaver of erin ended %d, want 1 (her request recorded without a uid)", n)
	}
	if g := s.Active(erin.Username, now.Add(time.Second)); len(g) != 0 {
		t.Fatalf("erin's request without a uid is active after her leave: %v", g)
	}
}
