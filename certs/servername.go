package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CheckServingHost reports whether the serving certificate DIR/tls.crt (as written by
// WriteDir) is valid for host, the host kube-apiserver will dial: a host not among its DNS and
// IP subject alternative names makes kube-apiserver refuse the TLS handshake
// (https://pkg.go.dev/crypto/x509#Certificate.VerifyHostname). It returns nil when the
// certificate covers host or when dir has no tls.crt (a serving certificate managed
// elsewhere, e.g. by cert-manager), and otherwise an error naming the certificate's names.
func CheckServingHost(dir, host string) error {
	path := filepath.Join(dir, ServingCertFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return fmt.Errorf("%s: no PEM certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if cert.VerifyHostname(host) == nil {
		return nil
	}
	names := append([]string{}, cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	return fmt.Errorf("%s is not valid for %q (its names: %s): kube-apiserver will refuse the TLS handshake; re-run `octogate certs init --hosts` with %s, or use one of those names",
		path, host, strings.Join(names, ", "), host)
}
