package tokenreview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// cache is a Lookup in front of another (GitHub). Keys are the tokens' SHA-256.
//
//   - An identity is answered for CacheTTL, a refusal for NegativeTTL, without asking GitHub.
//   - Concurrent lookups of one token share one GitHub lookup (singleflight).
//   - While GitHub is unavailable, an identity younger than StaleFor is answered ("stale").
//     A refusal is never answered stale: a revoked token stops working at once.
//   - A rate-limited token is not looked up again before GitHub's reset time; other tokens
//     are not affected.
//   - At most MaxLookups GitHub lookups run at once. Beyond that a lookup is not started: the
//     token's identity is answered stale if it can be, else errSaturated. Cache hits never
//     take a slot.
type cache struct {
	next        Lookup
	entries     *lru.Cache[[sha256.Size]byte, *entry]
	flight      singleflight.Group
	ttl, negTTL time.Duration
	staleFor    time.Duration
	// lookups holds one element per GitHub lookup in flight (a semaphore of MaxLookups).
	lookups      chan struct{}
	errSaturated error
	now          func() time.Time
	m            *metrics
	log          *slog.Logger
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
}

// result is what one flight answers to all its callers.
type result struct {
	id    Identity
	err   error
	hit   bool
	stale bool
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
	index := newUserIndex(max(ttl+StaleFor, MinRevocationMemory))
	entries, err := lru.NewWithEvict(size, func(k [sha256.Size]byte, _ *entry) { index.drop(k) })
	if err != nil {
		return nil, err
	}
	return &cache{
		next: next, entries: entries, ttl: ttl, negTTL: negTTL, staleFor: StaleFor, index: index,
		lookups: make(chan struct{}, maxLookups),
		errSaturated: unavailable(ReasonSaturated, nil, "GitHub lookups are saturated: %d lookups are already waiting on GitHub, "+
			"which is slow to answer; retry shortly", maxLookups),
		now: time.Now, m: m, log: log,
	}, nil
}

// Lookup answers from the cache when it can, else from next.
func (c *cache) Lookup(ctx context.Context, token string) (Identity, error) {
	key := tokenKey(token)
	if e, ok := c.entries.Get(key); ok {
		if r, ok := c.fresh(e, c.now()); ok {
			c.m.cacheHit.Inc()
			return r.id, r.err
		}
	}
	v, _, _ := c.flight.Do(string(key[:]), func() (any, error) {
		return c.fill(ctx, key, token), nil
	})
	r := v.(result)
	switch {
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

// fill runs once per token at a time (singleflight).
func (c *cache) fill(ctx context.Context, key [sha256.Size]byte, token string) result {
	now := c.now()
	prev, _ := c.entries.Peek(key)
	if prev != nil {
		// A flight that ended just before this one started may have filled the entry.
		if r, ok := c.fresh(prev, now); ok {
			return r
		}
		if prev.backoff != nil && now.Before(prev.backoff.Reset) {
			return c.stale(prev, now, prev.backoff)
		}
	}

	// A lookup slot is taken here, once per flight, not per review; with none free the review
	// is answered now rather than queued behind a slow GitHub.
	select {
	case c.lookups <- struct{}{}:
		defer func() { <-c.lookups }()
	default:
		if prev != nil {
			return c.stale(prev, now, c.errSaturated)
		}
		return result{err: c.errSaturated}
	}

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
		c.entries.Add(key, &entry{id: &kept, fetched: now})
		c.index.put(key, id.UID, id.Groups)
		return result{id: id}
	case errors.Is(err, ErrRefused):
		c.entries.Add(key, &entry{refusal: err, refusedUntil: now.Add(c.negTTL)})
		c.index.drop(key)
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
		c.entries.Add(key, next)
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
