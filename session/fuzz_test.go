package session

import (
	"context"
	"strings"
	"testing"

	"github.com/octogate/octogate/tokenreview"
)

// FuzzDecodeRequest: any body decodes to a request or an OAuth error of the documented codes,
// never a panic, and an error never quotes the subject token.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(form("grant_type", GrantTypeTokenExchange, "subject_token", "gho_secret", "subject_token_type", TokenTypeAccessToken, "audience", clusterA)))
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
