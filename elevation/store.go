package elevation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/subjectaccessreview"
)

// Auditor receives the audit events of every step (audit.Writer).
type Auditor interface{ Log(audit.Event) }

// Announcer receives every step, to tell people (Notifier).
type Announcer interface{ Notify(audit.Event) }

// StoreConfig configures NewStore.
type StoreConfig struct {
	// Policy is the policy in force (the Authorizer's); required.
	Policy func() *subjectaccessreview.Policy
	// Audit, when set, receives an event per step.
	Audit Auditor
	// Notify, when set, is told of every step.
	Notify Announcer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Store is the in-process view of the cluster's AccessRequests, fed by an informer
// (Watch): the authorizer asks it which elevations are active for a user (Active), the
// admission webhooks how many requests a person has open (OpenRequests). It writes an audit
// event for every step it sees, and elevation.ended when an active request reaches its end
// time (Run checks every second), is revoked, or is deleted. It is safe for concurrent use.
type Store struct {
	policy func() *subjectaccessreview.Policy
	audit  Auditor
	notify Announcer
	now    func() time.Time
	log    *slog.Logger

	mu     sync.RWMutex
	byName map[string]*AccessRequest
	byUser map[string]map[string]*AccessRequest
	// ended holds the requests whose end was recorded (or that had ended when first seen).
	ended map[string]bool
	// reserved holds, by name, the requests Reserve admitted that the informer has not shown
	// yet.
	reserved map[string]reservation
	// created holds, by requester, when Reserve admitted their requests within CreateWindow.
	created map[string][]time.Time
	synced  atomic.Bool
	// cut holds the requests ended because their requester left (EndRequester), with why;
	// the object in the cluster does not say so, so they stay cut until deleted.
	cut map[string]string
	// changed has a value after each change (Changed).
	changed chan struct{}
}

// NewStore returns an empty Store.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Policy == nil {
		return nil, errors.New("elevation: StoreConfig.Policy is required")
	}
	s := &Store{
		policy: cfg.Policy, audit: cfg.Audit, notify: cfg.Notify, now: cfg.Now, log: cfg.Logger,
		byName: map[string]*AccessRequest{}, byUser: map[string]map[string]*AccessRequest{}, ended: map[string]bool{}, cut: map[string]string{},
		reserved: map[string]reservation{}, created: map[string][]time.Time{},
		changed: make(chan struct{}, 1),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Policy is the policy in force.
func (s *Store) Policy() *subjectaccessreview.Policy { return s.policy() }

// Active returns the grants user holds at now: one per request of theirs that is Active
// and before its end under the policy in force (AccessRequest.GrantEnd). Its answer depends
// on now only through the stored end times, so access ends at the end time without any write.
func (s *Store) Active(user string, now time.Time) []subjectaccessreview.ActiveGrant {
	p := s.policy()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []subjectaccessreview.ActiveGrant
	for _, ar := range s.byUser[user] {
		if end, ok := ar.GrantEnd(p); ok && now.Before(end) && s.cut[ar.Name] == "" {
			out = append(out, subjectaccessreview.ActiveGrant{Request: ar.Name, Elevation: ar.Spec.Elevation, Namespace: ar.Spec.Namespace, RequesterUID: ar.Status.Requester.UID})
		}
	}
	return out
}

// ReservationTTL is how long Reserve counts a request the informer has not shown: a create
// refused after the validating webhook (another webhook, storage) is forgotten after it.
const ReservationTTL = time.Minute

type reservation struct {
	requester string
	until     time.Time
}

// OpenRequests is how many of requester's requests are pending or active at now, counting
// those Reserve admitted that the informer has not shown yet.
func (s *Store) OpenRequests(requester string, now time.Time) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.openLocked(requester, now)
}

func (s *Store) openLocked(requester string, now time.Time) int {
	n := 0
	for _, ar := range s.byUser[requester] {
		if ar.Open(now) && s.cut[ar.Name] == "" {
			n++
		}
	}
	for name, r := range s.reserved {
		if r.requester == requester && now.Before(r.until) && s.byName[name] == nil {
			n++
		}
	}
	return n
}

