package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

func testCA(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

const header = "apiVersion: octogate.dev/v1alpha1\nkind: SessionClusters\n"

func TestParseValid(t *testing.T) {
	ca := testCA(t)
	doc, err := Parse([]byte(header + `clusters:
- name: prod
  server: https://prod.example.com:6443
  certificateAuthorityData: ` + ca + `
  accepts: webhook
  labels: {env: prod, octogate.dev/region: eu-1}
  subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: "github:acme/sre"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	c := doc.Clusters[0]
	if c.Name != "prod" || c.Accepts != AcceptsWebhook || c.Labels["env"] != "prod" || len(c.Subjects) != 1 || c.CertificateAuthorityData != ca {
		t.Errorf("decoded %+v", c)
	}
}

func TestParseInvalidNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"empty file", "", []string{"empty document"}},
		{"not YAML", "clusters: [", []string{"not valid YAML"}},
		{"wrong kind and version", "apiVersion: v1\nkind: AuthorizationPolicy\nclusters: [{name: a, server: https://a, accepts: webhook}]\n",
			[]string{`apiVersion: "v1" is not supported`, `kind: "AuthorizationPolicy" is not supported`}},
		{"no clusters", header, []string{"clusters: required"}},
		{"a second document", header + "clusters: [{name: a, server: https://a, accepts: webhook}]\n---\n" + header + "clusters: [{name: b, server: https://b, accepts: webhook}]\n", []string{"the file holds more than one YAML document"}},
		{"unknown field", header + "clusters: [{name: a, server: https://a, accepts: webhook, audience: a}]\n", []string{"clusters[0].audience: unknown field"}},
		{"unknown top-level field", header + "rules: []\nclusters: [{name: a, server: https://a, accepts: webhook}]\n", []string{"rules: unknown field"}},
		{"wrong type", header + "clusters: [{name: a, server: https://a, accepts: webhook, labels: [prod]}]\n", []string{"clusters[0].labels: must be an object"}},
		{"key twice", header + "clusters: [{name: a, name: b, server: https://a, accepts: webhook}]\n", []string{"already set"}},
		{"bad name", header + "clusters: [{name: Prod_1, server: https://a, accepts: webhook}]\n", []string{`clusters[0].name: "Prod_1" must be lowercase`}},
		{"duplicate name", header + "clusters: [{name: a, server: https://a, accepts: webhook}, {name: a, server: https://b, accepts: proxy}]\n", []string{"clusters[1].name: \"a\" duplicates clusters[0].name"}},
		{"http server", header + "clusters: [{name: a, server: http://a, accepts: webhook}]\n", []string{"clusters[0].server: \"http://a\" must be an https URL"}},
		{"missing server and accepts", header + "clusters: [{name: a}]\n", []string{"clusters[0].server: required", "clusters[0].accepts: required"}},
		{"unknown accepts", header + "clusters: [{name: a, server: https://a, accepts: oidc}]\n", []string{`clusters[0].accepts: "oidc" must be webhook, apiserver or proxy`}},
		{"CA not base64", header + "clusters: [{name: a, server: https://a, accepts: webhook, certificateAuthorityData: '%%%'}]\n", []string{"clusters[0].certificateAuthorityData: not base64"}},
		{"CA without certificate", header + "clusters: [{name: a, server: https://a, accepts: webhook, certificateAuthorityData: " + base64.StdEncoding.EncodeToString([]byte("hello")) + "}]\n", []string{"clusters[0].certificateAuthorityData: holds no PEM certificate"}},
		{"bad label", header + "clusters: [{name: a, server: https://a, accepts: webhook, labels: {'bad key!': x}}]\n", []string{"clusters[0].labels.bad key!: key"}},
		{"nobody may use it", header + "clusters: [{name: a, server: https://a, accepts: webhook, subjects: []}]\n", []string{"clusters[0].subjects: empty: nobody could use this cluster"}},
		{"service account subject", header + "clusters: [{name: a, server: https://a, accepts: webhook, subjects: [{kind: ServiceAccount, name: x, namespace: ns}]}]\n",
			[]string{"clusters[0].subjects[0].kind: ServiceAccount", "clusters[0].subjects[0].namespace: must be empty"}},
		{"subject without name or kind", header + "clusters: [{name: a, server: https://a, accepts: webhook, subjects: [{apiGroup: x}]}]\n",
			[]string{"clusters[0].subjects[0].kind: required", "clusters[0].subjects[0].name: required", `clusters[0].subjects[0].apiGroup: "x" must be empty`}},
		{"star inside a name", header + "clusters: [{name: a, server: https://a, accepts: webhook, subjects: [{kind: Group, name: 'github:*/sre'}]}]\n", []string{"clusters[0].subjects[0].name: \"github:*/sre\": no spaces, and '*' only as the last character"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatal("parsed; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var inv *InvalidError
			if tc.name != "not YAML" && !errors.As(err, &inv) {
				t.Errorf("error %T is not an *InvalidError", err)
			}
		})
	}
}
