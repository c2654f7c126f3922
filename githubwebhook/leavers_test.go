package githubwebhook

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// fakeLeavers records Leavers.Left calls as "org uid".
type fakeLeavers struct {
	mu  sync.Mutex
	got []string
	at  []time.Time
}

func (f *fakeLeavers) Left(_ context.Context, org, uid string, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, org+" "+uid)
	f.at = append(f.at, at)
	return nil
}

func (f *fakeLeavers) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

// newLeaverEnv is an issuer's handler: Leavers set, with members (nil: no org token) and an
// orphaner that finds namespaces (orphaner), none (orphaner with none = 1) or no controller
// at all (withOrphaner false).
func newLeaverEnv(t *testing.T, members Members, withOrphaner bool, none int) (*env, *fakeLeavers) {
	t.Helper()
	e := &env{rev: &fakeRevoker{}, orph: &fakeOrphaner{none: none}}
	l := &fakeLeavers{}
	cfg := Config{Secret: secret, Orgs: []string{"Acme"}, Revoker: e.rev, Leavers: l, Logger: slog.New(slog.DiscardHandler)}
	if members != nil {
		cfg.Members = members
	}
	if withOrphaner {
		cfg.Orphaner = e.orph
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e, l
}

// TestConfirmedLeaverIsToldToTheFleetOncePerPayload: a member_removed GitHub confirms is
// recorded for the fleet once, whether this cluster orphans namespaces of the user, has none
// of theirs, or runs no ownership controller; a redelivery (same X-GitHub-Delivery) and a
// replay of the signed payload under a new one record nothing new.
func TestConfirmedLeaverIsToldToTheFleetOncePerPayload(t *testing.T) {
	for _, tc := range []struct {
		name         string
		withOrphaner bool
		none         int
		orphanings   int
	}{
		{"namespaces here", true, 0, 1},
		{"no namespaces here", true, 1, 0},
		{"no controller here", false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMembers{}
			e, l := newLeaverEnv(t, m, tc.withOrphaner, tc.none)
			before := time.Now()
			d := githubapi.Delivery{Event: "organization", ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Payload: removal}
			if status, a := e.deliver(t, d, secret); status != 200 || a.Result != "evicted" {
				t.Fatalf("first delivery: %d %+v", status, a)
			}
			if got := l.calls(); len(got) != 1 || got[0] != "acme 1002" {
				t.Fatalf("leavers told %q, want [acme 1002]", got)
			} else if l.at[0].Before(before) || l.at[0].After(time.Now()) {
				t.Fatalf("leaver recorded at %v, want the time of the delivery", l.at[0])
			}
			if len(m.calls) != 1 {
				t.Fatalf("GitHub asked %d times, want once", len(m.calls))
			}
			if len(e.orph.calls) != tc.orphanings || e.orph.unconfirmed != 0 {
				t.Fatalf("%d orphanings (%d unconfirmed), want %d confirmed", len(e.orph.calls), e.orph.unconfirmed, tc.orphanings)
			}
			if status, a := e.deliver(t, d, secret); status != 200 || a.Result != "duplicate" {
				t.Fatalf("redelivery: %d %+v", status, a)
			}
			for _, replay := range []githubapi.Delivery{
				{Event: "organization", Payload: removal, ID: "11111111-2222-3333-4444-555555555555"},
				{Event: "organization", Payload: removal, Form: true},
			} {
				if status, a := e.deliver(t, replay, secret); status != 200 || a.Result != resultStaleRemoval {
					t.Fatalf("replayed payload (form %v): %d %+v, want 200 %s", replay.Form, status, a, resultStaleRemoval)
				}
			}
			if got := l.calls(); len(got) != 1 {
				t.Fatalf("after a redelivery and two replays the leaver was recorded %d times, want once", len(got))
			}
			if len(e.orph.calls) != tc.orphanings {
				t.Fatalf("a replay orphaned again: %d orphanings", len(e.orph.calls))
			}
			// Another removal (another payload) is recorded.
			carol := githubapi.OrganizationPayload("member_removed", acme, githubapi.Account{Login: "carol", ID: 1003}, admin)
			if status, a := e.deliver(t, githubapi.Delivery{Event: "organization", Payload: carol}, secret); status != 200 || a.Result != "evicted" {
				t.Fatalf("another removal: %d %+v", status, a)
			}
			if got := l.calls(); len(got) != 2 || got[1] != "acme 1003" {
				t.Fatalf("leavers told %q, want acme 1002 then acme 1003", got)
			}
		})
	}
}

