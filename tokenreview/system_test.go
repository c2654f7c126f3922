package tokenreview

import (
	"errors"
	"strings"
	"testing"
)

// A prefix starting with "system:" would turn the members of an allowed org named "masters"
// into group system:masters (cluster-admin): New refuses it.
func TestUsernamePrefixInTheSystemNamespaceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		prefix  string
		wantErr bool
	}{
		{"system:", true},
		{"system:github:", true},
		{"github:", false},
		{"", false},  // the default, github:
		{"-", false}, // no prefix
		{"sys", false},
		{"System:", false}, // Kubernetes names are case-sensitive: not the reserved namespace
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			_, err := New(Config{Orgs: []string{"masters"}, UsernamePrefix: tc.prefix})
			if (err != nil) != tc.wantErr {
				t.Fatalf("New with UsernamePrefix %q: err = %v, want error: %v", tc.prefix, err, tc.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), "UsernamePrefix") || !strings.Contains(err.Error(), `"system:"`)) {
				t.Errorf("error %q does not name UsernamePrefix and system:", err)
			}
		})
	}
}

// A prefix starting with "octogate:" would turn the members of an allowed org named "owner"
// into group octogate:owner, which only the proxy asserts: New refuses it.
func TestUsernamePrefixOfTheProxysGroupsIsRefused(t *testing.T) {
	for _, prefix := range []string{"octogate:", "octogate:rule:"} {
		_, err := New(Config{Orgs: []string{"owner"}, UsernamePrefix: prefix})
		if err == nil || !strings.Contains(err.Error(), "UsernamePrefix") || !strings.Contains(err.Error(), `"octogate:"`) {
			t.Errorf("New with UsernamePrefix %q: err = %v, want one naming UsernamePrefix and octogate:", prefix, err)
		}
	}
	if _, err := New(Config{Orgs: []string{"owner"}, UsernamePrefix: "octogate-"}); err != nil {
		t.Errorf("UsernamePrefix octogate-: %v", err)
	}
}

// Whatever the prefix, an account whose username or groups would start with "system:" is
// refused: without a prefix, the login "system" and the login:id format spell "system:1001".
func TestIdentityInTheSystemNamespaceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, prefix, format, login string
		wantRefused                 bool
	}{
		{"no prefix, login system, login:id", "-", UsernameFormatLoginID, "system", true},
		{"prefix sys, login tem, login:id", "sys", UsernameFormatLoginID, "tem", true},
		{"no prefix, login system, login format", "-", UsernameFormatLogin, "system", false},
		{"default prefix, login system", "", UsernameFormatLoginID, "system", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRules(Config{Orgs: []string{"masters"}, UsernamePrefix: tc.prefix, UsernameFormat: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			id, err := r.identity(githubUser{login: tc.login, id: 1001, memberships: []membership{{org: "masters", state: active}}})
			if !tc.wantRefused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if reservedName(id.Username, id.Groups) != "" {
					t.Fatalf("minted a reserved name: %+v", id)
				}
				return
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"system:1001"`) {
				t.Fatalf("identity = %+v, %v; want a refusal naming system:1001", id, err)
			}
		})
	}
}
