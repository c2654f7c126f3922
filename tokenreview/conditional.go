package tokenreview

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// conditionalTransport makes GitHub lookups conditional requests
// (https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate):
// "Making a conditional request does not count against your primary rate limit if a 304
// response is returned", so a token whose user, membership and teams have not changed costs
// no rate-limit unit when its cached identity expires.
//
//   - A 200 GET answer that has an ETag is kept: its ETag, body and the headers that describe
//     it (Link, X-GitHub-SSO, scopes...), keyed by the SHA-256 of the token and the URL. GitHub
//     answers Vary: Authorization: an answer is its token's own, and a token's request never
//     carries another token's ETag nor gets another token's body.
//   - The next GET of that URL with that token sends If-None-Match: the ETag. A 304 is turned
//     into a 200 with the kept body, the kept headers and the 304's headers (the rate limit of
//     now), so go-github (which treats a 304 as an error) never sees it. The transport below
//     (meteredTransport) counts it as code 304.
//   - Any other answer goes through unchanged; a new 200 replaces the kept one, a 401 or 404
//     forgets it.
//   - An answer not confirmed by GitHub (200 or 304) for horizon is forgotten, and the kept
//     answers take at most maxBytes (least recently used first out), so the memory is bounded.
//
// Neither the ETags nor the bodies are logged or exposed: both belong to a token.
type conditionalTransport struct {
	base     http.RoundTripper
	maxBytes int           // total size of kept answers
	maxEntry int           // larger bodies are not kept
	horizon  time.Duration // an answer unconfirmed for this long is forgotten
	now      func() time.Time

	mu      sync.Mutex
	entries *simplelru.LRU[validatorKey, *validated]
	bytes   int // sum of the entries' size, guarded by mu
}

// DefaultConditionalCacheBytes is the default of Config.ConditionalCacheBytes: the answers of
// about 100 users (a user's GET /user, one membership and one page of teams are about 10 KiB on
// github.com). Bodies kept from tokens looked up once are churned through this store, and the Go
// heap grows about three times what it keeps; 1 MiB keeps `octogate serve` with 10,000 cached
// identities within 64 MiB.
const DefaultConditionalCacheBytes = 1 << 20

// maxConditionalEntries bounds the number of kept answers whatever their size.
const maxConditionalEntries = 1 << 16

// entryOverhead approximates the memory of an entry beyond its strings: the LRU's element and
// map slot, the header map, the struct; headerOverhead that of one kept header's slot and slice.
const (
	entryOverhead  = 512
	headerOverhead = 64
)

// validatorKey is a kept answer's key: the token's SHA-256 (never the token) and the URL.
type validatorKey struct {
	token [sha256.Size]byte
	url   string
}

// validated is one kept answer; immutable once kept.
type validated struct {
	etag      string
	header    http.Header // the headers of keptHeaders the 200 had
	body      []byte
	confirmed time.Time // when GitHub last answered 200 or 304 for it
	size      int
}

// keptHeaders are the headers of a 200 that describe its body. A 304 need not repeat them
// (RFC 9110 section 15.4.5), and go-github and the lookup read them.
var keptHeaders = []string{
	"Content-Type", "Link", "ETag", "Last-Modified", "Cache-Control", "Vary",
	"X-GitHub-Media-Type", "X-GitHub-SSO", "X-OAuth-Scopes", "X-Accepted-OAuth-Scopes",
	"X-Accepted-GitHub-Permissions",
}

func newConditionalTransport(base http.RoundTripper, maxBytes int) *conditionalTransport {
	t := &conditionalTransport{
		base: base, maxBytes: maxBytes, maxEntry: min(maxBytes/8, 1<<20),
		horizon: StaleFor, now: time.Now,
	}
	// The callback runs with t.mu held (every LRU call is made under it).
	t.entries, _ = simplelru.NewLRU(maxConditionalEntries, func(_ validatorKey, v *validated) { t.bytes -= v.size })
	return t
}

func (t *conditionalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	token, ok := bearer(req.Header.Get("Authorization"))
	if req.Method != http.MethodGet || !ok || req.Header.Get("If-None-Match") != "" || req.Header.Get("Range") != "" {
		return t.base.RoundTrip(req)
	}
	key := validatorKey{token: tokenKey(token), url: req.URL.String()}
	kept := t.get(key)
	if kept != nil {
		// A RoundTripper must not change the request it was given.
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", kept.etag)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch code := resp.StatusCode; {
	case code == http.StatusNotModified && kept != nil:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		t.put(key, &validated{etag: kept.etag, header: kept.header, body: kept.body, confirmed: t.now(), size: kept.size})
		return kept.response(resp), nil
	case code == http.StatusOK:
		return t.keep(key, resp)
	case code == http.StatusUnauthorized || code == http.StatusNotFound:
		t.remove(key)
	}
	return resp, nil
}

// keep reads a 200's body and keeps it with its ETag, if it has one and is not too large.
func (t *conditionalTransport) keep(key validatorKey, resp *http.Response) (*http.Response, error) {
	etag := resp.Header.Get("ETag")
	if etag == "" || strings.Contains(resp.Header.Get("Cache-Control"), "no-store") {
		t.remove(key)
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxEntry)+1))
	if err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	if len(body) > t.maxEntry {
		t.remove(key)
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp, nil
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	// ReadAll's buffer may be twice the body: keep an exact copy.
	v := &validated{etag: etag, header: http.Header{}, body: bytes.Clone(body), confirmed: t.now()}
	v.size = entryOverhead + len(key.url) + len(etag) + len(body)
	for _, k := range keptHeaders {
		if vs := resp.Header.Values(k); len(vs) > 0 {
			v.header[k] = vs
			v.size += headerOverhead + len(k)
			for _, s := range vs {
				v.size += len(s)
			}
		}
	}
	t.put(key, v)
	return resp, nil
}

// response is the 200 that a 304 answered for v stands for: v's body and headers, updated
// with the 304's (RFC 9110 section 15.4.5: a cache updates the stored response's headers).
func (v *validated) response(notModified *http.Response) *http.Response {
	h := v.header.Clone()
	for k, vs := range notModified.Header {
		h[k] = vs
	}
	h.Del("Content-Length")
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(v.body)),
		ContentLength: int64(len(v.body)),
		Request:       notModified.Request,
		TLS:           notModified.TLS,
	}
}

func (t *conditionalTransport) get(key validatorKey) *validated {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.entries.Get(key)
	if !ok {
		return nil
	}
	if t.now().Sub(v.confirmed) >= t.horizon {
		t.entries.Remove(key)
		return nil
	}
	return v
}

func (t *conditionalTransport) put(key validatorKey, v *validated) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Add replaces an existing value without calling the eviction callback.
	if old, ok := t.entries.Peek(key); ok {
		t.bytes -= old.size
	}
	t.entries.Add(key, v)
	t.bytes += v.size
	for t.bytes > t.maxBytes && t.entries.Len() > 0 {
		t.entries.RemoveOldest()
	}
}

func (t *conditionalTransport) remove(key validatorKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries.Remove(key)
}

// bearer is the token of an "Authorization: Bearer <token>" header (oauth2.Transport's form).
func bearer(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
