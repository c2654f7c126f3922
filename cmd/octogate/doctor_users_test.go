package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/githubapi"
)

// fakeAPIServer answers SelfSubjectReviews (POST
// /apis/authentication.k8s.io/v1/selfsubjectreviews) as kube-apiserver would: the user of a
// bearer token it knows, the CN of a client certificate, else 401 Unauthorized. It records the
// bearer tokens it was sent.
type fakeAPIServer struct {
	url string
	ca  []byte
	// users maps a bearer token to its username.
	users map[string]string

	mu     sync.Mutex
	bearer []string
}

func startFakeAPIServer(t *testing.T, users map[string]string) *fakeAPIServer {
	t.Helper()
	f := &fakeAPIServer{users: users}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/selfsubjectreviews" {
			http.NotFound(w, r)
			return
		}
		var user string
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			f.mu.Lock()
			f.bearer = append(f.bearer, tok)
			f.mu.Unlock()
			user = f.users[tok]
		} else if len(r.TLS.PeerCertificates) > 0 {
			user = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("Content-Type", "application/json")
		if user == "" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
			"status": map[string]any{"userInfo": map[string]any{"username": user, "groups": []string{"system:authenticated"}}}})
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return f
}

func (f *fakeAPIServer) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bearer)
}

// clientCert is a self-signed client certificate for cn and its key, in PEM.
func clientCert(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Minute),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
}

