package session

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/tokenreview"
)

// BenchmarkVerifierCachedSession is /authenticate's lookup of a session seen before: a hash,
// an LRU hit and a revocation check.
func BenchmarkVerifierCachedSession(b *testing.B) {
	e := newVerifierEnvB(b)
	tok := e.sessionB(b)
	if _, err := e.v.Lookup(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.v.Lookup(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifierUncachedSession is the first lookup of a session: the ES256 signature check
// and the claims.
func BenchmarkVerifierUncachedSession(b *testing.B) {
	e := newVerifierEnvB(b)
	tok := e.sessionB(b)
	b.ReportAllocs()
	for b.Loop() {
		e.v.cache.Purge()
		if _, err := e.v.Lookup(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchange is one exchange whose GitHub lookup is answered at once (a cache hit):
// minting and the ES256 signature.
func BenchmarkExchange(b *testing.B) {
	k, err := GenerateKeys()
	if err != nil {
		b.Fatal(err)
	}
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Audiences: []string{clusterA}, Keys: k,
		GitHub: &fakeLookup{ids: map[string]tokenreview.Identity{"gho_alice0iufm3": alice}}})
	if err != nil {
		b.Fatal(err)
	}
	req := exchangeReq("gho_alice0iufm3", TokenTypeAccessToken, clusterA)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, oerr := x.Exchange(context.Background(), req); oerr != nil {
			b.Fatal(oerr)
		}
	}
}

type benchEnv struct {
	v    *Verifier
	keys *Keys
}

func newVerifierEnvB(b *testing.B) benchEnv {
	k, err := GenerateKeys()
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: clusterA, Keys: k,
		Revoked: func(string, time.Time) bool { return false }})
	if err != nil {
		b.Fatal(err)
	}
	return benchEnv{v: v, keys: k}
}

func (e benchEnv) sessionB(b *testing.B) string {
	c, err := mint(testIssuer, clusterA, alice, time.Now(), DefaultTTL)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := e.keys.sign(c)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// BenchmarkTokenReviewCachedSession is one /authenticate review of a cached session through
// tokenreview's Handler (compare tokenreview's BenchmarkTokenReviewCached for a GitHub token).
func BenchmarkTokenReviewCachedSession(b *testing.B) {
	e := newVerifierEnvB(b)
	tok := e.sessionB(b)
	h := tokenreview.NewHandler(e.v, nil)
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + tok + `"}}`)
	req, _ := http.NewRequest(http.MethodPost, "/authenticate", nil)
	w := &discardWriter{h: http.Header{}}
	rd := bytes.NewReader(body)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = readCloser{rd}
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	if w.code != http.StatusOK {
		b.Fatalf("code %d", w.code)
	}
}

// BenchmarkVerifierCachedSessionFeedHooks is BenchmarkVerifierCachedSession on a verifier of a
// remote issuer wired as serve wires one: team revocations (one kept, of another team) and the
// feed's staleness (two atomic loads, as revocation.Receiver.Stale), checked on every use.
func BenchmarkVerifierCachedSessionFeedHooks(b *testing.B) {
	e := newVerifierEnvB(b)
	var teams atomic.Pointer[map[string]time.Time]
	teams.Store(&map[string]time.Time{"acme/not-alices": time.Now()})
	e.v.revokedGroups = func(groups []string, issuedAt time.Time) bool {
		m := *teams.Load()
		for _, g := range groups {
			if at, ok := m[strings.TrimPrefix(g, "github:")]; ok && !at.Before(issuedAt) {
				return true
			}
		}
		return false
	}
	var lastSync, polling atomic.Int64
	lastSync.Store(time.Now().UnixNano())
	polling.Store(time.Now().UnixNano())
	e.v.stale = func(now time.Time) (time.Time, bool) {
		last := time.Unix(0, lastSync.Load())
		if p := polling.Load(); p != 0 && now.Sub(time.Unix(0, p)) < time.Minute {
			return last, false
		}
		return last, now.Sub(last) > 5*time.Minute
	}
	tok := e.sessionB(b)
	if _, err := e.v.Lookup(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.v.Lookup(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}
