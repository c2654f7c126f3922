package session

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The PEM headers of a key file's blocks (RFC 1421 section 4.6 headers, which encoding/pem
// reads and writes), RFC 3339 UTC timestamps. A server ignores them: it signs with the first
// key and publishes all. `octogate session keys rotate` reads and writes them.
const (
	// HeaderCreated is when the key was added to the file, so first published.
	HeaderCreated = "Octogate-Created"
	// HeaderRetired is when the key stopped signing (a later key became first).
	HeaderRetired = "Octogate-Retired"
)

// Rotation timing (docs/sessions.md, "Rotating keys").
const (
	// MinPublishFor is the least time a key is published before it signs: the JWKS is
	// cacheable for a minute (DocumentHandler) and a Verifier fetches an unknown key at most
	// every MinRefreshInterval.
	MinPublishFor = time.Minute + MinRefreshInterval
	// DefaultPublishFor also covers the time a Secret update takes to reach every replica's
	// volume (the kubelet's sync period, about a minute, plus its cache).
	DefaultPublishFor = 10 * time.Minute
	// DefaultDropAfter keeps a retired key published for the longest session it may have
	// signed, plus DefaultPublishFor for a replica that still signs with it until it sees
	// the new file.
	DefaultDropAfter = MaxTTL + DefaultPublishFor
)

// KeyEntry is one key of a key file with its rotation metadata. The first entry of a file
// signs; any other is pending (Retired zero: published, waiting to sign) or retired.
type KeyEntry struct {
	Key     *ecdsa.PrivateKey
	Created time.Time // HeaderCreated; zero when the file does not say
	Retired time.Time // HeaderRetired; zero for the signer and pending keys
}

// KeyID is the entry's kid (RFC 7638 thumbprint).
func (e KeyEntry) KeyID() string {
	k, err := newKeys([]*ecdsa.PrivateKey{e.Key})
	if err != nil {
		return ""
	}
	return k.KeyID()
}

// ParseKeyFile reads a key file (the format of ParseKeys) with its headers. An empty file is
// no entries; a bad timestamp is an error naming the block.
func ParseKeyFile(pemBytes []byte) ([]KeyEntry, error) {
	var out []KeyEntry
	for n := 1; ; n++ {
		var block *pem.Block
		block, pemBytes = pem.Decode(pemBytes)
		if block == nil {
			break
		}
		key, err := parseKeyBlock(block)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		e := KeyEntry{Key: key}
		for name, t := range map[string]*time.Time{HeaderCreated: &e.Created, HeaderRetired: &e.Retired} {
			if v, ok := block.Headers[name]; ok {
				if *t, err = time.Parse(time.RFC3339, v); err != nil {
					return nil, fmt.Errorf("PEM block %d: header %s: want an RFC 3339 time: %w", n, name, err)
				}
			}
		}
		out = append(out, e)
	}
	if len(bytes.TrimSpace(pemBytes)) > 0 && len(out) == 0 {
		return nil, errors.New("no PEM private key")
	}
	return out, nil
}

