package tokenreview

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

func TestGitHubTokenKindsGetTheRightAnswer(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddOrg("umbrella", 3001)
	gh.AddUser(githubapi.User{Login: "ann", ID: 11,
		Memberships: []githubapi.Membership{{Org: "acme"}},
		Teams:       []githubapi.Team{{Org: "acme", Name: "Devs"}}})
	add := func(tok githubapi.Token) {
		if err := gh.AddTokenWith("ann", tok); err != nil {
			t.Fatal(err)
		}
	}
	add(githubapi.Token{Value: "github_pat_owner_acme", ResourceOwner: "acme", Permissions: map[string]string{"members": "read"}})
	add(githubapi.Token{Value: "github_pat_owner_ann", ResourceOwner: "ann", Permissions: map[string]string{"members": "read"}})
	add(githubapi.Token{Value: "github_pat_no_members", ResourceOwner: "acme", Permissions: map[string]string{"contents": "read"}})
	add(githubapi.Token{Value: "ghp_no_read_org1oNK6d", Scopes: []string{"repo:status", "read:user"}})
	add(githubapi.Token{Value: "ghp_admin_org04cmXd", Scopes: []string{"admin:org"}})
	gh.AddUser(githubapi.User{Login: "sam", ID: 12, Tokens: []string{"gho_sam4DEGOe"},
		Memberships: []githubapi.Membership{{Org: "acme"}, {Org: "umbrella"}},
		Teams:       []githubapi.Team{{Org: "acme", Name: "Devs"}, {Org: "umbrella", Name: "Ops"}}})
	gh.EnforceSSO("umbrella")

	for _, tc := range []struct {
		name      string
		orgs      []string
		token     string
		wantAuth  bool
		wantError []string
	}{
		{name: "fine-grained PAT owned by the org with Members read is admitted", token: "github_pat_owner_acme", wantAuth: true},
		{name: "fine-grained PAT owned by the user is refused as wrong_resource_owner saying what to create",
			token: "github_pat_owner_ann", wantError: []string{"[wrong_resource_owner]", "resource owner acme", `"Members" set to Read-only`}},
		{name: "fine-grained PAT without Members read is refused as missing_permission naming it",
			token: "github_pat_no_members", wantError: []string{"[missing_permission]", "members=read", "resource owner", `"Members"`}},
		{name: "classic token without read:org is refused naming the missing scope",
			token: "ghp_no_read_org1oNK6d", wantError: []string{"[missing_scope]", "read:org"}},
		{name: "classic token with admin:org (which includes read:org) is admitted", token: "ghp_admin_org04cmXd", wantAuth: true},
		{name: "teams hidden by SSO for a pinned allowed org are refused as sso_required",
			orgs: []string{"acme", "umbrella=3001"}, token: "gho_sam4DEGOe", wantError: []string{"[sso_required]", "umbrella", "partial-results"}},
		{name: "teams hidden by SSO for an org that is not allowed do not matter",
			orgs: []string{"acme"}, token: "gho_sam4DEGOe", wantAuth: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, gh, func(c *Config) {
				if tc.orgs != nil {
					c.Orgs = tc.orgs
				}
			})
			a := e.review(t, tc.token)
			if a.code != http.StatusOK || a.Status.Authenticated != tc.wantAuth {
				t.Fatalf("HTTP %d authenticated %v error %q", a.code, a.Status.Authenticated, a.Status.Error)
			}
			if tc.wantAuth {
				return
			}
			if !strings.HasPrefix(a.Status.Error, tc.wantError[0]) {
				t.Errorf("status.error %q does not start with %s", a.Status.Error, tc.wantError[0])
			}
			for _, w := range tc.wantError {
				if !strings.Contains(a.Status.Error, w) {
					t.Errorf("status.error %q does not say %q", a.Status.Error, w)
				}
			}
			if strings.Contains(a.Status.Error, "not an active member") {
				t.Errorf("status.error %q sends the user to the wrong fix", a.Status.Error)
			}
		})
	}
}