// CreateLimit is how many requests one person may create within CreateWindow, withdrawn or
// deleted ones included: every request is notified, and a loop of create and withdraw would
// otherwise fill the notifier's queue and drop other people's notifications (a break-glass
// one among them).
const (
	CreateLimit  = 20
	CreateWindow = time.Hour
)

// Reserve counts the new request name of requester as open until the informer shows it (at
// most ReservationTTL), if requester has fewer than limit open requests at now (0:
// DefaultOpenLimit) and created fewer than CreateLimit within CreateWindow; else it reserves
// nothing and returns the refusal (wrapping ErrRefused). The check and the reservation are
// one step, so parallel creates on one replica never pass the limits together; each replica
// counts alone, so n replicas admit at most n×limit before their informers catch up (and
// n×CreateLimit creates per window).
func (s *Store) Reserve(requester, name string, limit int, now time.Time) error {
	if limit <= 0 {
		limit = DefaultOpenLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, r := range s.reserved {
		if !now.Before(r.until) {
			delete(s.reserved, n)
		}
	}
	for user, times := range s.created {
		if times = slices.DeleteFunc(times, func(t time.Time) bool { return !now.Before(t.Add(CreateWindow)) }); len(times) == 0 {
			delete(s.created, user)
		} else {
			s.created[user] = times
		}
	}
	delete(s.reserved, name)
	if open := s.openLocked(requester, now); open >= limit {
		return OpenLimitReached(requester, open)
	}
	if len(s.created[requester]) >= CreateLimit {
		return refuse("%s created %d requests within %s, the most one person may; wait, or ask an approver", requester, CreateLimit, CreateWindow)
	}
	s.reserved[name] = reservation{requester: requester, until: now.Add(ReservationTTL)}
	s.created[requester] = append(s.created[requester], now)
	return nil
}

// Synced reports whether the store holds the cluster's requests: the informer's first list
// is in (SetSynced). Until then OpenRequests knows none of them.
func (s *Store) Synced() bool { return s.synced.Load() }

// SetSynced marks the store as holding the cluster's requests; Watch calls it once the
// informer's first list is delivered.
func (s *Store) SetSynced() { s.synced.Store(true) }

// List returns the stored requests (copies of the pointers; callers must not modify them).
func (s *Store) List() []*AccessRequest {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*AccessRequest, 0, len(s.byName))
	for _, ar := range s.byName {
		out = append(out, ar)
	}
	return out
}

// Holds reports whether ar (one of List's) grants its elevation at now: it is active, and
// its requester has not left since it was requested (EndRequester).
func (s *Store) Holds(ar *AccessRequest, now time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return ar.EffectivePhase(now) == PhaseActive && s.cut[ar.Name] == ""
}

// Reasons of an elevation.ended event written by EndRequester.
const (
	// EndMemberRemoved: the requester left the GitHub organization (a confirmed leaver: the
	// org webhook's member_removed at this octogate, or the issuer's revocation feed).
	EndMemberRemoved = "member_removed"
)

// EndRequester ends, at at, every request of the GitHub user uid (numeric id, matched with
// status.requester.uid, or with a username ending in ":uid" when the uid is empty) that was
// requested at or before at and is pending or active then: it grants nothing any more (Active,
// Holds), counts as open no more, and an active one's end is recorded with elevation.ended,
// reason why. The AccessRequest in the cluster is not changed: the end holds in this process
// until the object is deleted. Calling it again changes nothing. It returns how many active
// requests it ended.
func (s *Store) EndRequester(uid string, at time.Time, why string) int {
	if uid == "" {
		return 0
	}
	var events []audit.Event
	s.mu.Lock()
	for name, ar := range s.byName {
		r := ar.Status.Requester
		if r.UID != uid && (r.UID != "" || !strings.HasSuffix(r.Username, ":"+uid)) {
			continue
		}
		if s.cut[name] != "" || ar.Status.RequestedAt != nil && ar.Status.RequestedAt.After(at) || !ar.Open(at) {
			continue
		}
		s.cut[name] = why
		if ar.EffectivePhase(at) == PhaseActive && !s.ended[name] {
			events = append(events, event(audit.ElevationEnded, ar, r.Username, why, "", at))
		}
		s.ended[name] = true
	}
	s.mu.Unlock()
	s.emit(events)
	return len(events)
}