// TestDoctorEveryKindOfKubeconfigUser runs `octogate doctor --context NAME` for each kind of
// user a kubeconfig holds (the demo writes each of them): a static token, a token file, a
// client certificate, `octogate credential` with GITHUB_TOKEN or a token cache (XDG_CACHE_HOME)
// in its exec env. Each is checked with the credential kubectl would send for that context,
// never the shell's GITHUB_TOKEN, never by a second login, and nothing is written to the
// shell's cache.
func TestDoctorEveryKindOfKubeconfigUser(t *testing.T) {
	const (
		clientID = "Iv23.doctor-users"
		// Legacy tokens (40 hex digits), as the demo's users have: no checksum to compute.
		aliceToken = "a11ce00000000000000000000000000000000001"
		carolToken = "ca40100000000000000000000000000000000003"
		shellToken = "5be11000000000000000000000000000000000009"
	)
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{aliceToken}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	gh.AddUser(githubapi.User{Login: "carol", ID: 1003, Tokens: []string{carolToken}})
	gh.AddUser(githubapi.User{Login: "octocat", ID: 1005, Memberships: []githubapi.Membership{{Org: "acme"}}})
	gh.SetDeviceFlow(githubapi.DeviceFlow{ClientID: clientID, GitHubApp: true})
	web := strings.TrimSuffix(gh.URL(), "/")

	// The login context's token cache, filled by a device flow `kubectl --context login` ran.
	execCache := t.TempDir()
	shellCache := isolate(t)
	t.Setenv("XDG_CACHE_HOME", execCache)
	stderr := &syncBuffer{onCode: func(code string) {
		if err := gh.ApproveDevice(code, "octocat"); err != nil {
			t.Error(err)
		}
	}}
	if _, code := runOctogate(t, stderr, "credential", "--client-id", clientID, "--github-url", web, "--device"); code != 0 {
		t.Fatalf("the first login: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(execCache, "octogate", firstFile(t, filepath.Join(execCache, "octogate"), ".json")))
	if err != nil {
		t.Fatal(err)
	}
	var cached struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(b, &cached); err != nil || cached.AccessToken == "" {
		t.Fatalf("the login's cache: %v", err)
	}
	t.Setenv("XDG_CACHE_HOME", shellCache)
	t.Setenv(envGitHubToken, shellToken) // kubectl sends it for no context below
	logins := gh.Calls("/login/device/code")

	api := startFakeAPIServer(t, map[string]string{aliceToken: "github:alice:1001", cached.AccessToken: "github:octocat:1005"})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := clientCert(t, "demo-admin")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: api.url, CertificateAuthorityData: api.ca}
	plugin := func(args []string, env ...clientcmdapi.ExecEnvVar) *clientcmdapi.AuthInfo {
		return &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1",
			Command: "/nonexistent/octogate", Args: append([]string{"credential"}, args...), Env: env,
			InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode}}
	}
	users := map[string]*clientcmdapi.AuthInfo{
		"alice":      {Token: aliceToken},
		"carol":      {Token: carolToken},
		"token-file": {TokenFile: tokenFile},
		"admin":      {ClientCertificateData: certPEM, ClientKeyData: keyPEM},
		"exec-token": plugin([]string{"--github-url", web}, clientcmdapi.ExecEnvVar{Name: envGitHubToken, Value: aliceToken}),
		"login": plugin([]string{"--client-id", clientID, "--github-url", web, "--device"},
			clientcmdapi.ExecEnvVar{Name: "XDG_CACHE_HOME", Value: execCache}, clientcmdapi.ExecEnvVar{Name: envGitHubToken, Value: ""}),
	}
	// Another exec plugin, and `octogate credential --github-actions`: the doctor runs neither
	// flow of its own; kubectl's client runs the plugin, which prints alice's token here.
	script := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$PLUGIN_TOKEN\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{"other-exec": {"get-token"}, "actions": {"credential", "--github-actions=demo"}} {
		users[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: script, Args: args,
			Env: []clientcmdapi.ExecEnvVar{{Name: "PLUGIN_TOKEN", Value: aliceToken}}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	}
	for name, u := range users {
		kc.AuthInfos[name] = u
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: "c", AuthInfo: name}
	}
	kc.CurrentContext = "admin"
	path := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)

	for _, tc := range []struct {
		context string
		args    []string
		code    int
		want    []string
		// sent is the bearer token the cluster must have been sent ("" none).
		sent string
	}{
		{context: "alice", want: []string{"token:    GitHub token of type legacy, from the token of kubeconfig user alice", "result:   accepted", "username: github:alice:1001"}, sent: aliceToken},
		{context: "carol", code: 1, want: []string{"result:   refused (HTTP 401)", "the token of kubeconfig user carol", "--github-orgs"}, sent: carolToken},
		{context: "token-file", want: []string{"from the token of kubeconfig user token-file", "username: github:alice:1001"}, sent: aliceToken},
		{context: "admin", want: []string{"credential: the client certificate of kubeconfig user admin", "username: demo-admin"}},
		{context: "login", want: []string{"from cache", "username: github:octocat:1005"}, sent: cached.AccessToken},
		{context: "other-exec", want: []string{"credential: the credential of kubeconfig user other-exec's exec plugin", "username: github:alice:1001"}, sent: aliceToken},
		{context: "actions", want: []string{"credential: the GitHub Actions token of kubeconfig user actions'", "username: github:alice:1001"}, sent: aliceToken},
		{context: "actions", args: []string{"--github-orgs", "acme=2001"}, want: []string{"username: github:alice:1001"}, sent: aliceToken},
		// With the server's orgs, GitHub answers with the reason code, for the context's token.
		{context: "alice", args: []string{"--github-orgs", "acme=2001", "--github-url", web}, want: []string{"from the token of kubeconfig user alice", "checked:  " + gh.URL(), "username: github:alice:1001"}},
		{context: "carol", args: []string{"--github-orgs", "acme=2001", "--github-url", web}, code: 1, want: []string{"reason:   not_member"}},
		{context: "login", args: []string{"--github-orgs", "acme=2001"}, want: []string{"from cache", "username: github:octocat:1005"}},
		{context: "exec-token", args: []string{"--github-orgs", "acme=2001"}, want: []string{"from GITHUB_TOKEN of kubeconfig user exec-token", "username: github:alice:1001"}},
		{context: "exec-token", want: []string{"from GITHUB_TOKEN of kubeconfig user exec-token", "SelfSubjectReview", "username: github:alice:1001"}, sent: aliceToken},
	} {
		t.Run(tc.context+strings.Join(tc.args, " "), func(t *testing.T) {
			before := len(api.sent())
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, append([]string{"doctor", "--context", tc.context, "--timeout", "5s"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout does not say %q:\n%s", w, out)
				}
			}
			for _, secret := range []string{aliceToken, carolToken, shellToken, cached.AccessToken} {
				if strings.Contains(out+stderr.String(), secret) {
					t.Errorf("a token is printed:\n%s%s", out, stderr)
				}
			}
			sent := api.sent()[before:]
			if tc.sent == "" && len(sent) != 0 || tc.sent != "" && (len(sent) != 1 || sent[0] != tc.sent) {
				t.Errorf("the cluster was sent %d bearer tokens (the wanted one: %v), want only the context's", len(sent), slices.Contains(sent, tc.sent))
			}
		})
	}
	if n := gh.Calls("/login/device/code"); n != logins {
		t.Errorf("doctor started %d device flows, want none: the login context's cache has a token", n-logins)
	}
	if _, err := os.Stat(filepath.Join(shellCache, "octogate")); !os.IsNotExist(err) {
		t.Errorf("doctor wrote to the shell's cache %s: %v", shellCache, err)
	}
}

// firstFile is the name of the first file in dir ending in ext.
func firstFile(t *testing.T, dir, ext string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ext) {
			return e.Name()
		}
	}
	t.Fatalf("no %s file in %s", ext, dir)
	return ""
}
