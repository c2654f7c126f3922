package jsonv1

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// sample has the shapes the reviews decode: strings, string lists, a nested pointer struct,
// a map of string lists, a bool and a number.
type sample struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Attrs *struct {
			Verb     string `json:"verb"`
			Resource string `json:"resource"`
			Selector *struct {
				Values []string `json:"values"`
			} `json:"labelSelector"`
		} `json:"resourceAttributes"`
		User   string              `json:"user"`
		Groups []string            `json:"groups"`
		Extra  map[string][]string `json:"extra"`
		Token  string              `json:"token"`
		Dry    bool                `json:"dryRun"`
		N      int                 `json:"n"`
	} `json:"spec"`
}

// seeds are bodies where a faster decoder could part from encoding/json.
var seeds = []string{
	`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"pods"},"user":"github:bob:1002","groups":["github:acme","system:authenticated"]}}`,
	`{"APIVERSION":"v1","Kind":"x","SPEC":{"USER":"a","Groups":["g"]}}`,   // names in other case
	`{"kind":"a","kind":"b","spec":{"user":"x","User":"y"}}`,              // duplicate names: the last wins
	"{\"kind\":\"\xff\xfe\",\"spec\":{\"user\":\"\xed\xa0\x80\"}}",        // invalid UTF-8 and a lone surrogate
	`{"kind":"\ud800","spec":{"token":"\u0041\n"}}`,                       // escapes, an unpaired surrogate
	`{"spec":{"groups":[]}}`, `{"spec":{"groups":null}}`, `{"spec":null}`, // empty and null lists
	`{"spec":{"extra":{"a":["b"],"c":null}}}`, `{"spec":{"extra":{}}}`, // maps
	`{"spec":{"resourceAttributes":null,"n":1e3}}`, `{"spec":{"n":1.5}}`, // null pointer, numbers
	`{"spec":{"n":99999999999999999999}}`, `{"spec":{"dryRun":"true"}}`, // overflow, a type error
	`{"kind":1}`, `{"spec":[]}`, `[]`, `null`, `"x"`, `1`, ``, ` `, `{`, `{}x`, // wrong types and syntax
	`{"kind":"a"} {"kind":"b"}`, `{"kind":"a",}`, `{'kind':'a'}`, `{"kind":"a"}` + "\x00",
	`{"spec":{"resourceAttributes":{"labelSelector":{"values":["a",1]}}}}`,
	`{"unknown":{"deep":[1,{"x":[true,null]}]},"kind":"k"}`,
	"\ufeff{}", `{"ſpec":{"uſer":"kelvin"}}`, `{"K":"k"}`, // BOM, the fold cases encoding/json knows
}

// FuzzMatchesEncodingJSON: for any body, Unmarshal leaves the same value and returns the
// same error text as encoding/json.
func FuzzMatchesEncodingJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, std sample
		errFast, errStd := Unmarshal(body, &fast), json.Unmarshal(body, &std)
		if fmt.Sprint(errFast) != fmt.Sprint(errStd) {
			t.Fatalf("body %q: error %v, encoding/json says %v", body, errFast, errStd)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("body %q: decoded %+v, encoding/json decodes %+v", body, fast, std)
		}
	})
}

// The errors are encoding/json's own types, which the routes turn into their answers.
func TestErrorsAreEncodingJSONs(t *testing.T) {
	var v sample
	var se *json.SyntaxError
	if err := Unmarshal([]byte(`{"kind":`), &v); !asType(err, &se) {
		t.Fatalf("truncated body: %T %v, want *json.SyntaxError", err, err)
	}
	var te *json.UnmarshalTypeError
	if err := Unmarshal([]byte(`{"spec":{"groups":"g"}}`), &v); !asType(err, &te) || te.Field != "spec.groups" {
		t.Fatalf("wrong type: %T %v, want *json.UnmarshalTypeError at spec.groups", err, err)
	}
}

func asType[E error](err error, target *E) bool {
	e, ok := err.(E) //nolint:errorlint // the exact type encoding/json returns, not a wrapped one
	*target = e
	return ok
}
