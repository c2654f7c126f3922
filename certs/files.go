package certs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File names written by Set.WriteDir and read by ReadDir. tls.crt/tls.key match the keys of a
// Kubernetes TLS Secret, so the files can be loaded with `kubectl create secret generic NAME
// --from-file=DIR/tls.crt --from-file=DIR/tls.key ...`; name each file, since the names are
// symlinks (see DataLink) and --from-file=DIR takes regular files only.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "tls.crt"
	ServingKeyFile  = "tls.key"
	ClientCertFile  = "client.crt"
	ClientKeyFile   = "client.key"
	// ClientCACertFile and ClientCAKeyFile are the client CA: it signs client.crt and nothing
	// else, and octogate verifies kube-apiserver's client certificate with it
	// (OCTOGATE_CLIENT_CA_FILE).
	ClientCACertFile = "client-ca.crt"
	ClientCAKeyFile  = "client-ca.key"
)

// Names of the CAs Generate makes.
const (
	ServingCAName = "octogate-ca"
	ClientCAName  = "octogate-client-ca"
)

// Set is everything `octogate certs init` writes: the serving CA and the webhook server's
// serving certificate it issues, and the client CA and kube-apiserver's client certificate it
// issues. Two CAs so that each certificate can have the lifetime of where it lives (see
// ServingValidity and ClientValidity) and a leaked serving key cannot mint a client identity.
type Set struct {
	CA       KeyPair
	Serving  KeyPair
	ClientCA KeyPair
	Client   KeyPair
}

// Generate makes a new serving CA (ServingCAName), a serving certificate for hosts (see
// CA.IssueServing), a new client CA (ClientCAName) and a client certificate with CN
// DefaultClientCommonName.
func Generate(hosts []string) (*Set, error) {
	ca, err := NewCA(ServingCAName)
	if err != nil {
		return nil, err
	}
	serving, err := ca.IssueServing(hosts)
	if err != nil {
		return nil, err
	}
	clientCA, err := NewCA(ClientCAName)
	if err != nil {
		return nil, err
	}
	client, err := clientCA.IssueClient(DefaultClientCommonName)
	if err != nil {
		return nil, err
	}
	return &Set{CA: ca.KeyPair, Serving: serving, ClientCA: clientCA.KeyPair, Client: client}, nil
}

// WriteDir writes the set into dir (created with mode 0755 if missing): certificates with mode
// 0644, private keys with mode 0600. Unless overwrite is true it writes nothing and returns an
// error naming the files when any of them already exists. The files are written as one
// version (see DataLink): a reader that resolves DataLink once (ReadPair) sees all the old
// files or all the new ones, never half a file or a key of another certificate.
// It returns the paths written, in a fixed order.
func (s *Set) WriteDir(dir string, overwrite bool) ([]string, error) {
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CACertFile, s.CA.CertPEM, 0o644},
		{CAKeyFile, s.CA.KeyPEM, 0o600},
		{ServingCertFile, s.Serving.CertPEM, 0o644},
		{ServingKeyFile, s.Serving.KeyPEM, 0o600},
		{ClientCACertFile, s.ClientCA.CertPEM, 0o644},
		{ClientCAKeyFile, s.ClientCA.KeyPEM, 0o600},
		{ClientCertFile, s.Client.CertPEM, 0o644},
		{ClientKeyFile, s.Client.KeyPEM, 0o600},
	}
	if !overwrite {
		var existing []string
		for _, f := range files {
			_, err := os.Lstat(filepath.Join(dir, f.name))
			switch {
			case err == nil:
				existing = append(existing, f.name)
			case !errors.Is(err, fs.ErrNotExist):
				return nil, fmt.Errorf("certs: %w", err)
			}
		}
		if len(existing) > 0 {
			return nil, fmt.Errorf("certs: %s already has %s; refusing to overwrite (use --force to replace them)",
				dir, strings.Join(existing, ", "))
		}
	}
	var write []dirFile
	paths := make([]string, 0, len(files))
	for _, f := range files {
		write = append(write, dirFile{name: f.name, data: f.data, mode: f.mode})
		paths = append(paths, filepath.Join(dir, f.name))
	}
	if err := writeFiles(dir, write); err != nil {
		return nil, err
	}
	return paths, nil
}

// WebhookFiles is what a webhook kubeconfig embeds: the CA that signed the serving
// certificate and the client certificate kube-apiserver presents.
type WebhookFiles struct {
	CACertPEM     []byte
	ClientCertPEM []byte
	ClientKeyPEM  []byte
}

// ReadWebhookFiles reads ca.crt, client.crt and client.key from dir (as written by WriteDir).
// Errors name the missing or unreadable file.
func ReadWebhookFiles(dir string) (WebhookFiles, error) {
	var wf WebhookFiles
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{
		{CACertFile, &wf.CACertPEM},
		{ClientCertFile, &wf.ClientCertPEM},
		{ClientKeyFile, &wf.ClientKeyPEM},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return WebhookFiles{}, fmt.Errorf("certs: %w (run `octogate certs init --dir %s` first)", err, dir)
		}
		*f.dst = b
	}
	return wf, nil
}
