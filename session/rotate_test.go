package session

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/tokenreview"
)

// swapKeys is a KeySource a test replaces, as a reloaded key file is.
type swapKeys struct{ p atomic.Pointer[Keys] }

func (s *swapKeys) Current() *Keys { return s.p.Load() }

// rotateAt runs Rotate at now with the default options and returns the new entries.
func rotateAt(t *testing.T, entries []KeyEntry, now time.Time) ([]KeyEntry, Rotation) {
	t.Helper()
	next, r, err := Rotate(entries, RotateOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// Through the file format, as the command does.
	b, err := EncodeKeyFile(next)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeyFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return back, r
}

func keysOf(t *testing.T, entries []KeyEntry) *Keys {
	t.Helper()
	b, err := EncodeKeyFile(entries)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func kids(k *Keys) []string {
	var out []string
	for _, p := range k.Public() {
		out = append(out, p.KeyID)
	}
	return out
}

// TestRotationKeepsLiveSessions walks one rotation: a session signed by the old key verifies
// until it expires, however late in its key's life it was signed.
func TestRotationKeepsLiveSessions(t *testing.T) {
	c := newClock()
	t0 := c.t
	src := &swapKeys{}
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: clusterA, Keys: src, Now: c.now, CacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	signAt := func(k *Keys, at time.Time) string {
		cl, err := mint(testIssuer, clusterA, alice, at, MaxTTL)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := k.sign(cl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	entries, r := rotateAt(t, nil, t0)
	if len(entries) != 2 || !r.Changed() {
		t.Fatalf("an empty file got %d keys (%+v), want a signer and a pending key", len(entries), r)
	}
	a, b := entries[0].KeyID(), entries[1].KeyID()
	src.p.Store(keysOf(t, entries))
	if got := src.Current().KeyID(); got != a {
		t.Fatalf("signer %s, want %s", got, a)
	}
	if got := kids(src.Current()); !slices.Contains(got, b) {
		t.Fatalf("pending key %s is not published: %v", b, got)
	}

	again, r := rotateAt(t, entries, t0.Add(DefaultPublishFor-time.Second))
	if r.Changed() || again[0].KeyID() != a {
		t.Fatalf("a rotation before the pending key was published for %v changed the file: %+v", DefaultPublishFor, r)
	}

	// The last session of key a, signed just before the rotation.
	c.t = t0.Add(DefaultPublishFor)
	last := signAt(src.Current(), c.t)
	entries, r = rotateAt(t, entries, c.t)
	if !r.Promoted || r.Signer != b || !slices.Equal(r.Retired, []string{a}) || r.Added == "" {
		t.Fatalf("rotation = %+v, want %s promoted, %s retired, a key added", r, b, a)
	}
	src.p.Store(keysOf(t, entries))
	if got := src.Current().KeyID(); got != b {
		t.Fatalf("signer %s after the rotation, want %s", got, b)
	}
	if got := kids(src.Current()); !slices.Contains(got, a) || !slices.Contains(got, r.Added) {
		t.Fatalf("published %v, want the retired %s and the new pending %s", got, a, r.Added)
	}

	// Every rotation before a's drop time keeps it: the session verifies until it expires.
	for c.t = c.t.Add(5 * time.Minute); c.t.Before(t0.Add(DefaultPublishFor + MaxTTL)); c.t = c.t.Add(5 * time.Minute) {
		if entries, r = rotateAt(t, entries, c.t); slices.Contains(r.Dropped, a) {
			t.Fatalf("%v after its retirement, key %s was dropped; its sessions live %v", c.t.Sub(t0.Add(DefaultPublishFor)), a, MaxTTL)
		}
		src.p.Store(keysOf(t, entries))
		if _, err := v.Lookup(context.Background(), last); err != nil {
			t.Fatalf("%v after the rotation, the old key's session is refused: %v", c.t.Sub(t0.Add(DefaultPublishFor)), err)
		}
	}

	c.t = t0.Add(DefaultPublishFor + DefaultDropAfter)
	entries, r = rotateAt(t, entries, c.t)
	if !slices.Contains(r.Dropped, a) {
		t.Fatalf("rotation %v after the retirement = %+v, want %s dropped", DefaultDropAfter, r, a)
	}
	src.p.Store(keysOf(t, entries))
	if slices.Contains(kids(src.Current()), a) {
		t.Fatalf("dropped key %s is still published", a)
	}
}

// TestRotationPublishesBeforeSigning runs the rotation every few minutes for two days and
// checks, at each step, that the signing key was published for PublishFor and that every key
// that signed is published for DropAfter after it stopped.
func TestRotationPublishesBeforeSigning(t *testing.T) {
	t0 := newClock().t
	published := map[string]time.Time{} // kid -> first published
	lastSigned := map[string]time.Time{}
	var entries []KeyEntry
	signer := ""
	for now := t0; now.Before(t0.Add(48 * time.Hour)); now = now.Add(7 * time.Minute) {
		entries, _ = rotateAt(t, entries, now)
		k := keysOf(t, entries)
		pub := kids(k)
		for _, kid := range pub {
			if _, ok := published[kid]; !ok {
				published[kid] = now
			}
		}
		if k.KeyID() != signer {
			if signer != "" && now.Sub(published[k.KeyID()]) < DefaultPublishFor {
				t.Fatalf("at %v key %s signs after being published %v, want at least %v", now.Sub(t0), k.KeyID(), now.Sub(published[k.KeyID()]), DefaultPublishFor)
			}
			signer = k.KeyID()
		}
		lastSigned[signer] = now
		for kid, at := range lastSigned {
			if !slices.Contains(pub, kid) && now.Sub(at) < MaxTTL+Leeway {
				t.Fatalf("at %v key %s is dropped %v after it last signed, want at least %v", now.Sub(t0), kid, now.Sub(at), MaxTTL+Leeway)
			}
		}
		// At most one promotion per PublishFor, each retired key kept DropAfter.
		if most := 2 + int(DefaultDropAfter/DefaultPublishFor) + 1; len(pub) > most {
			t.Fatalf("at %v %d keys are published, want at most %d", now.Sub(t0), len(pub), most)
		}
	}
	if len(lastSigned) < 40 {
		t.Fatalf("%d keys signed in two days of rotations every 7 minutes, want one per %v", len(lastSigned), DefaultPublishFor)
	}
}

// A key added by hand (no Octogate-Created header) is published from the first rotation that
// sees it, not from whenever it was written.
func TestRotationStampsKeysAddedByHand(t *testing.T) {
	t0 := newClock().t
	a, _ := newEntry(t0)
	b, _ := newEntry(time.Time{})
	b.Created = time.Time{}
	entries, r := rotateAt(t, []KeyEntry{{Key: a.Key}, b}, t0)
	if r.Promoted || entries[0].KeyID() != a.KeyID() || !entries[1].Created.Equal(t0) || !slices.Equal(r.Stamped, []string{b.KeyID()}) || r.Added != "" {
		t.Fatalf("rotation = %+v, entries %+v: want the hand-added key stamped %v, not promoted", r, entries, t0)
	}
	if _, r = rotateAt(t, entries, t0.Add(DefaultPublishFor)); r.Signer != b.KeyID() {
		t.Fatalf("after %v, signer %s, want the hand-added %s", DefaultPublishFor, r.Signer, b.KeyID())
	}
}

func TestRotateRefusesUnsafeOptions(t *testing.T) {
	now := newClock().t
	for name, o := range map[string]RotateOptions{
		"no time":                       {},
		"published shorter than caches": {Now: now, PublishFor: time.Minute},
		"dropped before sessions end":   {Now: now, DropAfter: MaxTTL},
	} {
		if _, _, err := Rotate(nil, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A session signed by a key the issuer never published, with a kid or with a published kid,
// is refused as bad_signature.
func TestNeverPublishedKeyIsBadSignature(t *testing.T) {
	c := newClock()
	entries, _ := rotateAt(t, nil, c.t)
	src := &swapKeys{}
	src.p.Store(keysOf(t, entries))
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: clusterA, Keys: src, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := newEntry(c.t)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := mint(testIssuer, clusterA, alice, c.t, DefaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := keysOf(t, []KeyEntry{stranger}).sign(cl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lookup(context.Background(), tok); reasonOf(err) != tokenreview.ReasonBadSignature {
		t.Fatalf("a session of an unpublished key: %v, want %s", err, tokenreview.ReasonBadSignature)
	}
	forged := signWith(t, jose.ES256, stranger.Key, src.Current().KeyID(), cl)
	if _, err := v.Lookup(context.Background(), forged); reasonOf(err) != tokenreview.ReasonBadSignature {
		t.Fatalf("a session of an unpublished key under a published kid: %v, want %s", err, tokenreview.ReasonBadSignature)
	}
}

// TestKeyFileReload: a rotation written to disk is signed with and published by a KeyFile
// within its poll interval, and a file that does not load keeps the previous keys.
func TestKeyFileReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.pem")
	t0 := time.Now()
	entries, _ := rotateAt(t, nil, t0.Add(-DefaultPublishFor))
	write := func(b []byte) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := EncodeKeyFile(entries)
	write(b)
	f, err := OpenKeyFile(path, 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: clusterA, Keys: f})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Audiences: []string{clusterA}, Keys: f,
		GitHub: &fakeLookup{ids: map[string]tokenreview.Identity{"gho_a4GEHKN": alice}}})
	if err != nil {
		t.Fatal(err)
	}
	before := f.Current().KeyID()

	entries, r := rotateAt(t, entries, t0)
	if !r.Promoted {
		t.Fatalf("no promotion: %+v", r)
	}
	b, _ = EncodeKeyFile(entries)
	write(b)
	deadline := time.Now().Add(5 * time.Second)
	for f.Current().KeyID() != r.Signer {
		if time.Now().After(deadline) {
			t.Fatalf("the key file still signs with %s 5s after the rotation, want %s", f.Current().KeyID(), r.Signer)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if x.Keys().KeyID() != r.Signer || !slices.Contains(kids(x.Keys()), before) || !slices.Contains(kids(x.Keys()), r.Added) {
		t.Fatalf("exchanger keys %v (signer %s), want signer %s with %s and %s published", kids(x.Keys()), x.Keys().KeyID(), r.Signer, before, r.Added)
	}
	cl, _ := mint(testIssuer, clusterA, alice, time.Now(), DefaultTTL)
	tok, err := x.Keys().sign(cl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lookup(context.Background(), tok); err != nil {
		t.Fatalf("a session of the reloaded signer is refused: %v", err)
	}

	write([]byte("not a key"))
	if f.Reload() || f.Current().KeyID() != r.Signer {
		t.Fatalf("a broken file replaced the keys: signer %s", f.Current().KeyID())
	}
}

// A key dropped from the file (compromised) refuses its sessions at once, cached ones too.
func TestDroppedKeyRefusesCachedSessions(t *testing.T) {
	c := newClock()
	entries, _ := rotateAt(t, nil, c.t)
	src := &swapKeys{}
	src.p.Store(keysOf(t, entries))
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: clusterA, Keys: src, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := mint(testIssuer, clusterA, alice, c.t, DefaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Current().sign(cl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lookup(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	src.p.Store(keysOf(t, entries[1:])) // the signer removed, the pending key first
	if _, err := v.Lookup(context.Background(), tok); reasonOf(err) != tokenreview.ReasonBadSignature {
		t.Fatalf("a cached session of a dropped key: %v, want %s", err, tokenreview.ReasonBadSignature)
	}
}
