package tokenreview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// cache is a Lookup in front of another (GitHub). Keys are the tokens' SHA-256.
//
//   - An identity is answered for CacheTTL, a refusal for NegativeTTL, without asking GitHub.
//   - Identities and refusals live in two LRUs of CacheSize each: refusals (a flood of unknown
//     tokens) never push an identity out.
//   - A token the next Lookup refuses offline (offlineRefuser: a wrong checksum, a token type
//     never looked up) is answered without a lookup slot, a limiter token or a cache entry.
//   - An identity reviewed in the last quarter of its CacheTTL is refreshed in the background
//     (when a lookup slot is free), so that a user who keeps working never waits on GitHub.
//   - Concurrent lookups of one token share one GitHub lookup (singleflight).
//   - While GitHub is unavailable, an identity younger than StaleFor is answered ("stale").
//     A refusal is never answered stale: a revoked token stops working at once.
//   - A rate-limited token is not looked up again before GitHub's reset time; other tokens
//     are not affected.
//   - A token with no cached identity ("new") is looked up only within a rate: per client
//     address and in all for the public doors (FromClient), in all for /authenticate. Beyond
//     it the review is answered *ThrottledError at once.
//   - At most MaxLookups GitHub lookups run at once, ReservedLookups of them only for
//     /authenticate (a context without FromClient). Beyond that a lookup is not started: the
//     token's identity is answered stale if it can be, else errSaturated. Cache hits never
//     take a slot.
type cache struct {
	next    Lookup
	offline offlineRefuser // next's offline refusals, nil if it has none
	// entries hold identities (an entry with id set); refusals hold every other entry
	// (refusals, and rate-limit backoffs of tokens without an identity).
	entries, refusals *lru.Cache[[sha256.Size]byte, *entry]
	flight            singleflight.Group
	ttl, negTTL       time.Duration
	staleFor          time.Duration
	// lookups holds one element per GitHub lookup in flight (a semaphore of MaxLookups minus
	// ReservedLookups); reserved holds those of /authenticate beyond it.
	lookups, reserved chan struct{}
	limits            *newTokenLimits
	errSaturated      error
	now               func() time.Time
	m                 *metrics
	log               *slog.Logger
	// index finds the entries of one GitHub user or group for EvictUser and EvictGroup.
	index *userIndex
}

// entry is immutable once in the cache; changes replace it.
type entry struct {
	id           *Identity // the last identity GitHub confirmed, nil if none
	fetched      time.Time // when GitHub confirmed id
	refusal      error     // ErrRefused answer, until refusedUntil
	refusedUntil time.Time
	backoff      *RateLimitError // no GitHub call before backoff.Reset
	// refreshing is set by the review that starts a background refresh of id.
	refreshing atomic.Bool
}

// result is what one flight answers to all its callers.
type result struct {
	id    Identity
	err   error
	hit   bool
	stale bool
	// throttled is a new token refused a lookup by its rate (*ThrottledError).
	throttled bool
}

