// Package jwks fetches an OpenID Connect issuer's signing keys: the discovery document
// (https://openid.net/specs/openid-connect-discovery-1_0.html, section 4) names the JSON Web
// Key Set (RFC 7517) at jwks_uri, and the set's keys of one type are the issuer's signing keys.
// The verifiers of GitHub Actions OIDC tokens (actionsoidc) and of a trusted issuer's sessions
// (session) keep their own caches and refresh rules; this package is the fetch they share.
package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// MaxDocumentBytes bounds a discovery document or key set read from an issuer.
const MaxDocumentBytes = 1 << 20

// KeyType is the kind of public key a verifier takes from a set.
type KeyType int

const (
	// RSA keys (RS256: GitHub Actions' issuer).
	RSA KeyType = iota
	// EC keys (ES256: octogate's sessions).
	EC
)

func (t KeyType) String() string {
	if t == EC {
		return "EC"
	}
	return "RSA"
}

func (t KeyType) accepts(key any) bool {
	switch key.(type) {
	case *rsa.PublicKey:
		return t == RSA
	case *ecdsa.PublicKey:
		return t == EC
	}
	return false
}

// Fetch returns the signing keys of type t (use "sig" or unset) in issuer's key set. jwksURL
// is the set's URL when already known; "" first reads issuer's discovery document, which must
// name the same issuer (go-oidc checks it) and a jwks_uri. It returns the URL it used, also
// with an error once discovery has succeeded, so the caller can skip discovery next time.
// Errors name the URL and the failure (status, decoding, no key of type t); they never carry a
// token, since none is sent.
func Fetch(ctx context.Context, client *http.Client, issuer, jwksURL string, t KeyType) ([]jose.JSONWebKey, string, error) {
	if jwksURL == "" {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, client), issuer)
		if err != nil {
			return nil, "", fmt.Errorf("discovery: %w", err)
		}
		var doc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := p.Claims(&doc); err != nil || doc.JWKSURI == "" {
			return nil, "", errors.New("discovery: the document has no jwks_uri")
		}
		jwksURL = doc.JWKSURI
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, jwksURL, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, jwksURL, fmt.Errorf("GET %s: %w", jwksURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, jwksURL, fmt.Errorf("GET %s: %s", jwksURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes))
	if err != nil {
		return nil, jwksURL, fmt.Errorf("GET %s: %w", jwksURL, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, jwksURL, fmt.Errorf("GET %s: not a JSON Web Key Set: %w", jwksURL, err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		if t.accepts(key.Key) && (key.Use == "" || key.Use == "sig") {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, jwksURL, fmt.Errorf("GET %s: no %s signing key in the set", jwksURL, t)
	}
	return keys, jwksURL, nil
}

// HTTPClient is the client that reads an issuer's documents: TLS 1.2 or later, the system
// roots plus the PEM certificates of caFile ("" for the system roots alone), and timeout for
// each request. Errors read `CAFile "F": ...`.
func HTTPClient(caFile string, timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CAFile %q: %w", caFile, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CAFile %q: no PEM certificate in file", caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}
