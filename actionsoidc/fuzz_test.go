package actionsoidc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

// FuzzLookup feeds arbitrary tokens (and arbitrary claims signed with the issuer's key) to
// Lookup: it never panics, and every error is a classified *Error whose message starts with
// its reason and never quotes the token.
func FuzzLookup(f *testing.F) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	v, err := New(Config{Issuer: iss.URL(), Audience: audience, Orgs: []string{"acme=2001"}, HTTPClient: iss.Client(),
		Subjects: []string{"repo:acme/*"}})
	if err != nil {
		f.Fatal(err)
	}
	v.Warm(context.Background())
	f.Add(iss.Mint(claims(deploy, nil)), "")
	f.Add("", `{"sub":"repo:acme/x:ref:y","repository":"acme/x","repository_id":1,"repository_owner":"acme","repository_owner_id":2001}`)
	f.Add("not.a.jwt", `{"exp":"soon","aud":["a",1]}`)
	f.Add("eyJhbGciOiJub25lIn0.e30.", `{"iat":1e300,"nbf":-1}`)
	f.Fuzz(func(t *testing.T, token, claimsJSON string) {
		ctx := context.Background()
		if claimsJSON != "" {
			// Claims of any shape, correctly signed: the claims path must hold too.
			token = iss.Mint(map[string]any{"aud": audience, "raw": claimsJSON})
			if c, ok := parseObject(claimsJSON); ok {
				token = iss.Mint(c)
			}
		}
		id, err := v.Lookup(ctx, token)
		if err == nil {
			if !strings.HasPrefix(id.Username, Prefix) || id.UID == "" {
				t.Fatalf("accepted with identity %+v", id)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason == "" || !strings.HasPrefix(err.Error(), "["+string(e.Reason)+"] ") {
			t.Fatalf("unclassified error %v", err)
		}
		if !errors.Is(err, tokenreview.ErrRefused) && !errors.Is(err, tokenreview.ErrUnavailable) {
			t.Fatalf("error of no kind: %v", err)
		}
		if len(token) > 20 && strings.Contains(err.Error(), token) {
			t.Fatal("the message quotes the token")
		}
	})
}

func parseObject(s string) (map[string]any, bool) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}
