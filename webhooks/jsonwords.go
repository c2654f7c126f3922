package webhooks

import (
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
// "true or false", "an object", "an array", "a base64 string" ([]byte) or "a number".
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
