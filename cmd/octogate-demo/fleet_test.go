package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/cluster"
)

// TestFleetClustersFile checks the issuer's clusters file the demo writes: octogate loads it,
// demo is for every org member and managed (behind the proxy) for acme/platform-admins only,
// with each cluster's CA; the file octogate starts with loads too.
func TestFleetClustersFile(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, testCAPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := writeFleetClusters(path, unknownServer, unknownServer); err != nil {
		t.Fatalf("the file octogate starts with: %v", err)
	}
	if err := writeFleetClusters(path, fleetServer{"https://127.0.0.1:6443", ca}, fleetServer{"https://127.0.0.1:7443", ca}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := fleet.Parse(b)
	if err != nil {
		t.Fatalf("octogate refuses the demo's clusters file: %v\n%s", err, b)
	}
	access, err := fleet.New(fleet.Config{File: path})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fleet.Cluster{}
	for _, c := range doc.Clusters {
		byName[c.Name] = c
	}
	d, m := byName[sessionAudience], byName[managedAudience]
	if d.Accepts != fleet.AcceptsWebhook || d.Server != "https://127.0.0.1:6443" || d.CertificateAuthorityData == "" || d.Labels["env"] == "" {
		t.Errorf("cluster demo %+v", d)
	}
	if m.Accepts != fleet.AcceptsProxy || m.Server != "https://127.0.0.1:7443" || m.CertificateAuthorityData == "" || m.Labels["env"] == "" {
		t.Errorf("cluster managed %+v", m)
	}
	alice := []string{"github:" + cluster.Org, cluster.AdminGroup}
	bob := []string{"github:" + cluster.Org, "github:" + cluster.Org + "/web"}
	if !access.Allows(managedAudience, "github:alice:1001", alice) || access.Allows(managedAudience, "github:bob:1002", bob) ||
		!access.Allows(sessionAudience, "github:bob:1002", bob) {
		t.Error("want managed for acme/platform-admins only and demo for every member")
	}
	for _, kv := range managedVerifierEnv("https://127.0.0.1:8443", ca) {
		if kv == "OCTOGATE_SESSION_AUDIENCE="+managedAudience {
			return
		}
	}
	t.Errorf("the managed-like cluster's octogate does not verify sessions for %s: %v", managedAudience, managedVerifierEnv("https://127.0.0.1:8443", ca))
}

// testCAPEM is a self-signed CA certificate in PEM (fleet parses certificateAuthorityData).
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "demo-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
