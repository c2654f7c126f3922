package session

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/octogate/octogate/tokenreview"
)

// TestVerifierRefusesSessionsOfARevokedTeam: a team revocation refuses the sessions that carry
// its group, cached or not, issued at or before it, whether or not the user's GitHub identity
// is cached anywhere; a session issued after it is accepted.
func TestVerifierRefusesSessionsOfARevokedTeam(t *testing.T) {
	e := newVerifierEnv(t, clusterA)
	revokedTeams := map[string]time.Time{}
	e.v.revokedGroups = func(groups []string, iat time.Time) bool {
		for _, g := range groups {
			if at, ok := revokedTeams[g]; ok && !at.Before(iat) {
				return true
			}
		}
		return false
	}
	if len(alice.Groups) == 0 {
		t.Fatal("alice has no groups to revoke")
	}
	team := alice.Groups[len(alice.Groups)-1]
	cached := e.session(t, clusterA)
	if _, err := e.v.Lookup(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(time.Second)
	fresh := e.session(t, clusterA)
	revokedTeams[team] = e.clock.t
	for name, tok := range map[string]string{"cached": cached, "first use": fresh} {
		if _, err := e.v.Lookup(context.Background(), tok); reasonOf(err) != tokenreview.ReasonSessionRevoked {
			t.Errorf("%s session carrying revoked team %s: %v, want session_revoked", name, team, err)
		}
	}
	e.clock.advance(time.Second)
	if _, err := e.v.Lookup(context.Background(), e.session(t, clusterA)); err != nil {
		t.Fatalf("a session issued after the team revocation: %v", err)
	}
	revokedTeams = map[string]time.Time{"github:acme/not-alices": e.clock.t}
	if _, err := e.v.Lookup(context.Background(), e.session(t, clusterA)); err != nil || slices.Contains(alice.Groups, "github:acme/not-alices") {
		t.Fatalf("a session without the revoked team: %v", err)
	}
}

// TestVerifierAnswersSessionFeedStaleUntilTheFeedIsReadAgain: past the bound every session is
// unavailable with session_feed_stale (never a cached refusal), and accepted again once fresh.
func TestVerifierAnswersSessionFeedStaleUntilTheFeedIsReadAgain(t *testing.T) {
	e := newVerifierEnv(t, clusterA)
	stale := false
	e.v.stale = func(time.Time) (time.Time, bool) { return e.clock.t.Add(-time.Hour), stale }
	cached := e.session(t, clusterA)
	if _, err := e.v.Lookup(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	stale = true
	for name, tok := range map[string]string{"cached": cached, "first use": e.session(t, "cluster-a")} {
		_, err := e.v.Lookup(context.Background(), tok)
		if reasonOf(err) != tokenreview.ReasonSessionFeedStale || tokenreview.Result(err) != tokenreview.ResultUnavailable {
			t.Errorf("%s session with a stale feed: %v (%s), want session_feed_stale, unavailable", name, err, tokenreview.Result(err))
		}
	}
	stale = false
	if _, err := e.v.Lookup(context.Background(), cached); err != nil {
		t.Fatalf("the feed is fresh again: %v", err)
	}
}
