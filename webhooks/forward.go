package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"

	"github.com/octogate/octogate/webhooks/door"
)

// These forward to package door while the handlers move to it; they go once none is left.

type Outcome = door.Outcome

const (
	MaxBodyBytes  = door.MaxBodyBytes
	MediaTypeJSON = door.MediaTypeJSON
)

func Record(ctx context.Context, o Outcome)                    { door.Record(ctx, o) }
func WriteError(w http.ResponseWriter, status int, msg string) { door.WriteError(w, status, msg) }
func ReadBody(r *http.Request) ([]byte, error)                 { return door.ReadBody(r) }
func ContentTypeError(contentType string) string               { return door.ContentTypeError(contentType) }
func JSONValueWord(v string) string                            { return door.JSONValueWord(v) }
func JSONTypeWords(t reflect.Type) string                      { return door.JSONTypeWords(t) }
func Clip(s string) string                                     { return door.Clip(s) }
func EmptyBodyError(review string) string                      { return door.EmptyBodyError(review) }
func NotJSONError(err *json.SyntaxError) string                { return door.NotJSONError(err) }
func TypeError(err *json.UnmarshalTypeError, rv string) string { return door.TypeError(err, rv) }
func DecodeError(err error, review string) string              { return door.DecodeError(err, review) }
func NullBodyError(review string) string                       { return door.NullBodyError(review) }
func MustBeError(field, want, got string) string               { return door.MustBeError(field, want, got) }
