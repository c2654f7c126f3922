package tokenreview

import (
	"testing"
)

func TestUsernameFormats(t *testing.T) {
	original := githubUser{login: "Alice", id: 1001, memberships: []membership{{org: "acme", state: active}}}
	// GitHub freed "alice" when the first account was renamed; another account registered it.
	recycled := githubUser{login: "alice", id: 2001, memberships: []membership{{org: "acme", state: active}}}
	for _, tc := range []struct {
		format            string
		original, recycle string
	}{
		{"", "github:alice:1001", "github:alice:2001"},
		{UsernameFormatLoginID, "github:alice:1001", "github:alice:2001"},
		{UsernameFormatID, "github:1001", "github:2001"},
		{UsernameFormatLogin, "github:alice", "github:alice"},
	} {
		t.Run("format "+tc.format, func(t *testing.T) {
			r, err := newRules(Config{Orgs: []string{"acme"}, UsernameFormat: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.identity(original)
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.identity(recycled)
			if err != nil {
				t.Fatal(err)
			}
			if a.Username != tc.original || b.Username != tc.recycle {
				t.Errorf("usernames %q and %q, want %q and %q", a.Username, b.Username, tc.original, tc.recycle)
			}
			if a.UID != "1001" || b.UID != "2001" {
				t.Errorf("uids %q and %q, want the numeric ids in every format", a.UID, b.UID)
			}
			if tc.format != UsernameFormatLogin && a.Username == b.Username {
				t.Errorf("two GitHub accounts share username %q", a.Username)
			}
		})
	}
}

func TestUnknownUsernameFormatIsRefused(t *testing.T) {
	if _, err := newRules(Config{Orgs: []string{"acme"}, UsernameFormat: "email"}); err == nil {
		t.Fatal("UsernameFormat email accepted")
	}
}
