package githubapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Conditional requests and rate-limit accounting of the authenticated REST routes, as GitHub
// does them (https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate):
//
//   - a 200 carries a strong ETag derived from its body, and Vary: Accept, Authorization (the
//     body is the token's own: another token gets another answer);
//   - a request whose If-None-Match names the current ETag is answered 304 Not Modified with
//     no body;
//   - every authenticated answer costs the token one unit of its primary rate limit, except a
//     304: "Making a conditional request does not count against your primary rate limit if a
//     304 response is returned". X-RateLimit-Used and X-RateLimit-Remaining
//     (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#checking-the-status-of-your-rate-limit)
//     are therefore unchanged by a 304.

// conditional holds a route's answer until its ETag is known.
type conditional struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *conditional) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *conditional) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}

// finishLocked writes c's answer, or 304 when the request's If-None-Match names its ETag, and
// charges tok a rate-limit unit unless the answer is 304.
func (s *Server) finishLocked(c *conditional, r *http.Request, tok string) {
	h := c.Header()
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	if status == http.StatusOK {
		sum := sha256.Sum256(c.body.Bytes())
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		h.Set("ETag", etag)
		h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
		h.Set("Vary", "Accept, Authorization")
		if noneMatch(r.Header.Get("If-None-Match"), etag) {
			status = http.StatusNotModified
		}
	}
	if status == http.StatusNotModified {
		s.notMod[tok]++
	} else {
		s.rateUsed[tok]++
	}
	used := min(s.rateUsed[tok], rateLimitPerHour-1)
	h.Set("X-RateLimit-Limit", strconv.Itoa(rateLimitPerHour))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(rateLimitPerHour-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Truncate(time.Hour).Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	if status == http.StatusNotModified {
		// A 304 has no body (RFC 9110 section 15.4.5).
		h.Del("Content-Type")
		c.ResponseWriter.WriteHeader(status)
		return
	}
	c.ResponseWriter.WriteHeader(status)
	_, _ = c.ResponseWriter.Write(c.body.Bytes())
}

// noneMatch reports whether an If-None-Match value names etag: "*", or a list of entity
// tags compared weakly (RFC 9110 section 13.1.2).
func noneMatch(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == etag {
			return true
		}
	}
	return false
}

// RateLimitUsed is the number of primary rate-limit units tok has spent, as the
// X-RateLimit-Used GitHub sends with each answer: one per authenticated REST answer except
// a 304 Not Modified. ResetCalls sets it to zero.
func (s *Server) RateLimitUsed(tok string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rateUsed[tok]
}

// NotModified is the number of 304 Not Modified answers tok has had: conditional requests
// whose If-None-Match named the current ETag, none of which cost a rate-limit unit. ResetCalls
// sets it to zero.
func (s *Server) NotModified(tok string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notMod[tok]
}
