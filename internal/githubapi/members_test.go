package githubapi

import (
	"context"
	"testing"
)

func TestOrgMembersThroughGoGitHub(t *testing.T) {
	s := New()
	t.Cleanup(s.Close)
	s.AddUser(User{Login: "owner", ID: 1, Tokens: []string{"owner-tok"}, Memberships: []Membership{{Org: "acme", Role: "admin"}}})
	s.AddUser(User{Login: "bob", ID: 1002, Tokens: []string{"bob-tok"}, Memberships: []Membership{{Org: "acme"}}})
	s.AddUser(User{Login: "outsider", ID: 7, Tokens: []string{"out-tok"}})
	ctx := context.Background()
	gh := client(t, s, "owner-tok", false)

	u, _, err := gh.Users.GetByID(ctx, 1002)
	if err != nil || u.GetLogin() != "bob" {
		t.Fatalf("GET /user/1002: %v %v", u, err)
	}
	if _, resp, err := gh.Users.GetByID(ctx, 999); err == nil || resp.StatusCode != 404 {
		t.Fatalf("unknown id: %v", err)
	}
	if ok, _, err := gh.Organizations.IsMember(ctx, "acme", "bob"); err != nil || !ok {
		t.Fatalf("bob is a member: %v %v", ok, err)
	}
	if ok, _, err := gh.Organizations.IsMember(ctx, "acme", "outsider"); err != nil || ok {
		t.Fatalf("outsider is not a member: %v %v", ok, err)
	}
	if _, err := client(t, s, "bob-tok", false).Organizations.RemoveMember(ctx, "acme", "owner"); err == nil {
		t.Fatal("a non-owner removed a member")
	}
	if _, err := gh.Organizations.RemoveMember(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := gh.Organizations.IsMember(ctx, "acme", "bob"); err != nil || ok {
		t.Fatalf("bob after removal: %v %v", ok, err)
	}
}
