package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

// rateLimitGoal is the bound on GitHub rate-limit units per active user-hour.
const rateLimitGoal = 10

// rateLimitRun is one measured hour of one user.
type rateLimitRun struct {
	name    string
	units   int // X-RateLimit-Used at the stand-in: what GitHub charges the token
	calls   int // REST requests received with the token, 304s included
	lookups int // GET /user, one per lookup
	failed  int
	err     error
}

// rateLimitUnits measures the GitHub rate-limit units that one user whose kubectl calls never
// stop spends in an hour, at the default token cache TTL, with conditional requests off
// (before) and on (after). Time is compressed by scale: the TTL is DefaultCacheTTL/scale and
// the hour 1h/scale, so the user's identity expires 60 times, as in an hour at 60 s; a review
// is sent every TTL/20. The /authenticate handler is tokenreview.New's, with its token cache
// and GitHub lookup; the units are the GitHub stand-in's X-RateLimit-Used for the token (a 304
// costs none, https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate).
// The kept answers live for StaleFor without a 304 (not scaled): at 60 s or at TTL/scale,
// a user whose calls never stop confirms them long before.
func rateLimitUnits(scale int) []string {
	ttl := tokenreview.DefaultCacheTTL / time.Duration(scale)
	hour := time.Hour / time.Duration(scale)
	runs := []*rateLimitRun{{name: "before (no conditional requests)"}, {name: "after (conditional requests)"}}
	var wg sync.WaitGroup
	for i, r := range runs {
		cacheBytes := -1
		if i == 1 {
			cacheBytes = 0 // the default
		}
		wg.Go(func() { r.measure(ttl, hour, cacheBytes) })
	}
	wg.Wait()

	fmt.Printf("\nGitHub rate limit: one user, kubectl calls that never stop, token cache TTL %v (time compressed %dx: TTL %v, hour %v), %d teams in one page\n",
		tokenreview.DefaultCacheTTL, scale, ttl, hour, rateLimitTeams)
	var problems []string
	for _, r := range runs {
		if r.err != nil {
			problems = append(problems, "ratelimit "+r.name+": "+r.err.Error())
			continue
		}
		fmt.Printf("  %-34s %4d rate-limit units per active user-hour  (%d lookups, %d GitHub requests, %d failed reviews)\n",
			r.name, r.units, r.lookups, r.calls, r.failed)
		if r.failed > 0 {
			problems = append(problems, fmt.Sprintf("ratelimit %s: %d reviews failed", r.name, r.failed))
		}
	}
	after := runs[1]
	if after.err == nil {
		verdict := "met"
		if after.units > rateLimitGoal {
			verdict = "MISSED"
			problems = append(problems, fmt.Sprintf("ratelimit: %d units per active user-hour, goal at most %d", after.units, rateLimitGoal))
		}
		fmt.Printf("TARGET rate-limit units per active user-hour %d <= %d: %s\n", after.units, rateLimitGoal, verdict)
		fmt.Printf("RATELIMIT before_units_per_user_hour=%d after_units_per_user_hour=%d\n", runs[0].units, after.units)
	}
	return problems
}

// rateLimitTeams is the measured user's teams.
const rateLimitTeams = 5

func (r *rateLimitRun) measure(ttl, hour time.Duration, cacheBytes int) {
	gh := githubapi.New()
	defer gh.Close()
	const token = "gho_ratelimit_octocat0cO0n8"
	gh.AddUser(githubUser("octocat", token, rateLimitTeams))
	h, err := tokenreview.New(tokenreview.Config{
		GitHubAPIURL:          gh.URL(),
		Orgs:                  []string{org},
		CacheTTL:              ttl,
		ConditionalCacheBytes: cacheBytes,
	})
	if err != nil {
		r.err = err
		return
	}
	body := tokenReview(token)
	every := ttl / 20
	for start := time.Now(); time.Since(start) < hour; time.Sleep(every) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authenticate", bytes.NewReader(body)))
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"authenticated":true`)) {
			r.failed++
		}
	}
	r.units, r.calls, r.lookups = gh.RateLimitUsed(token), gh.TokenCalls(token), gh.Calls("/user")
}
