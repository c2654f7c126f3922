package revocation

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Log is the revocations this process knows, as the feed serves them: each once (by key, the
// latest time), with its time truncated to the second as the ConfigMap records it, kept for
// Keep. A nil *Log records nothing. Safe for concurrent use.
type Log struct {
	keep time.Duration
	now  func() time.Time

	mu      sync.Mutex
	entries map[string]Revocation
	sorted  []Revocation  // entries by At then key; nil when it must be built again
	ids     []string      // the jtis of sorted (Revocation.ID), computed once per entry
	changed chan struct{} // closed (and replaced) when an entry is added
}

// NewLog keeps revocations for keep (positive): at least the longest a session they refuse
// lives, so that a receiver that starts later still gets them.
func NewLog(keep time.Duration) *Log {
	return &Log{keep: keep, now: time.Now, entries: map[string]Revocation{}, changed: make(chan struct{})}
}

// Add records r (its time truncated to the second) unless the log holds it with the same or a
// later time, and wakes the waiters of Snapshot. It ignores an invalid r.
func (l *Log) Add(r Revocation) {
	if l == nil || !r.valid() {
		return
	}
	r.At = r.At.Truncate(time.Second).UTC()
	k := r.key()
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.entries[k]; ok && !r.At.After(prev.At) {
		return
	}
	l.entries[k] = r
	l.sorted = nil
	close(l.changed)
	l.changed = make(chan struct{})
}

// Snapshot is the kept revocations, oldest first (by At, then key), and a channel closed when
// one is added. The slice is shared: callers must not change it.
func (l *Log) Snapshot() ([]Revocation, <-chan struct{}) {
	s, _, changed := l.snapshot()
	return s, changed
}

// snapshot is Snapshot with the jtis of its revocations (ids[i] = s[i].ID()), shared too.
func (l *Log) snapshot() (s []Revocation, ids []string, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.sorted != nil && (len(l.sorted) == 0 || now.Sub(l.sorted[0].At) <= l.keep) {
		return l.sorted, l.ids, l.changed
	}
	for k, r := range l.entries {
		if now.Sub(r.At) > l.keep {
			delete(l.entries, k)
		}
	}
	s = make([]Revocation, 0, len(l.entries))
	for _, r := range l.entries {
		s = append(s, r)
	}
	slices.SortFunc(s, func(a, b Revocation) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.key(), b.key()))
	})
	ids = make([]string, len(s))
	for i, r := range s {
		ids[i] = r.ID()
	}
	l.sorted, l.ids = s, ids
	return s, ids, l.changed
}
