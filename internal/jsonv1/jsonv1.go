// Package jsonv1 decodes JSON exactly as encoding/json does, faster on the bodies that decode.
//
// The webhook routes decode one small review per request, and encoding/json (reflection, a
// scanner step per byte, an allocation per string) was a tenth of a review's CPU. Unmarshal
// first decodes with go-json-experiment/json under its v1 options (DefaultOptionsV1: the
// options with which that module implements encoding/json itself, including case-insensitive
// field names, duplicate names last-wins and invalid UTF-8 replaced), which takes a quarter of
// the time and a fifth of the allocations. One of those options is turned off:
// ReportErrorsWithLegacySemantics, which validates the whole body in a first pass (so that a
// syntax error wins over an earlier type error) and goes on after a type error; without it the
// body is read once, and every difference it makes turns a success into an error, never into
// another success. Any body that module refuses is decoded again by
// encoding/json, so every error a caller sees, and the value left beside it, is encoding/json's
// own (*json.SyntaxError, *json.UnmarshalTypeError, ...). The fuzz tests of the decoders that use
// it check, body by body, that both decoders give the same value and the same error.
package jsonv1

import (
	"encoding/json"

	jsonexp "github.com/go-json-experiment/json"
	jsonexpv1 "github.com/go-json-experiment/json/v1"
)

// v1 are go-json-experiment's options for encoding/json's behaviour, less the first pass that
// only orders errors (see the package comment): a review with a 1 KB token was read twice.
var v1 = jsonexp.JoinOptions(jsonexpv1.DefaultOptionsV1(), jsonexpv1.ReportErrorsWithLegacySemantics(false))

// Unmarshal decodes data into *v with encoding/json's semantics and errors (see the package
// comment). *v should be the zero value: after an error it holds what encoding/json left.
func Unmarshal[T any](data []byte, v *T) error {
	if err := jsonexp.Unmarshal(data, v, v1); err == nil {
		return nil
	}
	var zero T
	*v = zero
	return json.Unmarshal(data, v)
}
