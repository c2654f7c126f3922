package fleet

import (
	"os"
	"testing"
)

func mustParseFile(t testing.TB, path string) *SessionClusters {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestAllowedDecisionTable(t *testing.T) {
	doc := mustParseFile(t, "testdata/clusters.yaml")
	byName := map[string]Cluster{}
	for _, c := range doc.Clusters {
		byName[c.Name] = c
	}
	alice := []string{"github:acme", "github:acme/sre"}
	bob := []string{"github:acme", "github:acme/web"}
	for _, tc := range []struct {
		name    string
		cluster string
		user    string
		groups  []string
		want    bool
	}{
		{"a member of the team a cluster names may use it", "prod", "github:alice:1001", alice, true},
		{"a member of another team may not", "prod", "github:bob:1002", bob, false},
		{"an org member of no team may not", "prod", "github:dave:1004", []string{"github:acme"}, false},
		{"a group name is not a user name", "prod", "github:acme/sre", nil, false},
		{"a team of the same slug in another org may not", "prod", "github:eve:1005", []string{"github:other/sre"}, false},
		{"a cluster without subjects is every member's", "staging", "github:bob:1002", bob, true},
		{"a cluster without subjects is every member's, even of no team", "staging", "github:dave:1004", []string{"github:acme"}, true},
		{"a user subject matches the username exactly", "dev", "github:carol:1003", nil, true},
		{"a user subject does not match another id of the same login", "dev", "github:carol:9999", nil, false},
		{"a group prefix matches every team it covers", "dev", "github:frank:1006", []string{"github:acme/team-a"}, true},
		{"a group prefix does not match the bare org", "dev", "github:bob:1002", bob, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Allowed(byName[tc.cluster], tc.user, tc.groups); got != tc.want {
				t.Errorf("Allowed(%s, %s, %v) = %v, want %v", tc.cluster, tc.user, tc.groups, got, tc.want)
			}
		})
	}
}

func TestStoreUnionOfAudiencesAndFile(t *testing.T) {
	s, err := New(Config{File: "testdata/clusters.yaml", Audiences: []string{"legacy", "prod", " legacy "}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); len(got) != 4 || got[0] != "dev" || got[1] != "legacy" || got[2] != "prod" || got[3] != "staging" {
		t.Fatalf("names %v, want dev legacy prod staging", got)
	}
	if !s.Serves("legacy") || s.Serves("qa") {
		t.Error("a listed audience is served, an unknown one is not")
	}
	if !s.Allows("legacy", "github:bob:1002", nil) {
		t.Error("an audience known only from OCTOGATE_SESSION_AUDIENCES is every member's")
	}
	if s.Allows("prod", "github:bob:1002", []string{"github:acme"}) {
		t.Error("prod in both the list and the file: the file's subjects apply, the list does not widen them")
	}
	if s.Allows("qa", "github:alice:1001", []string{"github:acme/sre"}) {
		t.Error("an unknown cluster is allowed to nobody")
	}
	var names []string
	for _, c := range s.For("github:bob:1002", []string{"github:acme"}) {
		names = append(names, c.Name)
	}
	if len(names) != 2 || names[0] != "legacy" || names[1] != "staging" {
		t.Errorf("bob's clusters %v, want legacy staging", names)
	}
}

func TestStoreNeedsAtLeastOneCluster(t *testing.T) {
	if _, err := New(Config{Audiences: []string{" "}}); err == nil {
		t.Error("no file and no audience must be an error")
	}
	if _, err := New(Config{File: "testdata/missing.yaml"}); err == nil {
		t.Error("a missing file must be an error")
	}
}
