package certs

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"strings"
)

// ErrNoHosts is returned (wrapped) when a serving certificate has to be issued but there are no
// names for it: the current certificate is missing or does not parse, or has no names, and no
// hosts were given. Callers say how to pass them.
var ErrNoHosts = errors.New("no names for a new serving certificate")

// keyProblem says why keyPEM cannot serve with the certificate certPEM (the first CERTIFICATE
// block is the leaf), as tls.X509KeyPair would refuse the pair: "no key", "key does not parse:
// …", "key does not match", or "key: …" for anything else. It returns "" when the pair loads.
func keyProblem(certPEM, keyPEM []byte) string {
	if len(keyPEM) == 0 {
		return "no key"
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err == nil {
		return ""
	} else if !hasPrivateKeyBlock(keyPEM) {
		return "key does not parse: no PEM PRIVATE KEY block"
	} else if strings.Contains(err.Error(), "does not match") {
		return "key does not match"
	} else if strings.Contains(err.Error(), "private key") {
		return "key does not parse: " + strings.TrimPrefix(err.Error(), "tls: ")
	} else {
		return "key: " + strings.TrimPrefix(err.Error(), "tls: ")
	}
}

// hasPrivateKeyBlock tells whether b holds a PEM block whose type ends in "PRIVATE KEY", as
// tls.X509KeyPair looks for.
func hasPrivateKeyBlock(b []byte) bool {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return false
		}
		if block.Type == "PRIVATE KEY" || strings.HasSuffix(block.Type, " PRIVATE KEY") {
			return true
		}
	}
}
