package door

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// The review decoders of every webhook explain a bad body in JSON words ("spec.token is a
// JSON number, want a string"), never in Go type names; these are their shared vocabulary.

// JSONValueWord is the JSON type word of a json.UnmarshalTypeError's Value ("number",
// "array", "string", ...), without the number itself.
func JSONValueWord(v string) string {
	word, _, _ := strings.Cut(v, " ")
	return word
}

// JSONTypeWords names, in JSON words, what decodes into a Go value of type t: "a string",
// "true or false", "an object", "an array", "a base64 string" ([]byte), "an integer" (for
// Go's integer types, which refuse 1.5 and numbers beyond their range) or "a number".
func JSONTypeWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	default:
		return "a number"
	}
}

// Clip shortens a client-supplied value quoted in an error to 64 bytes.
func Clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// The words of a refused review body, the same on every route (each answers them 400 with
// WriteError): what is wrong, then what is wanted.
//
//	body is empty: want a TokenReview
//	body is not JSON: invalid character 'o' in literal null (expecting 'u') at byte 2
//	body is JSON null, want a SubjectAccessReview object
//	body is a JSON array, want an AdmissionReview object
//	spec.token is a JSON number, want a string
//	kind must be TokenReview, not "Pod"
//	apiVersion must be authentication.k8s.io/v1 or authentication.k8s.io/v1beta1 (it is missing)

// EmptyBodyError is "body is empty: want <review>", review with its article ("a TokenReview").
func EmptyBodyError(review string) string { return "body is empty: want " + review }

// NotJSONError is "body is not JSON: <syntax error> at byte N".
func NotJSONError(err *json.SyntaxError) string {
	return fmt.Sprintf("body is not JSON: %v at byte %d", err, err.Offset)
}

// TypeError says which field (or the body, when the field is empty) has which JSON type
// instead of the one it needs; review is the body's kind with its article.
func TypeError(err *json.UnmarshalTypeError, review string) string {
	if err.Field == "" {
		return fmt.Sprintf("body is a JSON %s, want %s object", JSONValueWord(err.Value), review)
	}
	return fmt.Sprintf("%s is a JSON %s, want %s", err.Field, JSONValueWord(err.Value), JSONTypeWords(err.Type))
}

// DecodeError says in these words what a JSON decode of a body found wrong: where its syntax
// breaks (NotJSONError) or which field has which JSON type (TypeError, review as there);
// any other error is "body is not JSON".
func DecodeError(err error, review string) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return NotJSONError(se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return TypeError(te, review)
	}
	return "body is not JSON"
}

// NullBodyError is "body is JSON null, want <review> object".
func NullBodyError(review string) string { return "body is JSON null, want " + review + " object" }

// MustBeError is `FIELD must be WANT, not "GOT"`, or `FIELD must be WANT (it is missing)` when
// got is empty; got is clipped.
func MustBeError(field, want, got string) string {
	if got == "" {
		return field + " must be " + want + " (it is missing)"
	}
	return fmt.Sprintf("%s must be %s, not %q", field, want, Clip(got))
}
