package jwks

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Remote is an issuer's signing keys of one Type, fetched with Fetch and kept:
//   - a kid already known is found with no network call, whether or not the issuer is
//     reachable ("the last good keys keep working");
//   - an unknown kid fetches the set again (first the discovery document, until it has been
//     read once), at most once per MinRefresh whatever the number of callers, so a flood of
//     made-up kids costs one fetch per interval;
//   - a failed fetch keeps the last good keys.
//
// Set the exported fields before first use; they are not changed afterwards.
type Remote struct {
	Issuer     string
	Client     *http.Client
	Type       KeyType
	Timeout    time.Duration // of one fetch, discovery included
	MinRefresh time.Duration
	Now        func() time.Time

	keys atomic.Pointer[[]jose.JSONWebKey] // last good keys; nil before the first fetch

	mu          sync.Mutex // serializes fetches; guards the fields below
	jwksURL     string     // from discovery; "" until discovery succeeded
	lastAttempt time.Time
	lastErr     error // of the last attempt; nil if it succeeded
}

// Miss says why Refresh found no key for a kid.
type Miss struct {
	// NoneKnown: no fetch has succeeded yet.
	NoneKnown bool
	// Err is the last fetch's error, nil when the set was fetched and lacks the kid.
	Err error
	// Checked is when the set was last fetched or tried.
	Checked time.Time
}

// Keys is the last good key set, nil before the first successful fetch.
func (r *Remote) Keys() []jose.JSONWebKey {
	if p := r.keys.Load(); p != nil {
		return *p
	}
	return nil
}

// Find is the known keys that may have signed a token with kid: the one with that kid, or
// every key when kid is "".
func (r *Remote) Find(kid string) []jose.JSONWebKey { return Find(r.Keys(), kid) }

// Find is the keys of set that may have signed a token with kid: the one with that kid, or
// every key when kid is "".
func Find(set []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return set
	}
	for _, key := range set {
		if key.KeyID == kid {
			return []jose.JSONWebKey{key}
		}
	}
	return nil
}

// Refresh fetches the set unless it was tried less than MinRefresh ago, and returns the keys
// for kid, or a Miss saying why there are none.
func (r *Remote) Refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, *Miss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Another caller may have fetched the key while this one waited for the lock.
	if c := r.Find(kid); len(c) > 0 {
		return c, nil
	}
	if r.lastAttempt.IsZero() || r.Now().Sub(r.lastAttempt) >= r.MinRefresh {
		r.fetchLocked(ctx)
		if c := r.Find(kid); len(c) > 0 {
			return c, nil
		}
	}
	return nil, &Miss{NoneKnown: r.keys.Load() == nil, Err: r.lastErr, Checked: r.lastAttempt}
}

// Warm fetches the set once if none is known; it returns that fetch's error.
func (r *Remote) Warm(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys.Load() != nil {
		return nil
	}
	r.fetchLocked(ctx)
	return r.lastErr
}

func (r *Remote) fetchLocked(ctx context.Context) {
	// A caller that gives up must not spoil the fetch for the others (and the interval).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.Timeout)
	defer cancel()
	r.lastAttempt = r.Now()
	keys, jwksURL, err := Fetch(ctx, r.Client, r.Issuer, r.jwksURL, r.Type)
	r.jwksURL = jwksURL
	r.lastErr = err
	if err == nil {
		r.keys.Store(&keys)
	}
}

// ErrText is the text of a Miss's cause for a message: the fetch error, or "not fetched yet".
func (m *Miss) ErrText() string {
	if m.Err == nil {
		return "not fetched yet"
	}
	return m.Err.Error()
}

// Forget drops the known keys: the next token fetches the set again (within MinRefresh of the
// last fetch, it is refused or unavailable until then).
func (r *Remote) Forget() { r.keys.Store(nil) }
