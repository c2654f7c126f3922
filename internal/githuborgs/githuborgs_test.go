package githuborgs

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// org is the Org that Parse makes of an entry name[=id].
func org(name string, id int64) Org { return Org{Login: strings.ToLower(name), Name: name, ID: id} }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		want    List
		wantErr error
	}{
		{name: "names and a pinned name keep their order", entries: []string{"acme=2001", "umbrella"},
			want: List{Orgs: []Org{org("acme", 2001), org("umbrella", 0)}}},
		{name: "logins are lowercased, names kept as written", entries: []string{"ACME=2001", "Umbrella"},
			want: List{Orgs: []Org{org("ACME", 2001), org("Umbrella", 0)}}},
		{name: "spaces around entries and = are trimmed, blanks dropped", entries: []string{" acme = 2001 ", "", "  ", "umbrella "},
			want: List{Orgs: []Org{org("acme", 2001), org("umbrella", 0)}}},
		{name: "star is any user", entries: []string{"*"}, want: List{Any: true}},
		{name: "star with orgs", entries: []string{"acme", " * "}, want: List{Any: true, Orgs: []Org{org("acme", 0)}}},
		{name: "star twice is still any", entries: []string{"*", "*"}, want: List{Any: true}},
		{name: "nothing is the zero list", entries: nil, want: List{}},
		{name: "only blanks is the zero list", entries: []string{" ", ""}, want: List{}},
		{name: "39 characters", entries: []string{strings.Repeat("a", 39)}, want: List{Orgs: []Org{org(strings.Repeat("a", 39), 0)}}},
		{name: "one character", entries: []string{"x"}, want: List{Orgs: []Org{org("x", 0)}}},
		{name: "inner hyphens", entries: []string{"my-org-2"}, want: List{Orgs: []Org{org("my-org-2", 0)}}},
		{name: "largest id", entries: []string{"acme=9223372036854775807"}, want: List{Orgs: []Org{org("acme", 9223372036854775807)}}},

		{name: "40 characters", entries: []string{strings.Repeat("a", 40)}, wantErr: ErrLogin},
		{name: "leading hyphen", entries: []string{"-acme"}, wantErr: ErrLogin},
		{name: "trailing hyphen", entries: []string{"acme-"}, wantErr: ErrLogin},
		{name: "slash would change the request path", entries: []string{"acme/../x"}, wantErr: ErrLogin},
		{name: "underscore", entries: []string{"ac_me"}, wantErr: ErrLogin},
		{name: "non-ASCII letter", entries: []string{"acmé"}, wantErr: ErrLogin},
		{name: "inner space", entries: []string{"ac me"}, wantErr: ErrLogin},
		{name: "pin without a login", entries: []string{"=2001"}, wantErr: ErrLogin},
		{name: "star cannot be pinned", entries: []string{"*=1"}, wantErr: ErrLogin},
		{name: "id not a number", entries: []string{"acme=x"}, wantErr: ErrID},
		{name: "empty id", entries: []string{"acme="}, wantErr: ErrID},
		{name: "id zero", entries: []string{"acme=0"}, wantErr: ErrID},
		{name: "negative id", entries: []string{"acme=-1"}, wantErr: ErrID},
		{name: "id with a plus sign", entries: []string{"acme=+2001"}, wantErr: ErrID},
		{name: "id with a leading zero", entries: []string{"acme=02001"}, wantErr: ErrID},
		{name: "id beyond int64", entries: []string{"acme=9223372036854775808"}, wantErr: ErrID},
		{name: "two ids", entries: []string{"acme=1=2"}, wantErr: ErrID},
		{name: "org twice in another case", entries: []string{"acme=1", "ACME"}, wantErr: ErrTwice},
		{name: "org twice with the same pin", entries: []string{"acme=1", "acme=1"}, wantErr: ErrTwice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.entries)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Parse(%q) = %+v, %v; want %v", tc.entries, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.entries, err)
			}
			if got.Any != tc.want.Any || !slices.Equal(got.Orgs, tc.want.Orgs) {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.entries, got, tc.want)
			}
		})
	}
}

func TestErrorsQuoteTheEntry(t *testing.T) {
	for entries, want := range map[string]string{
		"acme/x":    `"acme/x" is not a GitHub organization login`,
		"acme=x":    `"acme=x": the id after = must be the organization's numeric id (gh api orgs/acme --jq .id)`,
		"Acme,acme": `"acme" is listed twice`,
	} {
		_, err := Parse(strings.Split(entries, ","))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want %q", entries, err, want)
		}
	}
}

func TestHelpers(t *testing.T) {
	l, err := Parse([]string{"Acme=2001", "umbrella"})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Logins(); !slices.Equal(got, []string{"acme", "umbrella"}) {
		t.Errorf("Logins = %q", got)
	}
	for _, tc := range []struct {
		login  string
		id     int64
		pinned bool
	}{{"acme", 2001, true}, {"ACME", 2001, true}, {"umbrella", 0, false}, {"initech", 0, false}} {
		if id, ok := l.Pin(tc.login); id != tc.id || ok != tc.pinned {
			t.Errorf("Pin(%q) = %d, %v; want %d, %v", tc.login, id, ok, tc.id, tc.pinned)
		}
	}
	for login, want := range map[string]bool{"acme": true, "Umbrella": true, "initech": false, "": false, "*": false} {
		if got := l.Allows(login); got != want {
			t.Errorf("Allows(%q) = %v, want %v", login, got, want)
		}
	}
	if got := l.Names(); !slices.Equal(got, []string{"Acme", "umbrella"}) {
		t.Errorf("Names = %q", got)
	}
	if got := l.String(); got != "Acme=2001,umbrella" {
		t.Errorf("String = %q", got)
	}
	anyUser := List{Any: true, Orgs: []Org{{Login: "acme", ID: 2001}, {Login: "umbrella"}}}
	if !anyUser.Allows("initech") || anyUser.String() != "*,acme=2001,umbrella" {
		t.Errorf("any: Allows(initech) = %v, String = %q", anyUser.Allows("initech"), anyUser.String())
	}
	if (List{}).Allows("acme") || (List{}).String() != "" {
		t.Error("the zero List allows nothing and writes as \"\"")
	}
}