// EncodeKeyFile is the key file of entries, in order, as SEC 1 "EC PRIVATE KEY" blocks with
// their headers.
func EncodeKeyFile(entries []KeyEntry) ([]byte, error) {
	var b bytes.Buffer
	for _, e := range entries {
		der, err := x509.MarshalECPrivateKey(e.Key)
		if err != nil {
			return nil, err
		}
		h := map[string]string{}
		if !e.Created.IsZero() {
			h[HeaderCreated] = e.Created.UTC().Format(time.RFC3339)
		}
		if !e.Retired.IsZero() {
			h[HeaderRetired] = e.Retired.UTC().Format(time.RFC3339)
		}
		if err := pem.Encode(&b, &pem.Block{Type: "EC PRIVATE KEY", Headers: h, Bytes: der}); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// RotateOptions configures Rotate.
type RotateOptions struct {
	Now time.Time
	// PublishFor is how long a pending key is published before it may sign (default
	// DefaultPublishFor, at least MinPublishFor).
	PublishFor time.Duration
	// DropAfter is how long a retired key stays published (default DefaultDropAfter, at least
	// MaxTTL + Leeway: the sessions it signed must verify until they expire).
	DropAfter time.Duration
}

// Rotation is what Rotate did; kids are RFC 7638 thumbprints.
type Rotation struct {
	Signer   string   // the signing key after the rotation
	Promoted bool     // Signer was pending and now signs
	Added    string   // a new pending key, or ""
	Retired  []string // keys that stopped signing (or were pending and never will)
	Dropped  []string // keys no longer published
	Stamped  []string // pending keys without HeaderCreated, counted as published from now
	// NextPromotion is the earliest time the pending key may sign.
	NextPromotion time.Time
}

// Changed reports whether the file must be written.
func (r Rotation) Changed() bool {
	return r.Promoted || r.Added != "" || len(r.Retired) > 0 || len(r.Dropped) > 0 || len(r.Stamped) > 0
}

// Rotate is one step of key rotation, idempotent and safe to run on a schedule:
//
//  1. a pending key published for at least PublishFor is promoted: it becomes first (signs)
//     and the previous signer, and any older pending key, are retired now;
//  2. retired keys retired at least DropAfter ago are dropped;
//  3. when no key is pending, a new one is added, published but not signing.
//
// An empty file gets a signer (nothing verifies sessions of an empty file yet) and a pending
// key. A pending key without HeaderCreated (added by hand) is stamped now: its publication
// is counted from the first rotation that sees it. So a new key is always published for
// PublishFor before it signs, and a key that signed stays published for DropAfter after it
// stopped. Errors are bad options only.
func Rotate(entries []KeyEntry, o RotateOptions) ([]KeyEntry, Rotation, error) {
	if o.PublishFor == 0 {
		o.PublishFor = DefaultPublishFor
	}
	if o.DropAfter == 0 {
		o.DropAfter = DefaultDropAfter
	}
	switch {
	case o.Now.IsZero():
		return nil, Rotation{}, errors.New("session: RotateOptions.Now is required")
	case o.PublishFor < MinPublishFor:
		return nil, Rotation{}, fmt.Errorf("session: publish time %v: want at least %v (the JWKS cache and the verifiers' refresh interval)", o.PublishFor, MinPublishFor)
	case o.DropAfter < MaxTTL+Leeway:
		return nil, Rotation{}, fmt.Errorf("session: drop time %v: want at least %v (the longest session and the clock leeway)", o.DropAfter, MaxTTL+Leeway)
	}
	now := o.Now.UTC().Truncate(time.Second) // the headers' precision
	var r Rotation
	var signer *KeyEntry
	var pending, retired []KeyEntry
	for i, e := range entries {
		switch {
		case i == 0:
			e.Retired = time.Time{} // the first key signs, whatever its header says
			signer = &e
		case e.Retired.IsZero():
			if e.Created.IsZero() {
				e.Created = now
				r.Stamped = append(r.Stamped, e.KeyID())
			}
			pending = append(pending, e)
		default:
			retired = append(retired, e)
		}
	}
	if signer == nil {
		k, err := newEntry(now)
		if err != nil {
			return nil, Rotation{}, err
		}
		signer = &k
		r.Promoted = true
	}
	// Newest first, so the newest eligible pending key is promoted.
	slices.SortStableFunc(pending, func(a, b KeyEntry) int { return b.Created.Compare(a.Created) })
	for i, p := range pending {
		if now.Sub(p.Created) < o.PublishFor {
			continue
		}
		old := *signer
		old.Retired = now
		retired = append(retired, old)
		r.Retired = append(r.Retired, old.KeyID())
		for _, older := range pending[i+1:] {
			older.Retired = now
			retired = append(retired, older)
			r.Retired = append(r.Retired, older.KeyID())
		}
		signer = &p
		pending = pending[:i]
		r.Promoted = true
		break
	}
	kept := retired[:0]
	for _, e := range retired {
		if now.Sub(e.Retired) >= o.DropAfter {
			r.Dropped = append(r.Dropped, e.KeyID())
			continue
		}
		kept = append(kept, e)
	}
	retired = kept
	if len(pending) == 0 {
		k, err := newEntry(now)
		if err != nil {
			return nil, Rotation{}, err
		}
		pending = append(pending, k)
		r.Added = k.KeyID()
	}
	slices.SortStableFunc(retired, func(a, b KeyEntry) int { return b.Retired.Compare(a.Retired) })
	out := append(append([]KeyEntry{*signer}, pending...), retired...)
	r.Signer = signer.KeyID()
	r.NextPromotion = pending[len(pending)-1].Created.Add(o.PublishFor)
	for _, p := range pending {
		if t := p.Created.Add(o.PublishFor); t.Before(r.NextPromotion) {
			r.NextPromotion = t
		}
	}
	return out, r, nil
}

func newEntry(now time.Time) (KeyEntry, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyEntry{}, err
	}
	return KeyEntry{Key: k, Created: now}, nil
}