// EndLeaver ends the requests of uid, who left org at at (revocation.Ender): EndRequester
// with reason EndMemberRemoved.
func (s *Store) EndLeaver(uid, _ string, at time.Time) int {
	return s.EndRequester(uid, at, EndMemberRemoved)
}

// Upsert records ar as stored in the cluster and writes the events of the steps between
// the version seen before (if any) and ar. initial marks the informer's first list (a
// restart): its steps were recorded before, so only an end not yet seen is.
func (s *Store) Upsert(ar *AccessRequest, initial bool) {
	now := s.now()
	s.mu.Lock()
	old := s.byName[ar.Name]
	if old != nil {
		s.removeLocked(old)
	}
	s.byName[ar.Name] = ar
	delete(s.reserved, ar.Name)
	user := ar.Status.Requester.Username
	if s.byUser[user] == nil {
		s.byUser[user] = map[string]*AccessRequest{}
	}
	s.byUser[user][ar.Name] = ar
	var events []audit.Event
	if initial {
		if ar.EffectivePhase(now) != PhaseActive {
			s.ended[ar.Name] = true
		}
	} else {
		events = s.stepsLocked(old, ar, now)
	}
	s.mu.Unlock()
	s.emit(events)
}

// Delete forgets ar; an active request deleted ends, and the end is recorded.
func (s *Store) Delete(ar *AccessRequest) {
	now := s.now()
	s.mu.Lock()
	stored := s.byName[ar.Name]
	if stored == nil {
		stored = ar
	} else {
		s.removeLocked(stored)
	}
	var events []audit.Event
	if !s.ended[ar.Name] && stored.EffectivePhase(now) == PhaseActive {
		events = append(events, event(audit.ElevationEnded, stored, stored.Status.Requester.Username, "deleted", "", now))
	}
	delete(s.ended, ar.Name)
	delete(s.cut, ar.Name)
	s.mu.Unlock()
	s.emit(events)
}

func (s *Store) removeLocked(ar *AccessRequest) {
	delete(s.byName, ar.Name)
	if m := s.byUser[ar.Status.Requester.Username]; m != nil {
		delete(m, ar.Name)
		if len(m) == 0 {
			delete(s.byUser, ar.Status.Requester.Username)
		}
	}
}

// stepsLocked lists the events from old (nil: just created) to ar.
func (s *Store) stepsLocked(old, ar *AccessRequest, now time.Time) []audit.Event {
	var events []audit.Event
	o := &Status{}
	if old != nil {
		o = &old.Status
	} else {
		events = append(events, event(audit.ElevationRequested, ar, ar.Status.Requester.Username, "", ar.Spec.Reason, timeOf(ar.Status.RequestedAt)))
	}
	n := &ar.Status
	for i := len(o.Approvals); i < len(n.Approvals); i++ {
		a := n.Approvals[i]
		events = append(events, event(audit.ElevationApproved, ar, a.By, "", a.Reason, a.At.Time))
	}
	if o.Denial == nil && n.Denial != nil {
		events = append(events, event(audit.ElevationDenied, ar, n.Denial.By, "", n.Denial.Reason, n.Denial.At.Time))
	}
	if o.Phase != PhaseActive && n.Phase == PhaseActive && n.StartTime != nil && s.cut[ar.Name] == "" {
		reason := "approved"
		if n.BreakGlass {
			reason = "break_glass"
		}
		events = append(events, event(audit.ElevationStarted, ar, n.Requester.Username, reason, ar.Spec.Reason, n.StartTime.Time))
	}
	if o.Revocation == nil && n.Revocation != nil {
		events = append(events, event(audit.ElevationRevoked, ar, n.Revocation.By, "", n.Revocation.Reason, n.Revocation.At.Time))
		if o.Phase == PhaseActive && !s.ended[ar.Name] {
			s.ended[ar.Name] = true
			events = append(events, event(audit.ElevationEnded, ar, n.Revocation.By, "revoked", n.Revocation.Reason, n.Revocation.At.Time))
		}
	}
	if n.Phase == PhaseActive && ar.DeletionTimestamp != nil && ar.EffectivePhase(now) == PhaseActive && !s.ended[ar.Name] {
		s.ended[ar.Name] = true
		events = append(events, event(audit.ElevationEnded, ar, n.Requester.Username, "deleted", "", now))
	}
	if n.Phase == PhaseActive && ar.EffectivePhase(now) == PhaseEnded && !s.ended[ar.Name] {
		s.ended[ar.Name] = true
		events = append(events, event(audit.ElevationEnded, ar, n.Requester.Username, "end_time", "", timeOf(n.EndTime)))
	}
	return events
}

