package githubapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v57/github"
	"golang.org/x/oauth2"
)

func client(t *testing.T, s *Server, token string, enterprise bool) *github.Client {
	t.Helper()
	hc := s.Client()
	hc = &http.Client{Transport: &oauth2.Transport{
		Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}),
		Base:   hc.Transport,
	}}
	c := github.NewClient(hc)
	if enterprise {
		var err error
		c, err = c.WithEnterpriseURLs(s.URL(), s.URL())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(c.BaseURL.Path, "/api/v3/") {
			t.Fatalf("enterprise base %s", c.BaseURL)
		}
		return c
	}
	c.BaseURL, _ = url.Parse(s.URL())
	return c
}

func seeded(t *testing.T, tls bool) *Server {
	t.Helper()
	s := New()
	if tls {
		s.Close()
		s = NewTLS()
	}
	t.Cleanup(s.Close)
	teams := make([]Team, 0, 120)
	for i := range 120 {
		teams = append(teams, Team{Org: "Acme", Name: fmt.Sprintf("Team %03d", i)})
	}
	s.AddUser(User{Login: "Octocat", ID: 583231, Tokens: []string{"tok-octo"},
		Memberships: []Membership{{Org: "Acme"}, {Org: "umbrella", State: "pending"}}, Teams: teams})
	return s
}

