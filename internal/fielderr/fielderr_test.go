package fielderr

import (
	"reflect"
	"slices"
	"testing"
)

func TestJoin(t *testing.T) {
	got := Join("invalid policy", []FieldError{{Field: "rules[0].effect", Detail: `must be "Allow" or "Deny"`}, {Detail: "several YAML documents"}})
	want := `invalid policy: rules[0].effect: must be "Allow" or "Deny"; several YAML documents`
	if got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
}

func TestCheckShape(t *testing.T) {
	type item struct {
		Name  string            `json:"name"`
		Max   *int              `json:"max,omitempty"`
		Extra map[string]string `json:"extra"`
	}
	type doc struct {
		Items []item `json:"items"`
	}
	v := map[string]any{
		"items": []any{
			map[string]any{"name": 3.0, "max": 1.5, "extra": "x", "nope": true},
			"not an object",
		},
		"kind": "X",
	}
	got := CheckShape("", v, reflect.TypeFor[doc]())
	want := []FieldError{
		{Field: "items[0].extra", Detail: "must be an object"},
		{Field: "items[0].max", Detail: "must be a whole number of 0 or more"},
		{Field: "items[0].name", Detail: "must be a string"},
		{Field: "items[0].nope", Detail: "unknown field"},
		{Field: "items[1]", Detail: "must be an object"},
		{Field: "kind", Detail: "unknown field"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("CheckShape =\n%v\nwant\n%v", got, want)
	}
	if got := CheckShape("", []any{}, reflect.TypeFor[doc]()); !slices.Equal(got, []FieldError{{Field: "(document)", Detail: "must be an object"}}) {
		t.Errorf("a list as the document: %v", got)
	}
}
