package githuborgs

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParse: any OCTOGATE_GITHUB_ORGS value parses without panicking, and a list that parses
// is written back by String as a value that parses to the same list.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"acme=2001,umbrella", "*", " acme = 2001 , *", "", " , ", "acme,ACME", "acme=0", "=1", "*=1",
		"acme=9223372036854775808", "a--b", "-a", "acme/../x", "acme=1=2", "ac\x00me",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		l, err := Parse(strings.Split(value, ","))
		if err != nil {
			return
		}
		for _, o := range l.Orgs {
			if o.Login != strings.ToLower(o.Name) || !login.MatchString(o.Login) || o.ID < 0 || !l.Allows(o.Login) {
				t.Fatalf("Parse(%q) gave %+v", value, o)
			}
		}
		back, err := Parse(strings.Split(l.String(), ","))
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", value, l.String(), err)
		}
		if back.Any != l.Any || !slices.Equal(back.Orgs, l.Orgs) {
			t.Fatalf("Parse(%q) = %+v, but its String %q parses to %+v", value, l, l.String(), back)
		}
	})
}
