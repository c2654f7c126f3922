package tokenreview

import (
	"bytes"
	"testing"
)

func TestIdentityPoolSharesEqualIdentities(t *testing.T) {
	p, err := NewIdentityPool(2)
	if err != nil {
		t.Fatal(err)
	}
	// Each built anew, as decoding a session's claims builds it.
	octocat := func() Identity {
		return Identity{Username: "github:octocat:583231", UID: "583231", Groups: []string{"github:acme", "github:acme/web"},
			Extra: map[string][]string{ExtraLogin: {"Octocat"}}}
	}
	a, b := p.Encoded(octocat()), p.Encoded(octocat())
	if &a.Groups[0] != &b.Groups[0] || &a.userJSON[0] != &b.userJSON[0] {
		t.Error("two equal identities: not one shared copy")
	}
	if want := octocat().Encoded().userJSON; !bytes.Equal(a.userJSON, want) {
		t.Errorf("answer %s, want %s", a.userJSON, want)
	}
	// Any field that differs makes another identity.
	for name, change := range map[string]func(*Identity){
		"username": func(id *Identity) { id.Username = "github:octocat:1" },
		"uid":      func(id *Identity) { id.UID = "1" },
		"groups":   func(id *Identity) { id.Groups = []string{"github:acme"} },
		"extra":    func(id *Identity) { id.Extra = map[string][]string{ExtraLogin: {"octocat"}} },
	} {
		id := octocat()
		change(&id)
		got := p.Encoded(id)
		if bytes.Equal(got.userJSON, a.userJSON) || got.Username != id.Username || got.UID != id.UID || len(got.Groups) != len(id.Groups) {
			t.Errorf("%s differs: got %+v (%s), the shared one is %s", name, got, got.userJSON, a.userJSON)
		}
	}
	if _, err := NewIdentityPool(0); err == nil {
		t.Error("a pool of 0: no error")
	}
}
