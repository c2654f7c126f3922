package tokenreview

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

func TestOrgPinning(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddOrg("umbrella", 3001)
	gh.AddUser(githubapi.User{Login: "ann", ID: 11, Tokens: []string{"tok-ann"},
		Memberships: []githubapi.Membership{{Org: "acme"}},
		Teams:       []githubapi.Team{{Org: "acme", Name: "Platform Admins"}}})
	gh.AddUser(githubapi.User{Login: "both", ID: 12, Tokens: []string{"tok-both"},
		Memberships: []githubapi.Membership{{Org: "acme"}, {Org: "umbrella"}},
		Teams:       []githubapi.Team{{Org: "acme", Name: "Ops"}, {Org: "umbrella", Name: "Ops"}}})

	for _, tc := range []struct {
		name       string
		orgs       []string
		token      string
		wantGroups []string
		wantError  []string
	}{
		{
			name: "member of the pinned org with the pinned id is admitted with its team groups",
			orgs: []string{"acme=2001"}, token: "tok-ann",
			wantGroups: []string{"github:acme", "github:acme/platform-admins"},
		},
		{
			name: "membership of an org whose id differs from the pin is refused naming the org and both ids",
			orgs: []string{"acme=9999"}, token: "tok-ann",
			wantError: []string{"[org_id_mismatch]", "acme", "2001", "9999"},
		},
		{
			name: "an unpinned org next to a pinned one is compared by name",
			orgs: []string{"acme=9999", "umbrella"}, token: "tok-both",
			wantGroups: []string{"github:umbrella", "github:umbrella/ops"},
		},
		{
			name: "pins are per org: both pinned right gives both orgs' teams",
			orgs: []string{"ACME=2001", "umbrella=3001"}, token: "tok-both",
			wantGroups: []string{"github:acme", "github:umbrella", "github:acme/ops", "github:umbrella/ops"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, gh, func(c *Config) { c.Orgs = tc.orgs })
			a := e.review(t, tc.token)
			if a.code != http.StatusOK || a.Status.Authenticated != (tc.wantGroups != nil) {
				t.Fatalf("HTTP %d authenticated %v error %q", a.code, a.Status.Authenticated, a.Status.Error)
			}
			if tc.wantGroups != nil && !slices.Equal(a.Status.User.Groups, tc.wantGroups) {
				t.Errorf("groups %q, want %q", a.Status.User.Groups, tc.wantGroups)
			}
			for _, w := range tc.wantError {
				if !strings.Contains(a.Status.Error, w) {
					t.Errorf("status.error %q does not say %q", a.Status.Error, w)
				}
			}
			if tc.wantError != nil && !strings.HasPrefix(a.Status.Error, tc.wantError[0]) {
				t.Errorf("status.error %q does not start with its code %s", a.Status.Error, tc.wantError[0])
			}
		})
	}
}

func TestTeamGroupsOnlyFromTeamsOfThePinnedOrgID(t *testing.T) {
	r, err := newRules(Config{Orgs: []string{"acme=2001"}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.identity(githubUser{login: "ann", id: 11,
		memberships: []membership{{org: "acme", id: 2001, state: active}},
		teams: []teamRef{
			{org: "acme", orgID: 2001, slug: "devs"},
			// A team of a different org that GitHub spells acme (a recycled name).
			{org: "acme", orgID: 7777, slug: "platform-admins"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"github:acme", "github:acme/devs"}; !slices.Equal(id.Groups, want) {
		t.Fatalf("groups %q, want %q", id.Groups, want)
	}
}

func TestOrgsConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		orgs []string
		want string // error substring, "" for valid
		pins map[string]int64
	}{
		{name: "name and pinned name", orgs: []string{"acme=2001", "umbrella"}, pins: map[string]int64{"acme": 2001}},
		{name: "pin is case-insensitive", orgs: []string{"Acme=2001"}, pins: map[string]int64{"acme": 2001}},
		{name: "id must be a number", orgs: []string{"acme=x"}, want: "numeric id"},
		{name: "id must be positive", orgs: []string{"acme=0"}, want: "numeric id"},
		{name: "empty id", orgs: []string{"acme="}, want: "numeric id"},
		{name: "no name", orgs: []string{"=2001"}, want: "not a GitHub organization login"},
		{name: "star cannot be pinned", orgs: []string{"*=1"}, want: "not a GitHub organization login"},
		{name: "org twice", orgs: []string{"acme=1", "ACME"}, want: "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRules(Config{Orgs: tc.orgs})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for org, id := range tc.pins {
				if pin, _ := r.orgs.Pin(org); pin != id {
					t.Errorf("orgs %v, want %s=%d", r.orgs, org, id)
				}
			}
		})
	}
}
