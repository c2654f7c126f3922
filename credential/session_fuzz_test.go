package credential

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// answer is a RoundTripper that answers every request with one status and body.
type answer struct {
	status int
	body   []byte
}

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body))}, nil
}

// FuzzExchangeAnswer feeds the token endpoint's answers (seeds: the issuer's golden answers in
// session/testdata) to the plugin's decoder: it never panics, never quotes the subject token,
// and a refusal's reason code is a single word.
func FuzzExchangeAnswer(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "session", "testdata", "exchange-*.json"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		for _, status := range []int{200, 400, 503} {
			f.Add(status, b)
		}
	}
	f.Add(400, []byte(`{"error":"invalid_grant","error_description":"[not_member"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 599 {
			return
		}
		const subject = "gho_fuzz_subject_token"
		client := &http.Client{Transport: answer{status: status, body: body}}
		tok, err := exchange(context.Background(), client, shedRetry{attempts: 1}, "https://issuer.example", "cluster-a", subject, tokenTypeAccessToken, func() time.Time { return time.Unix(0, 0) })
		if err == nil {
			if tok.Value == "" || !tok.Expiry.After(time.Unix(0, 0)) {
				t.Fatalf("a session without a value or expiry: %v", tok)
			}
			return
		}
		if strings.Contains(err.Error(), subject) {
			t.Fatalf("the error quotes the subject token: %v", err)
		}
		var se *SessionError
		if errors.As(err, &se) && strings.ContainsAny(se.ReasonCode(), " \t[]") {
			t.Fatalf("reason code %q of %q", se.ReasonCode(), se.Description)
		}
	})
}

func TestExchangeRefusalNeverQuotesTheSubjectToken(t *testing.T) {
	client := &http.Client{Transport: answer{status: 400, body: []byte(`{"error":"invalid_grant","error_description":"[not_member] token gho_quoted is refused"}`)}}
	_, err := exchange(context.Background(), client, defaultShedRetry(), "https://issuer.example", "cluster-a", "gho_quoted", tokenTypeAccessToken, time.Now)
	if err == nil || strings.Contains(err.Error(), "gho_quoted") || !errors.Is(err, ErrSessionRefused) {
		t.Fatalf("refusal: %v", err)
	}
}
