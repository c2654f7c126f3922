package actionsoidc

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/internal/jwks"
)

// Config configures New. Zero durations and sizes take the defaults below.
type Config struct {
	// Issuer is the exact iss of accepted tokens and the base of OIDC discovery
	// (OCTOGATE_ACTIONS_ISSUER, default DefaultIssuer; GitHub Enterprise Server:
	// https://HOST/_services/token).
	Issuer string
	// Audience is the aud a token must hold (OCTOGATE_ACTIONS_AUDIENCE); required. Workflows ask
	// for it with `octogate credential --github-actions=AUDIENCE`.
	Audience string
	// Orgs is OCTOGATE_GITHUB_ORGS (read by githuborgs.Parse): a token's repository_owner must
	// be one of them, compared case-insensitively; "org=ID" also requires repository_owner_id
	// to be ID; "*" admits any owner. Required.
	Orgs []string
	// Subjects are globs over the sub claim (OCTOGATE_ACTIONS_SUBJECTS), "*" standing for any
	// run of characters, e.g. "repo:acme/deploy:environment:production" or
	// "repo:acme/*:ref:refs/heads/main". Empty: any sub.
	Subjects []string
	// CAFile is a PEM bundle trusted for the issuer in addition to the system roots
	// (OCTOGATE_GITHUB_CA_FILE).
	CAFile string
	// Timeout bounds each fetch of the discovery document or key set (default 5s).
	Timeout time.Duration
	// CacheTTL bounds how long a verified token's identity is reused without verifying its
	// signature again; never past the token's exp (default 60s).
	CacheTTL time.Duration
	// CacheSize bounds the cached tokens (LRU, keyed by SHA-256; default 10000).
	CacheSize int
	// Logger receives key set fetch failures (never a token). Nil: discard.
	Logger *slog.Logger
	// HTTPClient fetches discovery and keys; nil: one built from CAFile and Timeout.
	HTTPClient *http.Client
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Defaults and bounds.
const (
	// DefaultIssuer is the issuer of GitHub.com's Actions tokens.
	DefaultIssuer = "https://token.actions.githubusercontent.com"
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway = 60 * time.Second
	// MinRefreshInterval is the least time between two fetches of the issuer's keys.
	MinRefreshInterval = 10 * time.Second
	// MaxTokenBytes bounds a token this package parses; GitHub's are about 1-2 KiB.
	MaxTokenBytes = 16 << 10

	defaultTimeout   = 5 * time.Second
	defaultCacheTTL  = 60 * time.Second
	defaultCacheSize = 10000
)

// parseOrgs reads OCTOGATE_GITHUB_ORGS (githuborgs.Parse) and requires at least one org or
// "*". text names the allowed owners for refusals.
func parseOrgs(entries []string) (orgs githuborgs.List, text string, err error) {
	orgs, err = githuborgs.Parse(entries)
	if err != nil {
		return githuborgs.List{}, "", fmt.Errorf("actionsoidc: Orgs: %w", err)
	}
	if len(orgs.Orgs) == 0 && !orgs.Any {
		return githuborgs.List{}, "", errors.New(`actionsoidc: Orgs: empty; name at least one GitHub organization, or "*" to admit any owner`)
	}
	if orgs.Any {
		return orgs, "any owner", nil
	}
	return orgs, strings.ReplaceAll(orgs.String(), ",", ", "), nil
}

func validIssuer(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want an https URL such as " + DefaultIssuer)
	}
	return nil
}

func httpClient(caFile string, timeout time.Duration) (*http.Client, error) {
	c, err := jwks.HTTPClient(caFile, timeout)
	if err != nil {
		return nil, fmt.Errorf("actionsoidc: %w", err)
	}
	return c, nil
}

// clip shortens a string quoted from a token for a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
