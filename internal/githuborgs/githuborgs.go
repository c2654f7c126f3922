// Package githuborgs parses OCTOGATE_GITHUB_ORGS (docs/configuration.md): the GitHub
// organizations whose members octogate admits, each optionally pinned to the organization's
// numeric id ("acme=2001,umbrella"), or "*" for any GitHub user. The TokenReview lookup, the
// GitHub Actions token verifier, the GitHub webhook and the serve command's validation all read
// the variable with Parse, so they agree on what it allows.
package githuborgs

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Org is one organization of the list.
type Org struct {
	// Login is the organization's login, lowercased: GitHub compares logins
	// case-insensitively.
	Login string
	// Name is the login as written in the entry, for messages: GitHub shows a login in the
	// case its owner chose ("Umbrella"). Empty: Login.
	Name string
	// ID is the numeric id the login is pinned to (GET /orgs/{org} .id,
	// https://docs.github.com/rest/orgs/orgs#get-an-organization); 0: not pinned. A pinned
	// login names that organization only: logins are freed by a rename and can be registered
	// by anyone, ids are never reused.
	ID int64
}

// List is a parsed OCTOGATE_GITHUB_ORGS. The zero List allows nothing.
type List struct {
	// Any is set by a "*" entry: any GitHub user (any repository owner, for Actions tokens).
	Any bool
	// Orgs are the named organizations in the order given, each once.
	Orgs []Org
}

// Errors of Parse, wrapped with the entry they refuse (errors.Is tells them apart).
var (
	ErrLogin = errors.New(`not a GitHub organization login (letters, digits, inner hyphens, at most 39 characters), LOGIN=ID, nor "*"`)
	ErrID    = errors.New("the id after = must be the organization's numeric id")
	ErrTwice = errors.New("listed twice")
)

// login is GitHub's rule for organization logins, as the new-organization and sign-up forms
// state it (https://github.com/account/organizations/new, https://github.com/join): letters,
// digits and hyphens, neither first nor last, at most 39 characters. Consecutive hyphens are
// not refused: the rule here only has to keep a login one safe segment of a request path
// (/orgs/{org}, /user/memberships/orgs/{org}).
var login = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$`)

// Parse reads the entries of OCTOGATE_GITHUB_ORGS (the variable split at ","):
//
//   - blank entries are skipped; spaces around an entry and around its "=" are trimmed;
//   - "*" sets Any (it cannot be pinned);
//   - LOGIN names an organization by its login (see Org.Login), refused with ErrLogin when it
//     breaks GitHub's login rule;
//   - LOGIN=ID also pins it to its numeric id: a positive decimal integer without sign or
//     leading zeros that fits in an int64 (`gh api orgs/LOGIN --jq .id`), else ErrID;
//   - a login listed twice, in any case, is refused with ErrTwice.
//
// An empty or all-blank list is no error: it parses to the zero List, and each caller says
// whether it needs one. Errors quote the entry; callers prefix their field or variable name.
func Parse(entries []string) (List, error) {
	var l List
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e == "*" {
			l.Any = true
			continue
		}
		name, idText, pinned := strings.Cut(e, "=")
		name, idText = strings.TrimSpace(name), strings.TrimSpace(idText)
		if !login.MatchString(name) {
			return List{}, fmt.Errorf("%q is %w", e, ErrLogin)
		}
		o := Org{Login: strings.ToLower(name), Name: name}
		if pinned {
			id, ok := parseID(idText)
			if !ok {
				return List{}, fmt.Errorf("%q: %w (gh api orgs/%s --jq .id)", e, ErrID, name)
			}
			o.ID = id
		}
		if l.has(o.Login) {
			return List{}, fmt.Errorf("%q is %w", name, ErrTwice)
		}
		l.Orgs = append(l.Orgs, o)
	}
	return l, nil
}

// parseID reads a positive decimal int64 written without sign or leading zeros.
func parseID(s string) (int64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

func (l List) has(lower string) bool {
	return slices.ContainsFunc(l.Orgs, func(o Org) bool { return o.Login == lower })
}

// Logins are the lowercased logins of l.Orgs, in order, without pins or "*".
func (l List) Logins() []string {
	out := make([]string, len(l.Orgs))
	for i, o := range l.Orgs {
		out[i] = o.Login
	}
	return out
}

// Names are the logins of l.Orgs as written (Org.Name), in order, without pins or "*".
func (l List) Names() []string {
	out := make([]string, len(l.Orgs))
	for i, o := range l.Orgs {
		out[i] = o.name()
	}
	return out
}

func (o Org) name() string {
	if o.Name == "" {
		return o.Login
	}
	return o.Name
}

// Pin is the id that login (any case) is pinned to, and whether it is listed and pinned.
func (l List) Pin(login string) (int64, bool) {
	lower := strings.ToLower(login)
	for _, o := range l.Orgs {
		if o.Login == lower {
			return o.ID, o.ID != 0
		}
	}
	return 0, false
}

// Allows reports whether an organization login (any case) is allowed: l.Any, or listed. It
// does not check pins: see Pin.
func (l List) Allows(login string) bool {
	return l.Any || l.has(strings.ToLower(login))
}

// String is l written back as OCTOGATE_GITHUB_ORGS: "*" first when Any, then NAME or
// NAME=ID per org (Org.Name), joined by ","; "" for the zero List. Parse of its split at ","
// gives l back.
func (l List) String() string {
	parts := make([]string, 0, len(l.Orgs)+1)
	if l.Any {
		parts = append(parts, "*")
	}
	for _, o := range l.Orgs {
		if o.ID != 0 {
			parts = append(parts, o.name()+"="+strconv.FormatInt(o.ID, 10))
		} else {
			parts = append(parts, o.name())
		}
	}
	return strings.Join(parts, ",")
}