func TestLoginLockoutIsUnavailableAndNeverCachedAsARefusal(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "ann", ID: 11, Tokens: []string{"gho_ann4EQHND"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	e := newEnv(t, gh, nil)
	gh.LockOutLogins("ann", time.Now().Add(time.Hour))
	a := e.review(t, "gho_ann4EQHND")
	if a.code != http.StatusServiceUnavailable || !strings.HasPrefix(a.Status.Error, "[login_lockout]") {
		t.Fatalf("HTTP %d error %q, want 503 [login_lockout]", a.code, a.Status.Error)
	}
	// The lockout lifts: the next review asks GitHub again and authenticates, with no wait
	// for a negative cache entry.
	gh.LockOutLogins("ann", time.Time{})
	if a := e.review(t, "gho_ann4EQHND"); !a.Status.Authenticated {
		t.Fatalf("after the lockout: HTTP %d error %q", a.code, a.Status.Error)
	}
}

func TestReasonCodesLeadStatusErrorAndLabelTheReviewCounter(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "ann", ID: 11, Tokens: []string{"gho_ann4EQHND"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	gh.AddUser(githubapi.User{Login: "out", ID: 12, Tokens: []string{"gho_out3P5czp"}})
	gh.AddUser(githubapi.User{Login: "inv", ID: 13, Tokens: []string{"gho_inv4aHCDF"}, Memberships: []githubapi.Membership{{Org: "acme", State: "pending"}}})
	gh.AddUser(githubapi.User{Login: "lim", ID: 14, Tokens: []string{"gho_lim13Uyon"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	gh.RateLimit("gho_lim13Uyon", time.Now().Add(time.Hour))
	e := newEnv(t, gh, nil)
	for _, tc := range []struct {
		token          string
		result, reason string
		code           int
	}{
		{"gho_ann4EQHND", ResultAuthenticated, ReasonNone, 200},
		{"gho_unknown3Ab32d", ResultRefused, ReasonInvalidToken, 200},
		{"gho_out3P5czp", ResultRefused, ReasonNotMember, 200},
		{"gho_inv4aHCDF", ResultRefused, ReasonPendingInvitation, 200},
		{"ghs_install", ResultRefused, ReasonNotUserToken, 200},
		{"gho_lim13Uyon", ResultUnavailable, ReasonRateLimited, 503},
	} {
		t.Run(tc.token, func(t *testing.T) {
			a := e.review(t, tc.token)
			if a.code != tc.code {
				t.Fatalf("HTTP %d, want %d (%q)", a.code, tc.code, a.Status.Error)
			}
			if tc.reason != ReasonNone && !strings.HasPrefix(a.Status.Error, "["+tc.reason+"] ") {
				t.Errorf("status.error %q does not start with [%s]", a.Status.Error, tc.reason)
			}
			c := e.h.reviews.WithLabelValues(tc.result, tc.reason)
			if got := value(c); got != 1 {
				t.Errorf("octogate_token_reviews_total{result=%q,reason=%q} = %v, want 1", tc.result, tc.reason, got)
			}
		})
	}
	// The counter is registered under its documented name.
	mfs, err := e.reg.Gather()
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == "octogate_token_reviews_total" {
			n = len(mf.GetMetric())
		}
	}
	if err != nil || n != 6 {
		t.Fatalf("%d series of octogate_token_reviews_total (%v), want 6", n, err)
	}
	t.Run("GitHub failing and saturated lookups are unavailable with their codes", func(t *testing.T) {
		gh.InjectFault(githubapi.Fault{Status: 502})
		t.Cleanup(gh.ClearFaults)
		if a := e.review(t, "gho_new1yUoJp"); a.code != 503 || !strings.HasPrefix(a.Status.Error, "[github_unavailable] ") {
			t.Fatalf("HTTP %d %q", a.code, a.Status.Error)
		}
		if got := Reason(e.h.lookup.(*cache).errSaturated); got != ReasonSaturated {
			t.Fatalf("saturated reason %q", got)
		}
	})
}

func TestEveryReasonCodeIsDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons {
		if seen[r.Code] || r.Meaning == "" || r.Fix == "" || (r.Result != ResultRefused && r.Result != ResultUnavailable) {
			t.Errorf("reason %+v: duplicate or incomplete", r)
		}
		seen[r.Code] = true
	}
	for _, code := range []string{"invalid_token", "not_member", "pending_invitation", "sso_required", "missing_permission",
		"wrong_resource_owner", "token_type_refused", "org_id_mismatch", "rate_limited", "login_lockout", "github_unavailable", "saturated"} {
		if !seen[code] {
			t.Errorf("reason %s is missing", code)
		}
	}
}

// An authenticated review's reason code costs no allocation: Reason returns before the
// targets of errors.As, which escape, are made.
func TestReasonOfNoErrorAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Reason(nil) }); n != 0 {
		t.Fatalf("Reason(nil) allocates %v times, want 0", n)
	}
}
