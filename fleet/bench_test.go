package fleet

import (
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// BenchmarkStoreAllows is the exchange's access decision for a person of 20 groups on a
// cluster of 50 subjects (the worst case: no subject matches).
func BenchmarkStoreAllows(b *testing.B) {
	c := Cluster{Name: "prod", Server: "https://prod", Accepts: AcceptsWebhook}
	for i := range 50 {
		c.Subjects = append(c.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: fmt.Sprintf("github:acme/team-%d", i)})
	}
	s := &Store{}
	s.current.Store(&clusterSet{byName: map[string]Cluster{"prod": c}, names: []string{"prod"}})
	groups := []string{"github:acme"}
	for i := range 19 {
		groups = append(groups, fmt.Sprintf("github:acme/other-%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		if s.Allows("prod", "github:bob:1002", groups) {
			b.Fatal("allowed")
		}
	}
}
