package githubapi

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Fixture is the initial content of a Server: users with their tokens, org memberships and
// teams, the orgs that enforce SAML SSO and the OAuth app that may use the device flow. It is
// read from YAML or JSON by LoadFixture; field names are the JSON tags.
type Fixture struct {
	Users []User `json:"users"`
	// SSOOrgs enforce SAML SSO: a token reaches their resources only after AuthorizeSSO (or a
	// user's ssoAuthorized list) names the org.
	SSOOrgs []string `json:"ssoOrgs,omitempty"`
	// Orgs gives orgs fixed numeric ids (others get the next free id when first named).
	Orgs []Org `json:"orgs,omitempty"`
	// Device configures the OAuth device flow. Nil: the device flow endpoints answer 404.
	Device *DeviceFlow `json:"device,omitempty"`
}

// User is one GitHub account.
type User struct {
	// Login as GitHub spells it, e.g. "Octocat"; looked up case-insensitively.
	Login string `json:"login"`
	// ID is the numeric account id. Zero: one is assigned.
	ID   int64  `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// Tokens authenticate as this user (any string; GitHub's look like gho_...).
	Tokens      []string     `json:"tokens,omitempty"`
	Memberships []Membership `json:"memberships,omitempty"`
	Teams       []Team       `json:"teams,omitempty"`
	// SSOAuthorized lists the SAML SSO orgs this user's fixture tokens are authorized for.
	SSOAuthorized []string `json:"ssoAuthorized,omitempty"`
}

// Membership is a user's membership of an org.
type Membership struct {
	Org string `json:"org"`
	// State is "active" or "pending" (an invitation not yet accepted). Empty means active.
	State string `json:"state,omitempty"`
	// Role is "member" or "admin". Empty means member.
	Role string `json:"role,omitempty"`
}

// Team is a team the user belongs to.
type Team struct {
	Org  string `json:"org"`
	Name string `json:"name"`
	// Slug is GitHub's URL name of the team. Empty: derived from Name ("Platform Admins" ->
	// "platform-admins").
	Slug string `json:"slug,omitempty"`
	ID   int64  `json:"id,omitempty"`
}

// DeviceFlow configures the OAuth device flow of one OAuth app.
type DeviceFlow struct {
	// ClientID the app must present; empty accepts any non-empty client id.
	ClientID string `json:"clientID,omitempty"`
	// ApproveAs is the login a device code is approved for automatically after PendingPolls
	// polls answered authorization_pending. Empty: codes wait for ApproveDevice or DenyDevice.
	// It is also the signed-in user who authorizes the web application flow at once; empty,
	// GET /login/oauth/authorize redirects back with error=access_denied.
	ApproveAs    string `json:"approveAs,omitempty"`
	PendingPolls int    `json:"pendingPolls,omitempty"`
	// Interval is the minimum polling interval in seconds told to the client (GitHub: 5).
	// Zero means 1, which keeps tests fast.
	Interval int `json:"interval,omitempty"`
	// ExpiresIn is the device code lifetime in seconds (GitHub: 900). Zero means 900.
	ExpiresIn int `json:"expiresIn,omitempty"`
	// SlowDownOnce answers the first poll of every code with slow_down.
	SlowDownOnce bool `json:"slowDownOnce,omitempty"`

	// GitHubApp makes the app a GitHub App with expiring user access tokens (the default for
	// a new GitHub App): tokens start with ghu_, expire after TokenExpiresIn and come with a
	// single-use refresh token (ghr_) that lives RefreshTokenExpiresIn; using it rotates both.
	// False: an OAuth app, whose gho_ tokens do not expire and come without a refresh token.
	// Source: https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens
	GitHubApp bool `json:"githubApp,omitempty"`
	// TokenExpiresIn is a GitHub App user access token's lifetime in seconds. Zero means
	// GitHub's 28800 (8 hours).
	TokenExpiresIn int `json:"tokenExpiresIn,omitempty"`
	// RefreshTokenExpiresIn is a refresh token's lifetime in seconds. Zero means GitHub's
	// 15897600 (6 months).
	RefreshTokenExpiresIn int `json:"refreshTokenExpiresIn,omitempty"`
	// ClientSecret, when set, must be sent with the web application flow's code exchange
	// (GitHub requires it there) and, when sent, with a refresh. A device-flow client sends
	// none. Source: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#2-users-are-redirected-back-to-your-site-by-github
	ClientSecret string `json:"clientSecret,omitempty"`
	// CallbackURL is the app's registered callback URL for the web application flow. Empty
	// means http://127.0.0.1/callback. For a loopback callback, GitHub accepts a redirect_uri
	// on any port. Source: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#loopback-redirect-urls
	CallbackURL string `json:"callbackURL,omitempty"`
}

// LoadFixture reads a Fixture from a YAML or JSON file and checks it.
func LoadFixture(path string) (Fixture, error) {
	var f Fixture
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return f, fmt.Errorf("githubapi fixture %s: %w", path, err)
	}
	if err := f.validate(); err != nil {
		return f, fmt.Errorf("githubapi fixture %s: %w", path, err)
	}
	return f, nil
}

func (f Fixture) validate() error {
	seen := map[string]bool{}
	for i, u := range f.Users {
		if u.Login == "" {
			return fmt.Errorf("users[%d].login: empty", i)
		}
		if seen[strings.ToLower(u.Login)] {
			return fmt.Errorf("users[%d].login: %q appears twice", i, u.Login)
		}
		seen[strings.ToLower(u.Login)] = true
		for j, m := range u.Memberships {
			if m.Org == "" {
				return fmt.Errorf("users[%d].memberships[%d].org: empty", i, j)
			}
			if m.State != "" && m.State != "active" && m.State != "pending" {
				return fmt.Errorf("users[%d].memberships[%d].state: %q, want active or pending", i, j, m.State)
			}
		}
		for j, t := range u.Teams {
			if t.Org == "" || t.Name == "" {
				return fmt.Errorf("users[%d].teams[%d]: org and name are required", i, j)
			}
		}
	}
	if d := f.Device; d != nil && d.ApproveAs != "" && !seen[strings.ToLower(d.ApproveAs)] {
		return fmt.Errorf("device.approveAs: no user %q", d.ApproveAs)
	}
	return nil
}

// Slug is GitHub's team slug for a team name: lowercased, runs of other characters than
// letters and digits become one "-".
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}