// CheckEnds records the end of every active request whose end time has passed.
func (s *Store) CheckEnds() {
	now := s.now()
	var events []audit.Event
	s.mu.Lock()
	for name, ar := range s.byName {
		if s.ended[name] || ar.Status.Phase != PhaseActive || ar.EffectivePhase(now) != PhaseEnded {
			continue
		}
		s.ended[name] = true
		events = append(events, event(audit.ElevationEnded, ar, ar.Status.Requester.Username, "end_time", "", timeOf(ar.Status.EndTime)))
	}
	s.mu.Unlock()
	s.emit(events)
}

// Changed has a value after the store changed (one value for any number of changes): the
// channel of its one consumer, the RBAC keeper.
func (s *Store) Changed() <-chan struct{} { return s.changed }

func (s *Store) emit(events []audit.Event) {
	select {
	case s.changed <- struct{}{}:
	default:
	}
	for _, e := range events {
		s.log.Info("access request", "event", e.Event, "request", e.Request, "elevation", e.Elevation, "user", e.User, "requester", e.Requester)
		if s.audit != nil {
			s.audit.Log(e)
		}
		if s.notify != nil {
			s.notify.Notify(e)
		}
	}
}

func event(name string, ar *AccessRequest, by, reasonCode, why string, at time.Time) audit.Event {
	e := audit.Event{
		Time: at, Event: name, User: by, Request: ar.Name, Elevation: ar.Spec.Elevation,
		Requester: ar.Status.Requester.Username, Reason: reasonCode, Why: why, Namespace: ar.Spec.Namespace,
		Outcome: name[len("elevation."):],
	}
	if ar.Status.EndTime != nil {
		e.Expiry = ar.Status.EndTime.Time
	}
	if at.IsZero() {
		e.Time = time.Now()
	}
	return e
}

// Run records ends at their end times, checking every second, until ctx is done.
func (s *Store) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.CheckEnds()
		}
	}
}

// Informers is the part of controller-runtime's cache Watch needs.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Watch feeds s from an informer of AccessRequests, retrying every retry while the
// AccessRequest CRD is not installed (GetInformer fails until it is), until ctx is done.
func (s *Store) Watch(ctx context.Context, informers Informers, retry time.Duration) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(GVK)
	logged := false
	for {
		inf, err := informers.GetInformer(ctx, obj)
		if err == nil {
			var reg toolscache.ResourceEventHandlerRegistration
			reg, err = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
				AddFunc:    func(o any, initial bool) { s.fromInformer(o, initial) },
				UpdateFunc: func(_, o any) { s.fromInformer(o, false) },
				DeleteFunc: func(o any) {
					if ar := fromObject(o); ar != nil {
						s.Delete(ar)
					}
				},
			})
			if err == nil {
				if toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
					s.SetSynced()
					s.log.Info("watching AccessRequests")
				}
				<-ctx.Done()
				return nil
			}
		}
		if !logged {
			s.log.Info("AccessRequests are not watched yet: install the CRD (charts/octogate/crds); retrying", "every", retry, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// fromInformer stores an added or updated object. One that cannot be decoded (never
// admitted by the webhooks) is forgotten, so a stale earlier version grants nothing.
func (s *Store) fromInformer(o any, initial bool) {
	if ar := fromObject(o); ar != nil {
		s.Upsert(ar, initial)
		return
	}
	if u, ok := o.(*unstructured.Unstructured); ok && u.GetName() != "" {
		s.log.Warn("an AccessRequest that cannot be decoded grants nothing", "request", u.GetName())
		s.Delete(&AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}})
	}
}

// fromObject converts an informer's object (unstructured, or a tombstone of one) to an
// AccessRequest; nil when it cannot.
func fromObject(o any) *AccessRequest {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil
	}
	ar, err := Decode(b)
	if err != nil {
		return nil
	}
	return ar
}

// timeOf is t's time, zero for nil.
func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
