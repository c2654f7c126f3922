package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/ownership"
)

func TestOwnersCheck(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"org-reader"}, Memberships: []githubapi.Membership{{Org: "acme", Role: "admin"}}})
	// bob was renamed bobby on GitHub: matched by id, checked under the new login.
	gh.AddUser(githubapi.User{Login: "bobby", ID: 1002, Memberships: []githubapi.Membership{{Org: "acme"}}})
	gh.AddUser(githubapi.User{Login: "carol", ID: 1003})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("org-reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := func(name, creator, uid string, orphaned bool) corev1.Namespace {
		a := map[string]string{ownership.AnnotationCreator: creator, "octogate.dev/creator-uid": uid}
		if orphaned {
			a[ownership.AnnotationOrphanedAt] = "2026-12-01T00:00:00Z"
		}
		return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: a}}
	}
	nss := []corev1.Namespace{
		ns("bob-a", "github:bob:1002", "1002", false), ns("bob-b", "github:bob:1002", "1002", false),
		ns("carol-a", "github:carol:1003", "1003", false),
		ns("gone-a", "github:gone:1099", "1099", false),
		ns("old-a", "github:old:1050", "1050", true),
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
	}
	checker := &ownership.MembershipChecker{Orgs: []string{"acme"}, TokenFile: tokenFile, APIURL: gh.URL()}
	for _, tc := range []struct {
		name    string
		checker *ownership.MembershipChecker
		want    []string
	}{
		{"without --check: orphaned or active from the annotations", nil, []string{
			"github:bob:1002 1002 active bob-a,bob-b -",
			"github:carol:1003 1003 active carol-a -",
			"github:gone:1099 1099 active gone-a -",
			"github:old:1050 1050 orphaned old-a -",
		}},
		{"--check asks GitHub by id: member, left, deleted account", checker, []string{
			"github:bob:1002 1002 active bob-a,bob-b bobby",
			"github:carol:1003 1003 left carol-a carol",
			"github:gone:1099 1099 left gone-a -",
			"github:old:1050 1050 orphaned old-a -",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := listOwners(context.Background(), &out, nss, tc.checker); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")[1:]
			if len(lines) != len(tc.want) {
				t.Fatalf("output:\n%s", out.String())
			}
			for i, l := range lines {
				if got := strings.Join(strings.Fields(l), " "); got != tc.want[i] {
					t.Errorf("line %d = %q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
}

func TestMembershipOrgsDropThePins(t *testing.T) {
	for value, want := range map[string][]string{
		"acme=2001, Umbrella": {"acme", "Umbrella"},
		"acme,*":              {"*", "acme"},
		"":                    {},
	} {
		got, err := membershipOrgs(strings.Split(value, ","))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("membershipOrgs(%q) = %q, %v; want %q", value, got, err, want)
		}
	}
	if _, err := membershipOrgs([]string{"acme=x"}); err == nil {
		t.Error(`membershipOrgs("acme=x"): want an error`)
	}
}
