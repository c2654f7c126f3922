package fielderr

import "testing"

func TestJoin(t *testing.T) {
	got := Join("invalid policy", []FieldError{{Field: "rules[0].effect", Detail: `must be "Allow" or "Deny"`}, {Detail: "several YAML documents"}})
	want := `invalid policy: rules[0].effect: must be "Allow" or "Deny"; several YAML documents`
	if got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
}
