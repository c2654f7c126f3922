package ownership

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// TestIsMemberAsksGitHubNow: a removal is confirmed against GitHub's answer of the moment, by
// id (the login is looked up), and a token whose owner cannot see the org's private members
// (GitHub's 302 to the public-membership URL) is an error, never "not a member".
func TestIsMemberAsksGitHubNow(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	if err := gh.Load(cluster.Fixture()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	checker := func(token string) *MembershipChecker {
		f := filepath.Join(dir, token)
		if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return &MembershipChecker{Orgs: []string{cluster.Org}, TokenFile: f, APIURL: gh.URL()}
	}
	ctx := context.Background()
	alice := checker(cluster.AliceToken)
	bob := strconv.Itoa(cluster.BobID)

	if ok, err := alice.IsMember(ctx, cluster.Org, bob); !ok || err != nil {
		t.Fatalf("bob, a member: IsMember = %v, %v", ok, err)
	}
	if err := gh.SetMembership("bob", cluster.Org, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := alice.IsMember(ctx, cluster.Org, bob); ok || err != nil {
		t.Fatalf("bob removed: IsMember = %v, %v", ok, err)
	}
	if ok, err := alice.IsMember(ctx, cluster.Org, "999999"); ok || err != nil {
		t.Fatalf("a deleted account: IsMember = %v, %v", ok, err)
	}
	if err := gh.SetMembership("bob", cluster.Org, "active"); err != nil {
		t.Fatal(err)
	}
	if ok, err := checker(cluster.CarolToken).IsMember(ctx, cluster.Org, bob); err == nil {
		t.Fatalf("a token of a non-member of the org: IsMember = %v without an error", ok)
	}
}
