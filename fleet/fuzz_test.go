package fleet

import (
	"os"
	"testing"
)

// FuzzParse: any bytes either parse to a valid document (which Parse accepts again after
// validation, with every cluster named, served and decided) or fail; never a panic, and no
// cluster with an empty subjects list gets through.
func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile("testdata/clusters.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(header + "clusters: [{name: a, server: https://a, accepts: webhook, subjects: []}]\n"))
	f.Add([]byte(header + "clusters: [{name: a, name: a, server: https://a, accepts: proxy}]\n"))
	f.Add([]byte(`{"apiVersion":"octogate.dev/v1alpha1","kind":"SessionClusters","clusters":[{"name":"a","server":"https://a","accepts":"apiserver","labels":{"env":"x"}}]}`))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse(data)
		if err != nil {
			return
		}
		if len(doc.Clusters) == 0 {
			t.Fatal("a valid document has clusters")
		}
		for _, c := range doc.Clusters {
			if ValidName(c.Name) != nil {
				t.Fatalf("cluster name %q accepted", c.Name)
			}
			if c.Subjects != nil && len(c.Subjects) == 0 {
				t.Fatalf("cluster %q nobody may use was accepted", c.Name)
			}
			_ = Allowed(c, "github:alice:1", []string{"github:acme/sre"})
		}
	})
}
