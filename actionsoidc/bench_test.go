package actionsoidc

import (
	"context"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// BenchmarkLookupUncached verifies an RS256 signature and the claims on every review.
func BenchmarkLookupUncached(b *testing.B) { benchLookup(b, time.Nanosecond) }

// BenchmarkLookupCached answers a token verified before: SHA-256 and an LRU hit.
func BenchmarkLookupCached(b *testing.B) { benchLookup(b, 0) }

func benchLookup(b *testing.B, ttl time.Duration) {
	iss := githubapi.NewActionsIssuer()
	b.Cleanup(iss.Close)
	v, err := New(Config{Issuer: iss.URL(), Audience: audience, Orgs: []string{"acme"}, HTTPClient: iss.Client(), CacheTTL: ttl})
	if err != nil {
		b.Fatal(err)
	}
	tok := iss.Mint(claims(deploy, nil))
	ctx := context.Background()
	if _, err := v.Lookup(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Lookup(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
