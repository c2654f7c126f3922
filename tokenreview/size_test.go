package tokenreview

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// countingLookup counts the tokens it is asked about and authenticates them as octocat.
type countingLookup struct{ calls int }

func (c *countingLookup) Lookup(context.Context, string) (Identity, error) {
	c.calls++
	return octocat, nil
}

func TestTokenAndBodySizeLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		body       string
		wantStatus int
		wantAuth   bool
		wantError  string
		wantLookup int
	}{
		{"token of MaxTokenBytes is looked up", reviewBody(APIVersionV1, "TokenReview", strings.Repeat("t", MaxTokenBytes)), 200, true, "", 1},
		{"token one byte longer is refused without a lookup", reviewBody(APIVersionV1, "TokenReview", strings.Repeat("t", MaxTokenBytes+1)), 200, false, "token longer than 8192 bytes", 0},
		{"body above MaxReviewBytes is 413 without a lookup", reviewBody(APIVersionV1, "TokenReview", strings.Repeat("t", MaxReviewBytes)), 413, false, "request body larger than 16 KiB", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &countingLookup{}
			rec := serve(NewHandler(l, nil), tc.body)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			var got struct {
				Error  string
				Status struct {
					Authenticated bool
					Error         string
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("answer is not JSON: %v: %s", err, rec.Body)
			}
			if got.Status.Authenticated != tc.wantAuth {
				t.Errorf("authenticated = %v, want %v", got.Status.Authenticated, tc.wantAuth)
			}
			if msg := got.Error + got.Status.Error; !strings.Contains(msg, tc.wantError) {
				t.Errorf("error %q, want it to contain %q", msg, tc.wantError)
			}
			if l.calls != tc.wantLookup {
				t.Errorf("%d lookups, want %d", l.calls, tc.wantLookup)
			}
		})
	}
}

func TestHandlerAsksForAReviewSizedBodyLimit(t *testing.T) {
	if got := NewHandler(&countingLookup{}, nil).MaxBodyBytes(); got != MaxReviewBytes || got >= 1<<20 {
		t.Errorf("MaxBodyBytes() = %d, want %d", got, MaxReviewBytes)
	}
	if MaxReviewBytes < MaxTokenBytes+4<<10 {
		t.Errorf("MaxReviewBytes %d leaves no room for a review around a MaxTokenBytes token", MaxReviewBytes)
	}
}