// TestUnconfirmedLeaverIsNotToldToTheFleet: GitHub says the user is a member of the org now
// (the removal is old, or they were invited back): nothing is recorded, with or without
// namespaces here; GitHub failing records nothing and a redelivery once it answers records.
func TestUnconfirmedLeaverIsNotToldToTheFleet(t *testing.T) {
	for _, tc := range []struct {
		name         string
		withOrphaner bool
		none         int
	}{
		{"namespaces here", true, 0},
		{"no namespaces here", true, 1},
		{"no controller here", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMembers{member: true}
			e, l := newLeaverEnv(t, m, tc.withOrphaner, tc.none)
			status, a := e.deliver(t, githubapi.Delivery{Event: "organization", Payload: removal}, secret)
			if status != 200 || a.Result != resultStaleRemoval {
				t.Fatalf("removal of a member: %d %+v, want 200 %s", status, a, resultStaleRemoval)
			}
			if got := l.calls(); len(got) != 0 || len(e.orph.calls) != 0 {
				t.Fatalf("a member was recorded as a leaver (%q) or orphaned (%d)", got, len(e.orph.calls))
			}
			if n := len(e.rev.targets()); n != 1 {
				t.Fatalf("%d evictions, want 1 (eviction does not wait for GitHub)", n)
			}

			m2 := &fakeMembers{err: errors.New("GitHub is down")}
			e, l = newLeaverEnv(t, m2, tc.withOrphaner, tc.none)
			d := githubapi.Delivery{Event: "organization", ID: "d1", Payload: removal}
			if status, a := e.deliver(t, d, secret); status != 502 || a.Result != "error" {
				t.Fatalf("GitHub cannot tell: %d %+v, want 502", status, a)
			}
			if got := l.calls(); len(got) != 0 {
				t.Fatalf("recorded %q although GitHub could not confirm", got)
			}
			m2.err = nil
			if status, a := e.deliver(t, d, secret); status != 200 || a.Result != "evicted" {
				t.Fatalf("redelivered once GitHub answers: %d %+v", status, a)
			}
			if got := l.calls(); len(got) != 1 {
				t.Fatalf("after GitHub confirmed on redelivery, leavers told %q, want once", got)
			}
		})
	}
}

// TestLeaverWithoutOrgTokenIsToldAsDelivered: without OCTOGATE_GITHUB_ORG_TOKEN_FILE
// (Members nil) a removal is taken as delivered (Config.Leavers), once per payload: a replay
// of an old signed payload under a new delivery id records nothing.
func TestLeaverWithoutOrgTokenIsToldAsDelivered(t *testing.T) {
	for _, withOrphaner := range []bool{true, false} {
		e, l := newLeaverEnv(t, nil, withOrphaner, 0)
		if status, a := e.deliver(t, githubapi.Delivery{Event: "organization", ID: "d1", Payload: removal}, secret); status != 200 || a.Result != "evicted" {
			t.Fatalf("controller %v: first delivery: %d %+v", withOrphaner, status, a)
		}
		if got := l.calls(); len(got) != 1 || got[0] != "acme 1002" {
			t.Fatalf("controller %v: leavers told %q, want [acme 1002]", withOrphaner, got)
		}
		if withOrphaner && e.orph.unconfirmed != 1 {
			t.Fatalf("without an org token the orphaning must spare namespaces given back: %d unconfirmed", e.orph.unconfirmed)
		}
		if status, a := e.deliver(t, githubapi.Delivery{Event: "organization", ID: "d2", Payload: removal}, secret); status != 200 || a.Result != resultStaleRemoval {
			t.Fatalf("controller %v: replay: %d %+v", withOrphaner, status, a)
		}
		if got := l.calls(); len(got) != 1 {
			t.Fatalf("controller %v: a replay recorded the leaver again: %q", withOrphaner, got)
		}
	}
}

// TestLeaverOfAnotherOrgOrAMemberAddedIsNotTold: only member_removed of an allowed org is a
// leaver.
func TestLeaverOfAnotherOrgOrAMemberAddedIsNotTold(t *testing.T) {
	e, l := newLeaverEnv(t, &fakeMembers{}, false, 0)
	for _, p := range [][]byte{
		githubapi.OrganizationPayload("member_removed", other, bob, admin),
		githubapi.OrganizationPayload("member_added", acme, bob, admin),
	} {
		if status, a := e.deliver(t, githubapi.Delivery{Event: "organization", Payload: p}, secret); status >= 400 {
			t.Fatalf("%d %+v", status, a)
		}
	}
	if got := l.calls(); len(got) != 0 {
		t.Fatalf("leavers told %q, want nothing", got)
	}
}