func newCache(cfg Config, next Lookup, m *metrics, log *slog.Logger) (*cache, error) {
	ttl, err := orDefault("CacheTTL", cfg.CacheTTL, DefaultCacheTTL, positive)
	if err != nil {
		return nil, err
	}
	negTTL, err := orDefault("NegativeTTL", cfg.NegativeTTL, DefaultNegativeTTL, positive)
	if err != nil {
		return nil, err
	}
	size, err := orDefault("CacheSize", cfg.CacheSize, DefaultCacheSize, positive)
	if err != nil {
		return nil, err
	}
	maxLookups, err := orDefault("MaxLookups", cfg.MaxLookups, DefaultMaxLookups, positive)
	if err != nil {
		return nil, err
	}
	reserved := cfg.ReservedLookups
	switch {
	case reserved == 0:
		reserved = maxLookups / 4
	case reserved < 0 || reserved >= maxLookups:
		return nil, fmt.Errorf("tokenreview: ReservedLookups %d: want 1 to MaxLookups-1 (%d)", reserved, maxLookups-1)
	}
	limits, err := newNewTokenLimits(cfg)
	if err != nil {
		return nil, err
	}
	index := newUserIndex(max(ttl+StaleFor, MinRevocationMemory))
	entries, err := lru.NewWithEvict(size, func(k [sha256.Size]byte, _ *entry) { index.drop(k) })
	if err != nil {
		return nil, err
	}
	refusals, err := lru.New[[sha256.Size]byte, *entry](size)
	if err != nil {
		return nil, err
	}
	off, _ := next.(offlineRefuser)
	return &cache{
		next: next, offline: off, entries: entries, refusals: refusals, ttl: ttl, negTTL: negTTL, staleFor: StaleFor, index: index,
		lookups: make(chan struct{}, maxLookups-reserved), reserved: make(chan struct{}, reserved), limits: limits,
		errSaturated: unavailable(ReasonSaturated, nil, "GitHub lookups are saturated: %d lookups are already waiting on GitHub, "+
			"which is slow to answer; retry shortly", maxLookups),
		now: time.Now, m: m, log: log,
	}, nil
}

// offlineRefuser is a Lookup that refuses some tokens from their form alone (gitHub).
type offlineRefuser interface {
	offlineRefusal(token string) error
}

// Lookup answers from the cache when it can, else from next.
func (c *cache) Lookup(ctx context.Context, token string) (Identity, error) {
	key := tokenKey(token)
	if e, ok := c.entries.Get(key); ok {
		now := c.now()
		if r, ok := c.fresh(e, now); ok {
			c.m.cacheHit.Inc()
			if now.Sub(e.fetched) >= c.ttl-c.ttl/4 {
				c.refreshAhead(ctx, key, token, e)
			}
			return r.id, r.err
		}
	} else if e, ok := c.refusals.Get(key); ok {
		if r, ok := c.fresh(e, c.now()); ok {
			c.m.cacheHit.Inc()
			return r.id, r.err
		}
	}
	if c.offline != nil {
		if err := c.offline.offlineRefusal(token); err != nil {
			return Identity{}, err
		}
	}
	v, _, _ := c.flight.Do(string(key[:]), func() (any, error) {
		return c.fill(ctx, key, token), nil
	})
	r := v.(result)
	switch {
	case r.throttled:
		// Not looked up: neither a hit nor a miss.
	case r.hit:
		c.m.cacheHit.Inc()
	case r.stale:
		c.m.cacheStale.Inc()
	default:
		c.m.cacheMiss.Inc()
	}
	return r.id, r.err
}

func (c *cache) fresh(e *entry, now time.Time) (result, bool) {
	switch {
	case e.refusal != nil && now.Before(e.refusedUntil):
		return result{err: e.refusal, hit: true}, true
	case e.id != nil && e.refusal == nil && now.Sub(e.fetched) < c.ttl && !c.index.revokedSince(e.id.UID, e.fetched):
		return result{id: *e.id, hit: true}, true
	}
	return result{}, false
}

// refreshAhead looks up again, in the background, the identity e of a token reviewed late in
// its CacheTTL, so that the next review finds it fresh. It starts at most one refresh per
// entry, and only with a shared lookup slot free: it never waits and never takes a slot
// /authenticate keeps. The refresh is bounded by the GitHub calls' timeouts.
func (c *cache) refreshAhead(ctx context.Context, key [sha256.Size]byte, token string, e *entry) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	select {
	case c.lookups <- struct{}{}:
	default:
		e.refreshing.Store(false)
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer func() { <-c.lookups }()
		_, _, _ = c.flight.Do(string(key[:]), func() (any, error) { // the refresh stores its result in the cache itself
			return c.lookup(ctx, key, token, e, c.now()), nil
		})
	}()
}

