package elevation

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/subjectaccessreview"
)

const testPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
elevations:
- name: prod-debug
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/sre"}]
  namespaces: [prod, "prod-*"]
  resourceRules: [{verbs: [get, create], apiGroups: [""], resources: [pods/exec]}]
  maxDuration: 1h
  requireReason: true
- name: two-keys
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/sre"}]
  approvals: 2
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
  maxDuration: 30m
- name: break-glass
  subjects: [{kind: Group, name: "github:acme/oncall"}]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
  maxDuration: 30m
  requireReason: true
  breakGlass: true
`

var (
	t0    = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	bob   = User{Username: "github:bob:1002", UID: "1002", Groups: []string{"github:acme", "github:acme/oncall"}}
	alice = User{Username: "github:alice:1001", UID: "1001", Groups: []string{"github:acme", "github:acme/sre"}}
	erin  = User{Username: "github:erin:1005", UID: "1005", Groups: []string{"github:acme", "github:acme/sre"}}
	carol = User{Username: "github:carol:1003", UID: "1003", Groups: []string{"github:other"}}
	// bobRenamed is bob after a login rename: the same GitHub id, now also in sre.
	bobRenamed = User{Username: "github:bobby:1002", UID: "1002", Groups: []string{"github:acme", "github:acme/sre"}}
)

func mustPolicy(t testing.TB) *subjectaccessreview.Policy {
	t.Helper()
	p, err := subjectaccessreview.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func spec(elevation, reason string, d time.Duration, ns string) Spec {
	return Spec{Elevation: elevation, Reason: reason, Duration: Duration{d}, Namespace: ns}
}

// created is a request as the webhooks admit it from user at t0.
func created(t *testing.T, p *subjectaccessreview.Policy, s Spec, user User) *AccessRequest {
	t.Helper()
	st, err := Admit(p, s, user, 0, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	return &AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: s.Elevation + "-abc12"}, Spec: s, Status: st}
}

func TestAdmit(t *testing.T) {
	p := mustPolicy(t)
	cases := []struct {
		name string
		spec Spec
		user User
		open int
		want string // "" admits
	}{
		{"a member asks with a reason", spec("prod-debug", "INC-123", time.Hour, ""), bob, 0, ""},
		{"narrowed to a namespace the elevation covers", spec("prod-debug", "INC-123", time.Hour, "prod-eu"), bob, 0, ""},
		{"unknown elevation", spec("prod-admin", "x", time.Hour, ""), bob, 0, `no elevation "prod-admin" in the policy (elevations: break-glass, prod-debug, two-keys)`},
		{"no elevation named", spec("", "x", time.Hour, ""), bob, 0, "spec.elevation is required"},
		{"not a subject", spec("prod-debug", "x", time.Hour, ""), carol, 0, `github:carol:1003 may not request elevation "prod-debug"`},
		{"over the maximum duration", spec("prod-debug", "x", 2*time.Hour, ""), bob, 0, `spec.duration 2h0m0s is longer than elevation "prod-debug" allows (maxDuration 1h0m0s)`},
		{"no duration", spec("prod-debug", "x", 0, ""), bob, 0, "spec.duration must be positive"},
		{"empty reason", spec("prod-debug", "", time.Hour, ""), bob, 0, `elevation "prod-debug" requires a reason`},
		{"blank reason", spec("prod-debug", "  ", time.Hour, ""), bob, 0, "requires a reason"},
		{"reason too long", spec("prod-debug", strings.Repeat("x", MaxReasonLength+1), time.Hour, ""), bob, 0, "longer than 1024 bytes"},
		{"namespace outside the elevation", spec("prod-debug", "x", time.Hour, "staging"), bob, 0, `spec.namespace "staging" is not one elevation "prod-debug" grants in`},
		{"flood: at the open limit", spec("prod-debug", "x", time.Hour, ""), bob, DefaultOpenLimit, "already has 3 open requests"},
		{"reason optional where not required", spec("two-keys", "", time.Minute, ""), bob, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Admit(p, tc.spec, tc.user, tc.open, 0, t0)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if st.Phase != PhasePending || st.Requester.Username != tc.user.Username || st.StartTime != nil {
					t.Fatalf("status %+v", st)
				}
				return
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), tc.want) || !strings.HasPrefix(Message(err), "octogate: ") {
				t.Fatalf("err = %v, want refusal containing %q", err, tc.want)
			}
		})
	}
}

func TestBreakGlassIsActiveAtOnce(t *testing.T) {
	p := mustPolicy(t)
	st, err := Admit(p, spec("break-glass", "INC-9 db down", 10*time.Minute, ""), bob, 0, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != PhaseActive || !st.BreakGlass || !st.StartTime.Time.Equal(t0) || !st.EndTime.Time.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("status %+v", st)
	}
	if _, err := Admit(p, spec("break-glass", "", 10*time.Minute, ""), bob, 0, 0, t0); err == nil {
		t.Fatal("break-glass without a reason admitted")
	}
}

func TestAct(t *testing.T) {
	p := mustPolicy(t)
	pending := func(t *testing.T) *AccessRequest {
		return created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob)
	}
	approved := func(t *testing.T) *AccessRequest {
		ar := pending(t)
		st, err := Act(p, ar, ActionApprove, "ok", alice, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ar.Status = st
		return ar
	}
	cases := []struct {
		name   string
		ar     func(t *testing.T) *AccessRequest
		action Action
		user   User
		at     time.Time
		want   string // "" allowed
		phase  Phase
	}{
		{"an approver approves", pending, ActionApprove, alice, t0.Add(time.Minute), "", PhaseActive},
		{"the requester may not approve", pending, ActionApprove, bob, t0.Add(time.Minute), "github:bob:1002 requested prod-debug-abc12 and may not approve it", ""},
		{"the requester renamed is still the requester", pending, ActionApprove, bobRenamed, t0.Add(time.Minute), "requested prod-debug-abc12 and may not approve it", ""},
		{"a non-approver may not approve", pending, ActionApprove, carol, t0.Add(time.Minute), `github:carol:1003 is not an approver of elevation "prod-debug"`, ""},
		{"an expired request cannot be approved", pending, ActionApprove, alice, t0.Add(PendingTimeout), "is Expired: only a Pending request can be approved", ""},
		{"an approved request cannot be approved again", approved, ActionApprove, erin, t0.Add(2 * time.Minute), "is Active: only a Pending request can be approved", ""},
		{"an approver denies", pending, ActionDeny, alice, t0.Add(time.Minute), "", PhaseDenied},
		{"the requester may not deny", pending, ActionDeny, bob, t0.Add(time.Minute), "may not deny it", ""},
		{"the requester withdraws", pending, ActionRevoke, bob, t0.Add(time.Minute), "", PhaseRevoked},
		{"an approver revokes an active request", approved, ActionRevoke, erin, t0.Add(2 * time.Minute), "", PhaseRevoked},
		{"a stranger may not revoke", approved, ActionRevoke, carol, t0.Add(2 * time.Minute), "is neither the requester nor an approver", ""},
		{"an ended request cannot be revoked", approved, ActionRevoke, alice, t0.Add(2 * time.Hour), "is Ended", ""},
		{"a revoked request cannot be approved", func(t *testing.T) *AccessRequest {
			ar := pending(t)
			ar.Status.Phase, ar.Status.Revocation = PhaseRevoked, &Step{By: bob.Username, At: metav1.NewTime(t0)}
			return ar
		}, ActionApprove, alice, t0.Add(time.Minute), "is Revoked", ""},
		{"an unknown action", pending, "escalate", alice, t0, `"escalate" must be approve, deny or revoke`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ar := tc.ar(t)
			st, err := Act(p, ar, tc.action, "because", tc.user, tc.at)
			if tc.want != "" {
				if !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", st.Phase, tc.phase)
			}
		})
	}
}

func TestApprovalStartsTheClockAndEndsItself(t *testing.T) {
	p := mustPolicy(t)
	ar := created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob)
	st, err := Act(p, ar, ActionApprove, "", alice, t0.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ar.Status = st
	if !st.StartTime.Time.Equal(t0.Add(5*time.Minute)) || !st.EndTime.Time.Equal(t0.Add(65*time.Minute)) {
		t.Fatalf("start %v end %v", st.StartTime, st.EndTime)
	}
	for _, c := range []struct {
		at   time.Time
		want Phase
	}{{t0.Add(64 * time.Minute), PhaseActive}, {t0.Add(65 * time.Minute), PhaseEnded}} {
		if got := ar.EffectivePhase(c.at); got != c.want {
			t.Errorf("at %v: %s, want %s", c.at, got, c.want)
		}
	}
}

func TestTwoApprovalsFromTwoPeople(t *testing.T) {
	p := mustPolicy(t)
	ar := created(t, p, spec("two-keys", "", 10*time.Minute, ""), bob)
	st, err := Act(p, ar, ActionApprove, "", alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	ar.Status = st
	if st.Phase != PhasePending {
		t.Fatalf("one approval of two: %s", st.Phase)
	}
	if _, err := Act(p, ar, ActionApprove, "", alice, t0); err == nil || !strings.Contains(err.Error(), "already approved") {
		t.Fatalf("the same approver twice: %v", err)
	}
	st, err = Act(p, ar, ActionApprove, "", erin, t0)
	if err != nil || st.Phase != PhaseActive {
		t.Fatalf("second approver: %v %v", st.Phase, err)
	}
}

// roundTrip is ar as kube-apiserver stores it and sends it back: JSON, times in seconds.
func roundTrip(t *testing.T, ar *AccessRequest) *AccessRequest {
	t.Helper()
	b, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckCreate(t *testing.T) {
	p := mustPolicy(t)
	good := roundTrip(t, created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob))
	if err := CheckCreate(p, good, bob, 0, 0, t0.Add(time.Second)); err != nil {
		t.Fatalf("the mutating webhook's status refused: %v", err)
	}
	forged := roundTrip(t, good)
	forged.Status.Requester.Username = alice.Username
	approvedAtBirth := roundTrip(t, good)
	approvedAtBirth.Status.Approvals = []Step{{By: alice.Username, At: metav1.NewTime(t0)}}
	noStatus := roundTrip(t, good)
	noStatus.Status = Status{}
	for name, c := range map[string]struct {
		ar   *AccessRequest
		user User
		want string
	}{
		"a forged requester":                 {forged, bob, "the requester is whoever creates the request (github:bob:1002)"},
		"created by someone else than named": {good, erin, "the requester is whoever creates the request (github:erin:1005)"},
		"an approval written at creation":    {approvedAtBirth, bob, "admission webhooks only"},
		"no status: the mutator did not run": {noStatus, bob, "mutating webhook, which did not run"},
	} {
		if err := CheckCreate(p, c.ar, c.user, 0, 0, t0); err == nil || !strings.Contains(Message(err), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func TestCheckUpdate(t *testing.T) {
	p := mustPolicy(t)
	old := roundTrip(t, created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob))
	st, err := Act(p, old, ActionApprove, "lgtm", alice, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	approved := roundTrip(t, old)
	approved.Status = st
	approved = roundTrip(t, approved)
	now := t0.Add(time.Minute)
	if err := CheckUpdate(p, old, approved, alice, now); err != nil {
		t.Fatalf("alice's approval refused: %v", err)
	}
	grantEdited := roundTrip(t, approved)
	grantEdited.Spec.Duration = Duration{2 * time.Hour}
	forgedApprover := roundTrip(t, approved)
	forgedApprover.Status.Approvals[0].By = erin.Username
	leftover := roundTrip(t, old)
	leftover.Annotations = map[string]string{AnnotationAction: "approve"}
	labelled := roundTrip(t, approved)
	labelled.Labels = map[string]string{"team": "web"}
	phaseOnly := roundTrip(t, old)
	phaseOnly.Status.Phase = PhaseActive
	for name, c := range map[string]struct {
		old, ar *AccessRequest
		user    User
		at      time.Time
		want    string
	}{
		"an approval by bob himself, written as alice's": {old, approved, bob, now, "may not approve"},
		"an approval recorded under another name":        {old, forgedApprover, alice, now, "a step records who took it (github:alice:1001)"},
		"the grant edited after approval":                {approved, grantEdited, alice, now, "spec of request prod-debug-abc12 cannot change"},
		"an approval dated in the past":                  {old, approved, alice, now.Add(time.Hour), "is not now"},
		"the mutating webhook did not run":               {old, leftover, alice, now, "was not acted on"},
		"a phase written by hand":                        {old, phaseOnly, alice, now, "changes only by approve, deny or revoke"},
	} {
		if err := CheckUpdate(p, c.old, c.ar, c.user, c.at); err == nil || !strings.Contains(Message(err), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := CheckUpdate(p, approved, labelled, carol, now); err != nil {
		t.Errorf("a metadata-only update refused: %v", err)
	}
}

// TestApprovalRechecksTheChangedPolicy: a request admitted under one policy is approved
// only if the policy in force at approval would still admit it.
func TestApprovalRechecksTheChangedPolicy(t *testing.T) {
	p := mustPolicy(t)
	changed := func(t *testing.T, from, to string) *subjectaccessreview.Policy {
		t.Helper()
		if !strings.Contains(testPolicy, from) {
			t.Fatalf("%q is not in the test policy", from)
		}
		q, err := subjectaccessreview.Parse([]byte(strings.Replace(testPolicy, from, to, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	for name, c := range map[string]struct {
		p    *subjectaccessreview.Policy
		want string
	}{
		"maxDuration reduced":   {changed(t, "maxDuration: 1h", "maxDuration: 15m"), `now allows at most 15m0s`},
		"namespace taken away":  {changed(t, `namespaces: [prod, "prod-*"]`, `namespaces: [staging]`), `namespace "prod", which elevation "prod-debug" no longer grants in`},
		"requester not subject": {changed(t, `subjects: [{kind: Group, name: "github:acme"}]`, `subjects: [{kind: Group, name: "github:acme/sre"}]`), "is no longer one of the subjects"},
	} {
		ar := created(t, p, spec("prod-debug", "INC-123", time.Hour, "prod"), bob)
		if _, err := Act(c.p, ar, ActionApprove, "", alice, t0.Add(time.Minute)); !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if _, err := Act(c.p, ar, ActionDeny, "", alice, t0.Add(time.Minute)); err != nil {
			t.Errorf("%s: deny refused: %v", name, err)
		}
	}
}

// TestCheckUpdateRefusesABackdatedApproval: a status written by hand may date its step up to
// ClockSkew from now; an approval dated just before the request expired, written just after,
// is refused.
func TestCheckUpdateRefusesABackdatedApproval(t *testing.T) {
	p := mustPolicy(t)
	old := roundTrip(t, created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob))
	before := t0.Add(PendingTimeout - 30*time.Second)
	st, err := Act(p, old, ActionApprove, "", alice, before)
	if err != nil {
		t.Fatal(err)
	}
	backdated := roundTrip(t, old)
	backdated.Status = st
	backdated = roundTrip(t, backdated)
	err = CheckUpdate(p, old, backdated, alice, t0.Add(PendingTimeout+20*time.Second))
	if !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), "is Expired") {
		t.Fatalf("an approval dated before the expiry, written after it: %v", err)
	}
}

// TestReasonsMustBeVisibleText: a reason of zero-width spaces passes a whitespace check but
// says nothing; terminal escapes and bidirectional overrides change what approvers read.
func TestReasonsMustBeVisibleText(t *testing.T) {
	p := mustPolicy(t)
	for name, reason := range map[string]string{
		"zero-width spaces only":   "\u200b\u200b",
		"a bidi override":          "INC-123 \u202eyalp-on",
		"a terminal escape":        "INC-123 \x1b]8;;https://evil.example\x07runbook\x1b]8;;\x07",
		"a newline hiding a reply": "INC-123\napproved by alice",
	} {
		if _, err := Admit(p, spec("prod-debug", reason, time.Hour, ""), bob, 0, 0, t0); !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), "visible text") {
			t.Errorf("request with %s: %v", name, err)
		}
		ar := created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob)
		if _, err := Act(p, ar, ActionApprove, reason, alice, t0); !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), "visible text") {
			t.Errorf("approval with %s: %v", name, err)
		}
	}
	if _, err := Admit(p, spec("prod-debug", "INC-123: pod web crashloops — ünïcode ok", time.Hour, ""), bob, 0, 0, t0); err != nil {
		t.Errorf("a plain reason: %v", err)
	}
}

// TestSubsecondDurationsAreRefusedAtCreation: times are stored in whole seconds, so a status
// with an end of start + 90.5 s cannot be stored as computed; such a request was admitted and
// then could never be approved (nor a break-glass one created), with a misleading message.
func TestSubsecondDurationsAreRefusedAtCreation(t *testing.T) {
	p := mustPolicy(t)
	for _, e := range []string{"prod-debug", "break-glass"} {
		if _, err := Admit(p, spec(e, "INC-1", 90*time.Second+500*time.Millisecond, ""), bob, 0, 0, t0); !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), "whole seconds") {
			t.Errorf("%s for 90.5s: %v", e, err)
		}
	}
}

// TestCheckUpdateRefusesANewOwner: with an owner reference to a short-lived object, anyone
// allowed to patch AccessRequests could have the garbage collector delete someone else's
// request, ending it without being an approver.
func TestCheckUpdateRefusesANewOwner(t *testing.T) {
	p := mustPolicy(t)
	old := roundTrip(t, created(t, p, spec("prod-debug", "INC-123", time.Hour, ""), bob))
	owned := roundTrip(t, old)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "gone-soon", UID: "0c6e5b8e-0000-4000-8000-000000000001"}}
	if err := CheckUpdate(p, old, owned, carol, t0); !errors.Is(err, ErrRefused) || !strings.Contains(Message(err), "cannot get an owner") {
		t.Fatalf("carol adding an owner: %v", err)
	}
	if err := CheckUpdate(p, owned, old, carol, t0); err != nil {
		t.Fatalf("removing an owner (the garbage collector orphaning): %v", err)
	}
}

// TestAdmitRefusesAnotherClustersElevation: a request for an elevation that names clusters is
// admitted only on one of them, and refused elsewhere, and on a cluster without a name, with
// the clusters it is for.
func TestAdmitRefusesAnotherClustersElevation(t *testing.T) {
	base, err := subjectaccessreview.Parse([]byte(strings.Replace(testPolicy, "  approvals: 2\n", "  approvals: 2\n  clusters: [prod-eu-1, prod-us-1]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ cluster, want string }{
		{"prod-eu-1", ""},
		{"prod-us-1", ""},
		{"staging", `octogate: elevation "two-keys" is for clusters prod-eu-1, prod-us-1, not this one (staging)`},
		{"", `octogate: elevation "two-keys" is for clusters prod-eu-1, prod-us-1, not this one (a cluster without a name: OCTOGATE_SESSION_AUDIENCE is unset)`},
	} {
		p := base.InCluster(tc.cluster)
		_, err := Admit(p, spec("two-keys", "", time.Minute, ""), bob, 0, 0, t0)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("cluster %q: refused: %v", tc.cluster, err)
		case tc.want != "" && (!errors.Is(err, ErrRefused) || Message(err) != tc.want):
			t.Errorf("cluster %q: err = %v, want %q", tc.cluster, err, tc.want)
		}
		// An elevation without clusters is admitted everywhere.
		if _, err := Admit(p, spec("prod-debug", "INC-1", time.Minute, ""), bob, 0, 0, t0); err != nil {
			t.Errorf("cluster %q: prod-debug refused: %v", tc.cluster, err)
		}
	}
}