func TestRESTThroughGoGitHub(t *testing.T) {
	ctx := context.Background()
	for _, enterprise := range []bool{false, true} {
		name := "api.github.com paths"
		if enterprise {
			name = "enterprise /api/v3 paths over TLS"
		}
		t.Run(name, func(t *testing.T) {
			s := seeded(t, enterprise)
			c := client(t, s, "tok-octo", enterprise)

			t.Run("GET /user answers the token's user", func(t *testing.T) {
				u, resp, err := c.Users.Get(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				if u.GetLogin() != "Octocat" || u.GetID() != 583231 || u.GetType() != "User" {
					t.Fatalf("user %+v", u)
				}
				if resp.Rate.Limit != 5000 || resp.Rate.Remaining <= 0 {
					t.Fatalf("rate %+v", resp.Rate)
				}
			})
			t.Run("bad token is 401 Bad credentials", func(t *testing.T) {
				_, _, err := client(t, s, "nope", enterprise).Users.Get(ctx, "")
				var er *github.ErrorResponse
				if !errors.As(err, &er) || er.Response.StatusCode != 401 || er.Message != "Bad credentials" {
					t.Fatalf("err %v", err)
				}
			})
			t.Run("membership is active, org name case-insensitive", func(t *testing.T) {
				m, _, err := c.Organizations.GetOrgMembership(ctx, "", "ACME")
				if err != nil {
					t.Fatal(err)
				}
				if m.GetState() != "active" || m.GetOrganization().GetLogin() != "Acme" || m.GetRole() != "member" {
					t.Fatalf("membership %+v", m)
				}
			})
			t.Run("pending invitation is state pending", func(t *testing.T) {
				m, _, err := c.Organizations.GetOrgMembership(ctx, "", "umbrella")
				if err != nil || m.GetState() != "pending" {
					t.Fatalf("membership %+v, %v", m, err)
				}
			})
			t.Run("non-member is 404", func(t *testing.T) {
				_, _, err := c.Organizations.GetOrgMembership(ctx, "", "initech")
				var er *github.ErrorResponse
				if !errors.As(err, &er) || er.Response.StatusCode != 404 {
					t.Fatalf("err %v", err)
				}
			})
			t.Run("teams are paginated with Link headers", func(t *testing.T) {
				var all []*github.Team
				opt := &github.ListOptions{PerPage: 50}
				for pages := 0; pages < 10; pages++ {
					ts, resp, err := c.Teams.ListUserTeams(ctx, opt)
					if err != nil {
						t.Fatal(err)
					}
					if pages == 0 && resp.LastPage != 3 {
						t.Fatalf("last page %d, want 3", resp.LastPage)
					}
					all = append(all, ts...)
					if resp.NextPage == 0 {
						break
					}
					opt.Page = resp.NextPage
				}
				if len(all) != 120 || all[0].GetSlug() != "team-000" || all[0].GetOrganization().GetLogin() != "Acme" {
					t.Fatalf("%d teams, first %+v", len(all), all[0])
				}
			})
		})
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	s := seeded(t, false)
	s.AddUser(User{Login: "hubot", Tokens: []string{"tok-hubot"}, Memberships: []Membership{{Org: "acme"}}})
	c := client(t, s, "tok-octo", false)

	t.Run("SAML SSO enforcement is 403 with X-GitHub-SSO", func(t *testing.T) {
		s.EnforceSSO("acme")
		defer s.ClearFaults()
		_, _, err := c.Organizations.GetOrgMembership(ctx, "", "acme")
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 403 ||
			!strings.HasPrefix(er.Response.Header.Get("X-GitHub-SSO"), "required; url=") {
			t.Fatalf("err %v", err)
		}
		ts, resp, err := c.Teams.ListUserTeams(ctx, nil)
		if err != nil || len(ts) != 0 || !strings.HasPrefix(resp.Header.Get("X-GitHub-SSO"), "partial-results") {
			t.Fatalf("teams %d, %v", len(ts), err)
		}
		s.AuthorizeSSO("tok-octo", "ACME")
		if _, _, err := c.Organizations.GetOrgMembership(ctx, "", "acme"); err != nil {
			t.Fatalf("after authorization: %v", err)
		}
	})
	t.Run("primary rate limit is 403 with remaining 0, for that token only", func(t *testing.T) {
		reset := time.Now().Add(time.Hour).Truncate(time.Second)
		s.RateLimit("tok-octo", reset)
		defer s.ClearFaults()
		_, _, err := client(t, s, "tok-octo", false).Users.Get(ctx, "")
		var rl *github.RateLimitError
		if !errors.As(err, &rl) || !rl.Rate.Reset.Time.Equal(reset) {
			t.Fatalf("err %v", err)
		}
		if _, _, err := client(t, s, "tok-hubot", false).Users.Get(ctx, ""); err != nil {
			t.Fatalf("other token: %v", err)
		}
	})
	t.Run("secondary rate limit is 429 with Retry-After", func(t *testing.T) {
		s.SecondaryRateLimit("", 30*time.Second)
		defer s.ClearFaults()
		_, _, err := client(t, s, "tok-octo", false).Users.Get(ctx, "")
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 429 || er.Response.Header.Get("Retry-After") != "30" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("injected 502 on one route, counted", func(t *testing.T) {
		s.ResetCalls()
		s.InjectFault(Fault{Endpoint: "/user", Status: 502, Count: 1})
		_, _, err := c.Users.Get(ctx, "")
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 502 {
			t.Fatalf("err %v", err)
		}
		if _, _, err := c.Users.Get(ctx, ""); err != nil {
			t.Fatalf("fault with Count 1 still there: %v", err)
		}
		if s.Calls("/user") != 2 || s.TokenCalls("tok-octo") != 2 {
			t.Fatalf("calls %d, token calls %d", s.Calls("/user"), s.TokenCalls("tok-octo"))
		}
	})
	t.Run("revoked token is 401", func(t *testing.T) {
		s.RevokeToken("tok-hubot")
		_, _, err := client(t, s, "tok-hubot", false).Users.Get(ctx, "")
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 401 {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("delay holds the answer and stop cuts it short", func(t *testing.T) {
		s.SetDelay(200 * time.Millisecond)
		start := time.Now()
		if _, _, err := c.Users.Get(ctx, ""); err != nil || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
		s.SetDelay(time.Minute)
		before := s.Calls("/user")
		errc := make(chan error, 1)
		go func() { _, _, err := client(t, s, "tok-octo", false).Users.Get(ctx, ""); errc <- err }()
		deadline := time.Now().Add(5 * time.Second)
		for s.Calls("/user") <= before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		s.Stop()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatal("request answered by a stopped server")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Stop did not end a delayed request")
		}
		s.SetDelay(0)
		if _, _, err := c.Users.Get(ctx, ""); err == nil {
			t.Fatal("stopped server answered")
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := client(t, s, "tok-octo", false).Users.Get(ctx, ""); err != nil {
			t.Fatalf("after restart: %v", err)
		}
	})
}

func TestDeviceFlow(t *testing.T) {
	s := seeded(t, false)
	conf := func() *oauth2.Config {
		return &oauth2.Config{ClientID: "Iv1.test", Scopes: []string{"read:org", "read:user"}, Endpoint: oauth2.Endpoint{
			DeviceAuthURL: s.URL() + "login/device/code",
			TokenURL:      s.URL() + "login/oauth/access_token",
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("approved after a pending poll: the token is the user's", func(t *testing.T) {
		s.SetDeviceFlow(DeviceFlow{ClientID: "Iv1.test", ApproveAs: "octocat", PendingPolls: 1})
		da, err := conf().DeviceAuth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if da.Interval != 1 || da.UserCode == "" || !strings.HasSuffix(da.VerificationURI, "/login/device") {
			t.Fatalf("device auth %+v", da)
		}
		tok, err := conf().DeviceAccessToken(ctx, da)
		if err != nil {
			t.Fatal(err)
		}
		u, _, err := client(t, s, tok.AccessToken, false).Users.Get(ctx, "")
		if err != nil || u.GetLogin() != "Octocat" {
			t.Fatalf("user %v, %v", u, err)
		}
	})
	for _, tc := range []struct {
		name, want string
		act        func(userCode string) error
	}{
		{"denied code is access_denied", "access_denied", s.DenyDevice},
		{"expired code is expired_token", "expired_token", s.ExpireDevice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.SetDeviceFlow(DeviceFlow{ClientID: "Iv1.test"})
			da, err := conf().DeviceAuth(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.act(da.UserCode); err != nil {
				t.Fatal(err)
			}
			_, err = conf().DeviceAccessToken(ctx, da)
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != tc.want {
				t.Fatalf("err %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("polls answer authorization_pending then slow_down in GitHub's form encoding", func(t *testing.T) {
		s.SetDeviceFlow(DeviceFlow{ClientID: "Iv1.test", SlowDownOnce: true})
		da, err := conf().DeviceAuth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		poll := func() url.Values {
			resp, err := http.PostForm(s.URL()+"login/oauth/access_token", url.Values{
				"client_id": {"Iv1.test"}, "device_code": {da.DeviceCode},
				"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			v, _ := url.ParseQuery(string(b))
			return v
		}
		if got := poll().Get("error"); got != "slow_down" {
			t.Fatalf("first poll %q", got)
		}
		if got := poll().Get("error"); got != "authorization_pending" {
			t.Fatalf("second poll %q", got)
		}
		if codes := s.PendingUserCodes(); len(codes) == 0 {
			t.Fatal("no pending user code")
		}
		if err := s.ApproveDevice(da.UserCode, "Octocat"); err != nil {
			t.Fatal(err)
		}
		if v := poll(); !strings.HasPrefix(v.Get("access_token"), "gho_") || v.Get("scope") != "read:org,read:user" {
			t.Fatalf("third poll %v", v)
		}
	})
	t.Run("unknown client id is refused", func(t *testing.T) {
		c := conf()
		c.ClientID = "other"
		if _, err := c.DeviceAuth(ctx); err == nil {
			t.Fatal("device code for an unknown client")
		}
	})
}

func TestServeFixture(t *testing.T) {
	f, err := LoadFixture("testdata/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, f) }()

	hc := &http.Client{Transport: &oauth2.Transport{
		Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "gho_demo_octocat33yZwT"}),
	}}
	c, err := github.NewClient(hc).WithEnterpriseURLs("http://"+l.Addr().String()+"/", "http://"+l.Addr().String()+"/")
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := c.Teams.ListUserTeams(context.Background(), nil)
	if err != nil || len(ts) != 1 || ts[0].GetSlug() != "platform-admins" {
		t.Fatalf("teams %v, %v", ts, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestFixtureValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Fixture
		want string
	}{
		{"user without login", Fixture{Users: []User{{}}}, "users[0].login"},
		{"duplicate login, any case", Fixture{Users: []User{{Login: "a"}, {Login: "A"}}}, "appears twice"},
		{"bad membership state", Fixture{Users: []User{{Login: "a", Memberships: []Membership{{Org: "o", State: "admin"}}}}}, "state"},
		{"device approves an unknown user", Fixture{Device: &DeviceFlow{ApproveAs: "ghost"}}, "device.approveAs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := newServer().Load(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if got := Slug("Platform  Admins!"); got != "platform-admins" {
		t.Fatalf("Slug = %q", got)
	}
}
