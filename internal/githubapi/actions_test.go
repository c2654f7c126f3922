package githubapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func getJSON(t *testing.T, c *http.Client, url, bearer string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

func TestActionsIssuer(t *testing.T) {
	iss := NewActionsIssuerTLS()
	defer iss.Close()
	c := iss.Client()

	var doc struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	getJSON(t, c, iss.URL()+PathOIDCDiscovery, "", &doc)
	if doc.Issuer != iss.URL() || doc.JWKSURI != iss.URL()+PathJWKS || len(doc.Algs) != 1 || doc.Algs[0] != "RS256" {
		t.Errorf("discovery document %+v", doc)
	}

	first := iss.KeyID()
	second := iss.RotateKey()
	var set jose.JSONWebKeySet
	getJSON(t, c, iss.URL()+PathJWKS, "", &set)
	if len(set.Keys) != 2 || set.Keys[0].KeyID != first || set.Keys[1].KeyID != second {
		t.Errorf("after a rotation the set has %d keys, want %s and %s", len(set.Keys), first, second)
	}
	iss.RetireOldKeys()
	getJSON(t, c, iss.URL()+PathJWKS, "", &set)
	if len(set.Keys) != 1 || set.Keys[0].KeyID != second {
		t.Errorf("after retiring, keys %v", set.Keys)
	}

	job := iss.WorkflowEnv(Workflow{Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production"})
	var answer struct {
		Value string `json:"value"`
	}
	if code := getJSON(t, c, job["ACTIONS_ID_TOKEN_REQUEST_URL"]+"&audience=aud-x", "wrong", &answer); code != http.StatusUnauthorized {
		t.Errorf("a wrong request token got HTTP %d, want 401", code)
	}
	if code := getJSON(t, c, job["ACTIONS_ID_TOKEN_REQUEST_URL"]+"&audience=aud-x", job["ACTIONS_ID_TOKEN_REQUEST_TOKEN"], &answer); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	jws, err := jose.ParseSignedCompact(answer.Value, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := jws.Verify(&iss.PrivateKey().PublicKey)
	if err != nil || jws.Signatures[0].Header.KeyID != second {
		t.Fatalf("token not signed by the current key %s: %v", second, err)
	}
	var claims map[string]any
	_ = json.Unmarshal(payload, &claims)
	for k, want := range map[string]any{"aud": "aud-x", "iss": iss.URL(), "sub": "repo:acme/deploy:environment:production",
		"repository_id": "74", "repository_owner_id": "2001", "environment": "production"} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(answer.Value, ".")[0])
	if !strings.Contains(string(header), `"typ":"JWT"`) {
		t.Errorf("header %s", header)
	}
}
