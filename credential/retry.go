package credential

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// shedRetry is how a call to a session issuer (token exchange, GET /clusters, logout) retries
// an answer that sheds load: HTTP 429 or 503 with a Retry-After header, as octogate's issuer
// answers when its GitHub lookups are saturated ("[saturated]", 503) or a client address sends
// new tokens faster than its rate (429) (docs/sessions.md). It waits what Retry-After asks
// (RFC 9110 section 10.2.3: delay-seconds or an HTTP-date; RFC 6585 section 4 for 429) plus a
// random jitter, so that the runs shed together do not come back together, for at most
// attempts requests and budget of waiting in all; an answer that asks for more than the
// budget left is returned as it is. Every other answer (a refusal: 400, 401, 403; a 429 or
// 503 without Retry-After) and every network error is returned at once.
type shedRetry struct {
	attempts int           // requests in all, the first included
	budget   time.Duration // waiting in all
	// jitter is a random duration in [0, d).
	jitter func(d time.Duration) time.Duration
	// sleep waits d, or returns ctx's error when ctx ends first.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time // for an HTTP-date Retry-After
}

// Defaults of shedRetry: 4 requests and 10 s of waiting at most, so that a person waits no
// longer than a kubectl run can bear; octogate's issuer asks for 1 s.
const (
	shedRetryAttempts = 4
	shedRetryBudget   = 10 * time.Second
	// minJitterSpan spreads even a Retry-After of 0 or 1 s over half a second or more.
	minJitterSpan = 500 * time.Millisecond
)

func defaultShedRetry() shedRetry {
	return shedRetry{
		attempts: shedRetryAttempts,
		budget:   shedRetryBudget,
		jitter: func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		},
		sleep: func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		now: time.Now,
	}
}

// do sends the request newReq makes (a new one for every attempt: a body is read once) with
// client, retrying a shed answer, and returns the last answer's status and body (its first
// limit bytes). err is a failure to make the request, send it or read the answer.
func (r shedRetry) do(ctx context.Context, client *http.Client, limit int64, newReq func(context.Context) (*http.Request, error)) (status int, body []byte, err error) {
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		req, err := newReq(ctx)
		if err != nil {
			return 0, nil, err
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		body, err = io.ReadAll(io.LimitReader(res.Body, limit))
		_ = res.Body.Close()
		if err != nil {
			return 0, nil, err
		}
		if attempt >= r.attempts {
			return res.StatusCode, body, nil
		}
		wait, shed := retryAfter(res, r.now())
		if !shed {
			return res.StatusCode, body, nil
		}
		wait += r.jitter(max(wait, minJitterSpan))
		if waited+wait > r.budget || r.sleep(ctx, wait) != nil {
			return res.StatusCode, body, nil
		}
		waited += wait
	}
}

// retryAfter is the wait a shed answer asks for: ok only for a 429 or 503 with a valid
// Retry-After, delay-seconds or an HTTP-date (a date past is no wait).
// Source: https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3
func retryAfter(res *http.Response, now time.Time) (wait time.Duration, ok bool) {
	if res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := strings.TrimSpace(res.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}
