package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v57/github"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"

	"github.com/octogate/octogate/admission"
)

// Creator states reported by Creators and MembershipChecker.
const (
	StateActive   = "active"   // an active member of an allowed org (checked), or not orphaned (unchecked)
	StateOrphaned = "orphaned" // every namespace of the creator is orphaned
	StateLeft     = "left"     // the check found no active membership: orphaned by the check (a dry run only reports it)
	StateUnknown  = "unknown"  // the check could not tell (GitHub error, unknown id)
)

// Creator is one creator uid and the namespaces they created.
type Creator struct {
	UID        string
	Username   string // octogate.dev/creator of their newest namespace
	Login      string // the current GitHub login, when checked
	Namespaces []string
	Orphaned   int // how many of Namespaces are orphaned
	State      string
	Detail     string
}

// Creators groups the live Namespaces with a creator uid by uid, sorted by username. State is
// StateOrphaned when all of a creator's namespaces are orphaned, else StateActive.
func Creators(nss []corev1.Namespace) []Creator {
	byUID := map[string]*Creator{}
	for _, ns := range nss {
		uid := ns.Annotations[admission.AnnotationCreatorUID]
		if uid == "" || ns.DeletionTimestamp != nil {
			continue
		}
		c := byUID[uid]
		if c == nil {
			c = &Creator{UID: uid}
			byUID[uid] = c
		}
		c.Username = ns.Annotations[AnnotationCreator]
		c.Namespaces = append(c.Namespaces, ns.Name)
		if Orphaned(&ns) {
			c.Orphaned++
		}
	}
	out := make([]Creator, 0, len(byUID))
	for _, c := range byUID {
		slices.Sort(c.Namespaces)
		c.State = StateActive
		if c.Orphaned == len(c.Namespaces) {
			c.State = StateOrphaned
		}
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Creator) int { return strings.Compare(a.Username+a.UID, b.Username+b.UID) })
	return out
}

// MembershipChecker checks, by GitHub id, whether namespace creators are still active members
// of an allowed org, with a token that can read org membership (read:org): it resolves the
// id's current login (GET /user/{id}, https://docs.github.com/rest/users/users#get-a-user-using-their-id;
// logins change) and asks GET /orgs/{org}/members/{username} (204 member, 404 not;
// https://docs.github.com/rest/orgs/members#check-organization-membership-for-a-user).
type MembershipChecker struct {
	// Orgs are the allowed orgs (OCTOGATE_GITHUB_ORGS); "*" cannot be checked.
	Orgs []string
	// TokenFile holds the token (OCTOGATE_GITHUB_ORG_TOKEN_FILE); read at each check, so a
	// rotated token is picked up.
	TokenFile string
	// APIURL is the REST base (default https://api.github.com/).
	APIURL string
	// Transport is the HTTP transport (nil: http.DefaultTransport).
	Transport http.RoundTripper
}

// Client is a go-github client with the token read from TokenFile now.
func (m *MembershipChecker) Client() (*github.Client, error) {
	b, err := os.ReadFile(m.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_GITHUB_ORG_TOKEN_FILE: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, errors.New("OCTOGATE_GITHUB_ORG_TOKEN_FILE is empty")
	}
	base := m.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	// GitHub answers 302 to the public-membership URL when the token's owner is no member of
	// the org; following it would take a private member's 404 there for "not a member".
	c := github.NewClient(&http.Client{Timeout: 10 * time.Second, Transport: &oauth2.Transport{
		Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok}), Base: base},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	if m.APIURL != "" {
		u, err := url.Parse(strings.TrimSuffix(m.APIURL, "/") + "/")
		if err != nil {
			return nil, err
		}
		c.BaseURL = u
	}
	return c, nil
}

// IsMember asks GitHub now, with the token read from TokenFile, whether the GitHub user id uid
// is an active member of org: GET /user/{id} for their current login (a deleted account, 404,
// is a member of nothing), then GET /orgs/{org}/members/{login} (204 member, 404 not; a 302
// means the token's owner is not a member of org, and is an error, as any other answer).
// A webhook delivery of a removal is acted on only when GitHub confirms it this way.
func (m *MembershipChecker) IsMember(ctx context.Context, org, uid string) (bool, error) {
	gh, err := m.Client()
	if err != nil {
		return false, err
	}
	id, err := strconv.ParseInt(uid, 10, 64)
	if err != nil {
		return false, fmt.Errorf("uid %q is not a GitHub user id", uid)
	}
	u, resp, err := gh.Users.GetByID(ctx, id)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return false, nil
		}
		return false, err
	}
	return m.member(ctx, gh, org, u.GetLogin(), nil)
}

