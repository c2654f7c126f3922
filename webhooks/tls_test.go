package webhooks_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/syncbuf"
	"github.com/octogate/octogate/webhooks"
)

func TestClientCertificates(t *testing.T) {
	clientCA, err := certs.NewCA("apiserver-client-ca")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeFile(t, caFile, clientCA.CertPEM)
	ts := startServer(t, webhooks.Config{ClientCAFile: caFile}, func(s *webhooks.Server) {
		s.Handle("/authenticate", "authenticate", echo)
		s.Handle("/github/webhook", "github-webhook", echo, webhooks.WithoutClientCert())
	})

	issue := func(ca *certs.CA) *tls.Certificate {
		kp, err := ca.IssueClient("kube-apiserver")
		if err != nil {
			t.Fatal(err)
		}
		c, err := kp.TLSCertificate()
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	strangerCA, err := certs.NewCA("stranger")
	if err != nil {
		t.Fatal(err)
	}
	// A serving (server-auth only) certificate from the right CA is not a client certificate.
	servingKP, err := clientCA.IssueServing([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	servingCert, err := servingKP.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		cert       *tls.Certificate
		method     string
		path       string
		wantStatus int // 0: the handshake must fail
	}{
		{"webhook request without a client cert is refused with 401", nil, "POST", "/authenticate", 401},
		{"webhook request with a client cert from the client CA is served", issue(clientCA), "POST", "/authenticate", 200},
		{"client cert from another CA fails the handshake", issue(strangerCA), "POST", "/authenticate", 0},
		{"server-auth-only cert from the client CA fails the handshake", &servingCert, "POST", "/authenticate", 0},
		{"a public route (GitHub webhook) needs no client cert", nil, "POST", "/github/webhook", 200},
		{"healthz needs no client cert", nil, "GET", "/healthz", 200},
		{"readyz needs no client cert", nil, "GET", "/readyz", 200},
		{"metrics need no client cert", nil, "GET", "/metrics", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.pki.client(tc.cert)
			defer c.CloseIdleConnections()
			res, err := doErr(c, tc.method, ts.url+tc.path, strings.NewReader("{}"))
			if tc.wantStatus == 0 {
				if err == nil {
					t.Fatalf("request succeeded with %d, want a failed handshake", res.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.status != tc.wantStatus {
				t.Fatalf("got %d %s, want %d", res.status, res.body, tc.wantStatus)
			}
			if res.status == 401 {
				var body struct{ Error string }
				if err := json.Unmarshal([]byte(res.body), &body); err != nil || !strings.Contains(body.Error, "client certificate") {
					t.Fatalf("body %q is not a JSON error about the client certificate", res.body)
				}
			}
		})
	}
}

// rotation replaces the serving certificate files the way one deployment style does.
type rotation struct {
	name string
	// setup lays out the files and returns the paths the server reads.
	setup func(t *testing.T, dir string, kp certs.KeyPair) (certFile, keyFile string)
	// rotate puts kp in place.
	rotate func(t *testing.T, dir string, kp certs.KeyPair, n int)
}

var rotations = []rotation{
	{
		name: "files replaced by rename",
		setup: func(t *testing.T, dir string, kp certs.KeyPair) (string, string) {
			writeFile(t, filepath.Join(dir, "tls.crt"), kp.CertPEM)
			writeFile(t, filepath.Join(dir, "tls.key"), kp.KeyPEM)
			return filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		},
		rotate: func(t *testing.T, dir string, kp certs.KeyPair, _ int) {
			for name, data := range map[string][]byte{"tls.key": kp.KeyPEM, "tls.crt": kp.CertPEM} {
				tmp := filepath.Join(dir, "."+name+".new")
				writeFile(t, tmp, data)
				if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
		},
	},
	{
		// What kubelet does for Secret volumes: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>,
		// and an update swaps ..data atomically to a new timestamped directory.
		name: "Kubernetes ..data symlink swapped",
		setup: func(t *testing.T, dir string, kp certs.KeyPair) (string, string) {
			writeVersion(t, dir, "..2025_01_01_00_00_00.0", kp)
			mustSymlink(t, "..2025_01_01_00_00_00.0", filepath.Join(dir, "..data"))
			mustSymlink(t, "..data/tls.crt", filepath.Join(dir, "tls.crt"))
			mustSymlink(t, "..data/tls.key", filepath.Join(dir, "tls.key"))
			return filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		},
		rotate: func(t *testing.T, dir string, kp certs.KeyPair, n int) {
			old, err := os.Readlink(filepath.Join(dir, "..data"))
			if err != nil {
				t.Fatal(err)
			}
			version := fmt.Sprintf("..2025_01_01_00_00_%02d.0", n)
			writeVersion(t, dir, version, kp)
			mustSymlink(t, version, filepath.Join(dir, "..data_tmp"))
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
		},
	},
}

func writeVersion(t *testing.T, dir, version string, kp certs.KeyPair) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, version, "tls.crt"), kp.CertPEM)
	writeFile(t, filepath.Join(dir, version, "tls.key"), kp.KeyPEM)
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestServingCertificateReload(t *testing.T) {
	for _, rot := range rotations {
		t.Run(rot.name+": new handshakes present the new cert within 10s, no request fails", func(t *testing.T) {
			t.Parallel()
			p := &pki{dir: t.TempDir()}
			var err error
			if p.ca, err = certs.NewCA("rotating-ca"); err != nil {
				t.Fatal(err)
			}
			first := p.serving(t)
			p.certFile, p.keyFile = rot.setup(t, p.dir, first)
			ts := startServer(t, webhooks.Config{TLSCertFile: p.certFile, TLSKeyFile: p.keyFile}, func(s *webhooks.Server) {
				s.Handle("/authorize", "authorize", echo)
			})
			ts.pki = p
			ts.client = p.client(nil)
			addr := ts.Addr().String()
			if got, err := leafDER(addr, p.ca.Pool()); err != nil || !bytes.Equal(got, certDER(t, first)) {
				t.Fatalf("initial certificate not served: %v", err)
			}

			// Load during the rotations: keep-alive requests and fresh connections alike.
			stop := make(chan struct{})
			var failures atomic.Int64
			var sent atomic.Int64
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					c := p.client(nil)
					if i%2 == 1 {
						c.Transport.(*http.Transport).DisableKeepAlives = true
					}
					defer c.CloseIdleConnections()
					for {
						select {
						case <-stop:
							return
						default:
						}
						res, err := doErr(c, "POST", ts.url+"/authorize", strings.NewReader("{}"))
						sent.Add(1)
						if err != nil || res.status != 200 {
							failures.Add(1)
							t.Errorf("request during rotation: %v %d", err, res.status)
						}
					}
				})
			}

			for n := 1; n <= 2; n++ {
				next := p.serving(t)
				rot.rotate(t, p.dir, next, n)
				want := certDER(t, next)
				start := time.Now()
				eventually(t, 10*time.Second, "new certificate served", func() bool {
					got, err := leafDER(addr, p.ca.Pool())
					return err == nil && bytes.Equal(got, want)
				})
				t.Logf("rotation %d picked up after %v", n, time.Since(start).Round(time.Millisecond))
			}
			close(stop)
			wg.Wait()
			if failures.Load() != 0 || sent.Load() == 0 {
				t.Fatalf("%d of %d requests failed during rotation", failures.Load(), sent.Load())
			}
		})
	}
}

