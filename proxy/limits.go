package proxy

import (
	"errors"
	"fmt"
	"sync"
)

// Limits bound what the proxy holds open, per user (one GitHub account or workload, by uid)
// and in all, so that one user's flood cannot starve the others: short requests in flight,
// and long-running ones (watches, exec, attach, port-forward, followed logs). kube-apiserver's
// API Priority and Fairness still sees each impersonated user upstream; these limits keep
// the proxy's own connections and memory fair as well. A request over a limit is answered
// 429 with Retry-After: 1.
type Limits struct {
	// MaxInflight bounds short requests in flight in all (default 400).
	MaxInflight int
	// MaxInflightPerUser bounds one user's short requests in flight (default 50).
	MaxInflightPerUser int
	// MaxWatches bounds long-running requests in all (default 4000).
	MaxWatches int
	// MaxWatchesPerUser bounds one user's long-running requests (default 200).
	MaxWatchesPerUser int
}

// The defaults of Limits.
const (
	DefaultMaxInflight        = 400
	DefaultMaxInflightPerUser = 50
	DefaultMaxWatches         = 4000
	DefaultMaxWatchesPerUser  = 200
)

func (l Limits) withDefaults() (Limits, error) {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxInflight", &l.MaxInflight, DefaultMaxInflight},
		{"MaxInflightPerUser", &l.MaxInflightPerUser, DefaultMaxInflightPerUser},
		{"MaxWatches", &l.MaxWatches, DefaultMaxWatches},
		{"MaxWatchesPerUser", &l.MaxWatchesPerUser, DefaultMaxWatchesPerUser},
	} {
		switch {
		case *f.v < 0:
			return l, fmt.Errorf("proxy: Limits.%s is %d: expected a positive number, or 0 for the default %d", f.name, *f.v, f.def)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return l, nil
}

// counts are what one user, or everyone, holds now.
type counts struct{ inflight, watches int }

type limiter struct {
	l Limits

	mu    sync.Mutex
	all   counts
	users map[string]*counts
}

func newLimiter(l Limits) (*limiter, error) {
	l, err := l.withDefaults()
	if err != nil {
		return nil, err
	}
	return &limiter{l: l, users: map[string]*counts{}}, nil
}

var (
	errUserInflight = errors.New("this user's requests in flight are at the limit")
	errAllInflight  = errors.New("requests in flight are at the limit")
	errUserWatches  = errors.New("this user's watches and streams are at the limit")
	errAllWatches   = errors.New("watches and streams are at the limit")
)

// acquire takes one slot of user's (a short request, or a long-running one), or says which
// limit is reached. release gives it back; call it once.
func (lim *limiter) acquire(user string, long bool) (release func(), err error) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	c := lim.users[user]
	if c == nil {
		c = &counts{}
	}
	switch {
	case long && c.watches >= lim.l.MaxWatchesPerUser:
		return nil, errUserWatches
	case long && lim.all.watches >= lim.l.MaxWatches:
		return nil, errAllWatches
	case !long && c.inflight >= lim.l.MaxInflightPerUser:
		return nil, errUserInflight
	case !long && lim.all.inflight >= lim.l.MaxInflight:
		return nil, errAllInflight
	}
	lim.users[user] = c
	if long {
		c.watches++
		lim.all.watches++
	} else {
		c.inflight++
		lim.all.inflight++
	}
	var once sync.Once
	return func() { once.Do(func() { lim.release(user, c, long) }) }, nil
}

func (lim *limiter) release(user string, c *counts, long bool) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if long {
		c.watches--
		lim.all.watches--
	} else {
		c.inflight--
		lim.all.inflight--
	}
	if c.watches == 0 && c.inflight == 0 {
		delete(lim.users, user)
	}
}

// held is what user holds now, and everyone (for tests and metrics).
func (lim *limiter) held(user string) (userCounts, allCounts counts) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if c := lim.users[user]; c != nil {
		userCounts = *c
	}
	return userCounts, lim.all
}
