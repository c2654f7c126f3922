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
		}
		tp.Select(c)
	})
}
