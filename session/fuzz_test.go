package session

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/tokenreview"
)

// FuzzDecodeRequest: any body decodes to a request or an OAuth error of the documented codes,
// never a panic, and an error never quotes the subject token.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(form("grant_type", GrantTypeTokenExchange, "subject_token", "gho_secret1hBBIb", "subject_token_type", TokenTypeAccessToken, "audience", clusterA)))
	f.Add([]byte("grant_type=" + GrantTypeTokenExchange + "&audience=a&audience=b"))
	f.Add([]byte("%"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err == nil {
			if r.GrantType != GrantTypeTokenExchange || r.SubjectToken == "" || r.Audience == "" {
				t.Fatalf("accepted an incomplete request %+v", r)
			}
			return
		}
		switch err.Code {
		case ErrInvalidRequest, ErrInvalidTarget, ErrUnsupportedGrantType:
		default:
			t.Fatalf("code %q", err.Code)
		}
		// Another parameter quoted in the error may contain the same text.
		others := r.GrantType + "\n" + r.SubjectTokenType + "\n" + r.Audience + "\n" + r.RequestedTokenType
		if len(r.SubjectToken) >= 8 && strings.Contains(err.Description, r.SubjectToken) && !strings.Contains(others, r.SubjectToken) {
			t.Fatalf("error quotes the subject token: %s", err.Description)
		}
	})
}

// FuzzVerifier: any token is accepted only if it is a session the issuer signed; otherwise a
// refusal with a documented reason code, never a panic.
func FuzzVerifier(f *testing.F) {
	e := newVerifierEnv(&testing.T{}, clusterA)
	good := e.session(&testing.T{}, clusterA)
	f.Add(good)
	f.Add(good[:len(good)-2])
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlLmNvbSJ9.")
	f.Add("eyJ.eyJ.x")
	f.Fuzz(func(t *testing.T, token string) {
		id, _, err := e.v.LookupKind(context.Background(), token)
		if err == nil {
			if token != good && e.next.ids[token].Username == "" {
				t.Fatalf("accepted a token the issuer did not sign: %+v", id)
			}
			return
		}
		if _, ok := tokenreview.Explain(tokenreview.Reason(err)); !ok {
			t.Fatalf("undocumented reason %q: %v", tokenreview.Reason(err), err)
		}
	})
}

// FuzzParseKeyFile: any bytes parse to key entries or an error, never a panic; what parses
// encodes to a file that parses to the same keys and times, and Rotate takes a step on it.
func FuzzParseKeyFile(f *testing.F) {
	t0 := newClock().t
	entries, _, err := Rotate(nil, RotateOptions{Now: t0})
	if err != nil {
		f.Fatal(err)
	}
	entries[1].Retired = t0
	good, err := EncodeKeyFile(entries)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nOctogate-Created: yesterday\n\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte("not a key"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseKeyFile(b)
		if err != nil {
			return
		}
		again, err := EncodeKeyFile(got)
		if err != nil {
			t.Fatalf("parsed entries do not encode: %v", err)
		}
		back, err := ParseKeyFile(again)
		if err != nil || len(back) != len(got) {
			t.Fatalf("round trip: %d entries, %v; want %d", len(back), err, len(got))
		}
		for i := range got {
			if !got[i].Key.Equal(back[i].Key) || !got[i].Created.Truncate(time.Second).Equal(back[i].Created) || !got[i].Retired.Truncate(time.Second).Equal(back[i].Retired) {
				t.Fatalf("entry %d changed in a round trip", i)
			}
		}
		if _, _, err := Rotate(got, RotateOptions{Now: t0}); err != nil {
			t.Fatalf("Rotate on a parsed file: %v", err)
		}
	})
}

// FuzzDecodeRevokeRequest: any body decodes to a logout request with one token and distinct,
// non-empty audiences, or an invalid_request that never quotes the token; never a panic.
func FuzzDecodeRevokeRequest(f *testing.F) {
	f.Add([]byte(form("token", "gho_secret1hBBIb", "token_type_hint", "access_token", "audience", "prod", "audience", "staging")))
	f.Add([]byte("token=a&token=b"))
	f.Add([]byte("token=&audience=&audience=prod"))
	f.Add([]byte("%"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRevokeRequest(body)
		if err == nil {
			if r.Token == "" || len(r.Token) > tokenreview.MaxTokenBytes || slices.Contains(r.Audiences, "") {
				t.Fatalf("accepted %+v", r)
			}
			for i, a := range r.Audiences {
				if slices.Contains(r.Audiences[i+1:], a) {
					t.Fatalf("audience %q twice", a)
				}
			}
			return
		}
		if err.Code != ErrInvalidRequest {
			t.Fatalf("code %q", err.Code)
		}
		if len(r.Token) >= 8 && strings.Contains(err.Description, r.Token) {
			t.Fatalf("the error quotes the token: %s", err.Description)
		}
	})
}