func TestSelfSignedCertificate(t *testing.T) {
	logs := &syncbuf.Buffer{}
	s, err := webhooks.New(webhooks.Config{
		Listen: "127.0.0.1:0",
		Logger: newJSONLogger(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("its CA is logged as PEM", func(t *testing.T) {
		var caPEM string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			if ca, ok := m["ca"].(string); ok {
				caPEM = ca
				if m["level"] != "WARN" || !strings.Contains(m["msg"].(string), "development only") {
					t.Errorf("self-signed notice: %v", m)
				}
			}
		}
		block, _ := pem.Decode([]byte(caPEM))
		if block == nil {
			t.Fatalf("no CA PEM in the logs: %s", logs)
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		ts := runServer(t, s)
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		for _, host := range []string{"127.0.0.1", "localhost"} {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host}}}
			res, err := doErr(c, "GET", ts+"/healthz", nil)
			if err != nil || res.status != 200 {
				t.Errorf("%s: %v %v", host, res, err)
			}
			c.CloseIdleConnections()
		}
	})
}

func TestTLSVersions(t *testing.T) {
	ts := startServer(t, webhooks.Config{}, nil)
	for _, tc := range []struct {
		name    string
		version uint16
		ok      bool
	}{
		{"TLS 1.1 is refused", tls.VersionTLS11, false},
		{"TLS 1.2 is accepted", tls.VersionTLS12, true},
		{"TLS 1.3 is accepted", tls.VersionTLS13, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", ts.Addr().String(), &tls.Config{
				RootCAs: ts.pki.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tc.version, MaxVersion: tc.version,
			})
			if err == nil {
				_ = conn.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("handshake err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	t.Run("only HTTP/1.1 is offered", func(t *testing.T) {
		conn, err := tls.Dial("tcp", ts.Addr().String(), &tls.Config{
			RootCAs: ts.pki.ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Fatalf("negotiated %q", p)
		}
	})
}
