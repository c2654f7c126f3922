package session

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// Keys are the issuer's signing keys: the first signs, all are published in the JWKS, so that
// a new key can be published before it signs and an old one kept until the sessions it signed
// have expired. Immutable; safe for concurrent use.
type Keys struct {
	signer jose.Signer
	// eventSigner signs Security Event Tokens with the same key (typ "secevent+jwt").
	eventSigner jose.Signer
	kid         string
	public      []jose.JSONWebKey
	jwks        []byte // the JSON Web Key Set document (RFC 7517 section 5)
	// jwksLine is jwks and a newline, as served.
	jwksLine []byte
}

// KeySource gives the keys to sign or verify with now: a *Keys (fixed) or a *KeyFile
// (reloaded when the file changes).
type KeySource interface {
	Current() *Keys
}

// Current is k itself: fixed keys.
func (k *Keys) Current() *Keys { return k }

// LoadKeys reads a PEM file of one or more EC P-256 private keys ("EC PRIVATE KEY", SEC 1, or
// "PRIVATE KEY", PKCS #8), in signing order. Errors name the file and the block at fault.
func LoadKeys(path string) (*Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys reads PEM bytes as LoadKeys does.
func ParseKeys(pemBytes []byte) (*Keys, error) {
	var priv []*ecdsa.PrivateKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, pemBytes = pem.Decode(pemBytes)
		if block == nil {
			break
		}
		ec, err := parseKeyBlock(block)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		priv = append(priv, ec)
	}
	if len(priv) == 0 {
		return nil, errors.New("no PEM private key")
	}
	return newKeys(priv)
}

// parseKeyBlock is the EC P-256 private key of a PEM block.
func parseKeyBlock(block *pem.Block) (*ecdsa.PrivateKey, error) {
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%q: want EC PRIVATE KEY or PRIVATE KEY (P-256)", block.Type)
	}
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("want an EC P-256 key (ES256)")
	}
	return ec, nil
}

// GenerateKeys makes one in-memory P-256 key: sessions it signs die with the process, and
// other replicas do not know it (one replica only).
func GenerateKeys() (*Keys, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return newKeys([]*ecdsa.PrivateKey{k})
}

// EncodeKey is the PEM ("EC PRIVATE KEY") of a new P-256 key, for a key file.
func EncodeKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func newKeys(priv []*ecdsa.PrivateKey) (*Keys, error) {
	k := &Keys{}
	seen := map[string]bool{}
	for _, p := range priv {
		jwk := jose.JSONWebKey{Key: p.Public(), Algorithm: string(jose.ES256), Use: "sig"}
		tp, err := jwk.Thumbprint(crypto.SHA256)
		if err != nil {
			return nil, err
		}
		jwk.KeyID = base64.RawURLEncoding.EncodeToString(tp)
		if seen[jwk.KeyID] {
			continue // the same key twice: published once
		}
		seen[jwk.KeyID] = true
		k.public = append(k.public, jwk)
	}
	k.kid = k.public[0].KeyID
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv[0], KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	k.signer = signer
	// RFC 8417 section 2.3: an explicit typ keeps a SET from being taken for another JWT.
	if k.eventSigner, err = jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv[0], KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType(EventTokenType)); err != nil {
		return nil, err
	}
	if k.jwks, err = json.Marshal(jose.JSONWebKeySet{Keys: k.public}); err != nil {
		return nil, err
	}
	k.jwksLine = append(append([]byte(nil), k.jwks...), '\n')
	return k, nil
}

// EventTokenType is the typ header of a Security Event Token (RFC 8417 section 2.3).
const EventTokenType = "secevent+jwt"

// SignEvent signs claims (a JSON object) as a Security Event Token: a compact JWS, ES256 by
// the signing key, with headers kid and typ "secevent+jwt".
func (k *Keys) SignEvent(claims []byte) (string, error) {
	jws, err := k.eventSigner.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// KeyID is the kid of the signing key: its RFC 7638 JWK thumbprint (SHA-256, base64url).
func (k *Keys) KeyID() string { return k.kid }

// Public is the published keys, the signing key first.
func (k *Keys) Public() []jose.JSONWebKey { return k.public }

// JWKS is the JSON Web Key Set document of the public keys.
func (k *Keys) JWKS() []byte { return k.jwks }
