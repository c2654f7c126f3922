package door_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/octogate/octogate/webhooks/door"
)

// DecodeError is the one place every route's decoder turns a JSON decode error into words.
func TestDecodeError(t *testing.T) {
	var v struct {
		Spec struct {
			Token string `json:"token"`
			TTL   int64  `json:"ttl"`
		} `json:"spec"`
	}
	for body, want := range map[string]string{
		`{"spec":`:               "body is not JSON: unexpected end of JSON input at byte 8",
		`[1]`:                    "body is a JSON array, want a TokenReview object",
		`{"spec":{"token":123}}`: "spec.token is a JSON number, want a string",
		`{"spec":{"ttl":1.5}}`:   "spec.ttl is a JSON number, want an integer",
	} {
		err := json.Unmarshal([]byte(body), &v)
		if got := door.DecodeError(err, "a TokenReview"); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
	if got := door.DecodeError(errors.New("other"), "a TokenReview"); got != "body is not JSON" {
		t.Errorf("another error: %q", got)
	}
}
