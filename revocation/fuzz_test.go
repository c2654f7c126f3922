package revocation

import (
	"testing"
	"time"
)

// FuzzDecodePollRequest: any body is a request or an error, never a panic, and a request
// respects the limits.
func FuzzDecodePollRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"maxEvents":10,"returnImmediately":false,"ack":["a","b"],"since":1765000000}`,
		`{"setErrs":{"x":{"err":"invalid_key","description":"d"}}}`, `{"maxEvents":-1}`, `[]`, `null`, `{"ack":[""]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodePollRequest(body)
		if err != nil {
			return
		}
		if len(req.Ack) > MaxAcks || req.Since < 0 || req.MaxEvents != nil && *req.MaxEvents < 0 {
			t.Fatalf("limits not enforced: %+v", req)
		}
	})
}

// FuzzDecodeEventClaims: any verified payload decodes to a valid revocation, a skip or an
// error, never a panic; what decodes encodes back to the same revocation.
func FuzzDecodeEventClaims(f *testing.F) {
	const iss, aud = "https://issuer.example", "https://issuer.example/ssf/stream"
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for _, r := range []Revocation{{UserID: "1002", At: at}, {Team: "acme/sre", At: at}, {UserID: "1002", Cluster: "staging", At: at}, {UserID: "1002", LeftOrg: "acme", At: at}} {
		b, err := eventClaimsOf(iss, aud, r, at)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"iss":"https://issuer.example","aud":"https://issuer.example/ssf/stream","jti":"x","events":{"other":{}}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, _, known, err := decodeEventClaims(iss, aud, "staging", payload)
		if err != nil || !known {
			return
		}
		if !r.valid() {
			t.Fatalf("invalid revocation decoded: %+v", r)
		}
		b, err := eventClaimsOf(iss, aud, r, at)
		if err != nil {
			t.Fatal(err)
		}
		if r2, _, _, err := decodeEventClaims(iss, aud, "staging", b); err != nil || r2 != r {
			t.Fatalf("%+v -> %+v %v", r, r2, err)
		}
	})
}