// fill runs once per token at a time (singleflight).
func (c *cache) fill(ctx context.Context, key [sha256.Size]byte, token string) result {
	now := c.now()
	prev, _ := c.entries.Peek(key)
	if prev == nil {
		prev, _ = c.refusals.Peek(key)
	}
	if prev != nil {
		// A flight that ended just before this one started may have filled the entry.
		if r, ok := c.fresh(prev, now); ok {
			return r
		}
		if prev.backoff != nil && now.Before(prev.backoff.Reset) {
			return c.stale(prev, now, prev.backoff)
		}
	}

	if prev == nil || prev.id == nil {
		if err := c.limits.allow(ctx, now); err != nil {
			return result{err: err, throttled: true}
		}
	}

	// A lookup slot is taken here, once per flight, not per review; with none free the review
	// is answered now rather than queued behind a slow GitHub. /authenticate (a context
	// without FromClient) may also take a reserved slot.
	slots := c.lookups
	select {
	case c.lookups <- struct{}{}:
	default:
		if _, public := clientFrom(ctx); public {
			return c.stale(orEmpty(prev), now, c.errSaturated)
		}
		select {
		case c.reserved <- struct{}{}:
			slots = c.reserved
		default:
			return c.stale(orEmpty(prev), now, c.errSaturated)
		}
	}
	defer func() { <-slots }()
	return c.lookup(ctx, key, token, prev, now)
}

func orEmpty(e *entry) *entry {
	if e == nil {
		return &entry{}
	}
	return e
}

// lookup asks next about token and caches the answer; prev is the token's entry, if any.
func (c *cache) lookup(ctx context.Context, key [sha256.Size]byte, token string, prev *entry, now time.Time) result {
	// The flight's callers share this lookup; one caller going away must not cancel it.
	started := now
	id, err := c.next.Lookup(context.WithoutCancel(ctx), token)
	now = c.now()
	switch {
	case err == nil:
		id.userJSON = encodeUser(id)
		// The cache keeps only what answers and logs need: the encoded status.user carries
		// the groups and extra, so the structured copies are not kept per token.
		kept := Identity{Username: id.Username, UID: id.UID, userJSON: id.userJSON}
		if c.index.revokedSince(id.UID, started) {
			// Revoked while GitHub was answering: answer, but let the next review ask again.
			c.entries.Remove(key)
			return result{id: id}
		}
		c.refusals.Remove(key)
		c.entries.Add(key, &entry{id: &kept, fetched: now})
		c.index.put(key, id.UID, id.Groups)
		return result{id: id}
	case errors.Is(err, ErrRefused):
		c.entries.Remove(key) // the LRU's eviction callback drops key from the index
		c.refusals.Add(key, &entry{refusal: err, refusedUntil: now.Add(c.negTTL)})
		return result{err: err}
	}
	if !errors.Is(err, ErrUnavailable) {
		err = unavailable(ReasonGitHubUnavailable, err, "looking the token up failed: %v", err)
	}
	next := &entry{}
	if prev != nil && prev.refusal == nil {
		next.id, next.fetched = prev.id, prev.fetched
	}
	var rl *RateLimitError
	if errors.As(err, &rl) {
		next.backoff = rl
		if next.id != nil {
			c.entries.Add(key, next)
		} else {
			c.refusals.Add(key, next)
		}
	}
	r := c.stale(next, now, err)
	c.log.LogAttrs(ctx, slog.LevelWarn, "GitHub lookup failed",
		slog.String("token_sha256", hex.EncodeToString(key[:4])),
		slog.Bool("served_stale", r.stale),
		slog.String("error", err.Error()))
	return r
}

// stale answers e's identity if it is younger than staleFor, else err.
func (c *cache) stale(e *entry, now time.Time, err error) result {
	if e.id != nil && now.Sub(e.fetched) < c.staleFor && !c.index.revokedSince(e.id.UID, e.fetched) {
		return result{id: *e.id, stale: true}
	}
	return result{err: err}
}