// member asks GET /orgs/{org}/members/{login}, updating *rate when not nil.
func (m *MembershipChecker) member(ctx context.Context, gh *github.Client, org, login string, rate *github.Rate) (bool, error) {
	ok, resp, err := gh.Organizations.IsMember(ctx, org, login)
	if resp != nil && rate != nil {
		*rate = resp.Rate
	}
	if resp != nil && resp.StatusCode == http.StatusFound {
		return false, fmt.Errorf("the token's owner is not a member of %s, so GitHub does not tell its private members", org)
	}
	return ok, err
}

// Check returns StateActive or StateLeft for the GitHub user id uid, with their current login,
// and the rate limit left for the token. An error means StateUnknown.
func (m *MembershipChecker) Check(ctx context.Context, gh *github.Client, uid string) (state, login string, rate github.Rate, err error) {
	id, err := strconv.ParseInt(uid, 10, 64)
	if err != nil {
		return StateUnknown, "", rate, fmt.Errorf("uid %q is not a GitHub user id", uid)
	}
	u, resp, err := gh.Users.GetByID(ctx, id)
	if resp != nil {
		rate = resp.Rate
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			// The account is gone (deleted): it is a member of nothing.
			return StateLeft, "", rate, nil
		}
		return StateUnknown, "", rate, err
	}
	login = u.GetLogin()
	for _, org := range m.Orgs {
		ok, err := m.member(ctx, gh, org, login, &rate)
		if err != nil {
			return StateUnknown, login, rate, err
		}
		if ok {
			return StateActive, login, rate, nil
		}
	}
	return StateLeft, login, rate, nil
}

// Periodic runs the check of every distinct creator not yet orphaned every period, spread
// over the period (one creator every period/n) and never below the token's rate limit: when
// fewer than 10 calls are left it waits for the reset. Creators found StateLeft are orphaned
// with reason "no longer an active member of ... (periodic membership check)". It is a
// manager.Runnable that needs leader election.
type Periodic struct {
	Checker  *MembershipChecker
	Orphaner *Orphaner
	Period   time.Duration
	Log      *slog.Logger
}

// NeedLeaderElection: one replica checks.
func (p *Periodic) NeedLeaderElection() bool { return true }

// Start runs until ctx ends.
func (p *Periodic) Start(ctx context.Context) error {
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	if slices.Contains(p.Checker.Orgs, "*") {
		log.Warn("periodic membership check is off: OCTOGATE_GITHUB_ORGS=* admits any GitHub user")
		return nil
	}
	log.Info("periodic membership check of namespace creators", "period", p.Period, "orgs", strings.Join(p.Checker.Orgs, ","))
	for {
		start := time.Now()
		if err := p.round(ctx, log); err != nil && ctx.Err() == nil {
			log.Error("membership check failed", "err", err)
		}
		if !sleep(ctx, p.Period-time.Since(start)) {
			return nil
		}
	}
}

func (p *Periodic) round(ctx context.Context, log *slog.Logger) error {
	var list corev1.NamespaceList
	if err := p.Orphaner.client.List(ctx, &list); err != nil {
		return err
	}
	var todo []Creator
	for _, c := range Creators(list.Items) {
		if c.State != StateOrphaned {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	step := p.Period / time.Duration(len(todo))
	for _, c := range todo {
		next := time.Now().Add(step)
		gh, err := p.Checker.Client()
		if err != nil {
			return err
		}
		state, login, rate, err := p.Checker.Check(ctx, gh, c.UID)
		switch {
		case err != nil:
			log.Warn("membership check: could not tell", "uid", c.UID, "creator", c.Username, "err", err)
		case state == StateLeft:
			reason := fmt.Sprintf("no longer an active member of %s (periodic membership check)", strings.Join(p.Checker.Orgs, ", "))
			if n, err := p.Orphaner.Orphan(ctx, c.UID, reason); err != nil {
				log.Error("membership check: orphaning failed", "uid", c.UID, "login", login, "err", err)
			} else {
				log.Info("membership check: creator left", "uid", c.UID, "login", login, "orphaned", n)
			}
		}
		wait := time.Until(next)
		if rate.Limit > 0 && rate.Remaining < 10 {
			wait = max(wait, time.Until(rate.Reset.Time))
		}
		if !sleep(ctx, wait) {
			return nil
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
