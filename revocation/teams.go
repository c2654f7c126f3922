package revocation

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Teams are the recent team revocations, for session verifiers: a session that carries a
// revoked team's group and was issued at or before the revocation is refused, whether or not
// its user's GitHub identity is cached here (tokenreview.Handler.EvictGroup only knows the
// cached ones). Reads take no lock and allocate nothing; writes copy the map (team events are
// rare). A nil *Teams knows no revocation. Safe for concurrent use.
type Teams struct {
	prefix string
	keep   time.Duration
	now    func() time.Time

	mu sync.Mutex
	m  atomic.Pointer[map[string]time.Time] // "org/slug" -> latest revocation
}

// NewTeams matches groups named prefix + "org/slug" (OCTOGATE_USERNAME_PREFIX, e.g.
// "github:"), keeping revocations for keep.
func NewTeams(prefix string, keep time.Duration) *Teams {
	t := &Teams{prefix: prefix, keep: keep, now: time.Now}
	t.m.Store(&map[string]time.Time{})
	return t
}

// Revoke records that team ("org/slug") was revoked at at.
func (t *Teams) Revoke(team string, at time.Time) {
	if t == nil {
		return
	}
	team = strings.ToLower(team)
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	if prev, ok := old[team]; ok && !at.After(prev) {
		return
	}
	now := t.now()
	m := make(map[string]time.Time, len(old)+1)
	for k, v := range old {
		if now.Sub(v) <= t.keep {
			m[k] = v
		}
	}
	m[team] = at
	t.m.Store(&m)
}

// RevokedSince reports whether one of groups is a team revoked at or after issuedAt.
func (t *Teams) RevokedSince(groups []string, issuedAt time.Time) bool {
	if t == nil {
		return false
	}
	m := *t.m.Load()
	if len(m) == 0 {
		return false
	}
	for _, g := range groups {
		team, ok := strings.CutPrefix(g, t.prefix)
		if !ok {
			continue
		}
		if at, ok := m[team]; ok && !at.Before(issuedAt) {
			return true
		}
	}
	return false
}

// Len is how many team revocations are kept.
func (t *Teams) Len() int {
	if t == nil {
		return 0
	}
	return len(*t.m.Load())
}
