package namespacetemplate

import "testing"

// FuzzParse: Parse never panics, and what it accepts renders and selects without panicking.
// Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(selectDoc))
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := Parse(data)
		if err != nil {
			return
		}
		c := Creator{Username: "github:bob:1002", Login: "bob", Groups: []string{"github:acme/sre"}}
		for _, x := range tp.List() {
			x.Render("ns")
			x.NameAllowed("bob-x", c)
			x.AllowsLabel("istio-injection")
			x.AllowsAnnotation("example.com/x")
		}
		tp.Select(c)
	})
}

// FuzzKeyGlob: a glob the loader accepts matches no reserved key, whatever the key.
func FuzzKeyGlob(f *testing.F) {
	for _, seed := range [][2]string{
		{"example.com/*", "example.com/x"}, {"*.io/x", "pod-security.kubernetes.io/x"},
		{"k*o/x", "k8s.io/x"}, {"cost-*", "cost-a.kubernetes.io/x"}, {"*.example.com/*", "a.example.com/b"},
		{"Example.COM/*", "Kubernetes.io/x"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, glob, key string) {
		for _, annotation := range []bool{false, true} {
			if checkKeyGlob(glob, annotation) == nil && keyMatch(glob, key) && ReservedKey(key) {
				t.Fatalf("accepted glob %q (annotation %v) matches reserved key %q", glob, annotation, key)
			}
		}
	})
}
