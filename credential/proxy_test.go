package credential

import (
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestParseProxyURL(t *testing.T) {
	for _, tt := range []struct {
		name, in, want, wantErr string
	}{
		{name: "host alone", in: "https://kube.example.com", want: "https://kube.example.com"},
		{name: "trailing slash dropped", in: "https://kube.example.com/", want: "https://kube.example.com"},
		{name: "port kept", in: "https://kube.example.com:8444", want: "https://kube.example.com:8444"},
		{name: "IPv4 address", in: "https://203.0.113.7", want: "https://203.0.113.7"},
		{name: "IPv6 address with port", in: "https://[2001:db8::7]:443", want: "https://[2001:db8::7]:443"},
		{name: "http is refused", in: "http://kube.example.com", wantErr: "want the proxy's https URL"},
		{name: "no scheme is refused", in: "kube.example.com", wantErr: "want the proxy's https URL"},
		{name: "empty is refused", in: "", wantErr: "want the proxy's https URL"},
		{name: "no host is refused", in: "https://:443", wantErr: "want the proxy's https URL"},
		{name: "a path is refused", in: "https://kube.example.com/k8s", wantErr: "without user, path, query or fragment"},
		{name: "a query is refused", in: "https://kube.example.com?x=1", wantErr: "without user, path, query or fragment"},
		{name: "user info is refused", in: "https://me@kube.example.com", wantErr: "without user, path, query or fragment"},
		{name: "a port out of range is refused", in: "https://kube.example.com:70000", wantErr: "want 1 to 65535"},
		{name: "not a URL", in: "https://kube example.com", wantErr: `"https://kube example.com"`},
		{name: "a host that is no DNS name is refused", in: "https://kube_example.com", wantErr: "want a DNS name or an IP address"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProxyURL(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseProxyURL(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseProxyURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// A proxy URL is a cluster server like any other: the kubeconfig kubectl loads points at it,
// with the proxy's CA, and keeps the same exec plugin.
func TestUserKubeconfigForTheProxy(t *testing.T) {
	server, err := ParseProxyURL("https://kube.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := UserKubeconfig{Server: server, CAData: testCA(t), ClientID: "Iv1.abc"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Clusters["octogate"]; c == nil || c.Server != "https://kube.example.com" || string(c.CertificateAuthorityData) != string(testCA(t)) {
		t.Errorf("cluster = %+v", c)
	}
	if u := cfg.AuthInfos["github"]; u == nil || u.Exec == nil || strings.Join(u.Exec.Args, " ") != "credential --client-id Iv1.abc" {
		t.Errorf("user = %+v", u)
	}
}

func TestCheckCABundle(t *testing.T) {
	if err := CheckCABundle(testCA(t)); err != nil {
		t.Errorf("the test CA: %v", err)
	}
	for name, b := range map[string][]byte{
		"empty":      nil,
		"not PEM":    []byte("hello"),
		"a key":      []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
		"bad base64": []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
	} {
		if err := CheckCABundle(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseProxyURL: whatever is accepted is an https URL with a host and nothing else, and
// parses back to itself.
func FuzzParseProxyURL(f *testing.F) {
	for _, s := range []string{"https://kube.example.com", "https://kube.example.com:8444/", "https://[::1]:443", "http://x", "https://x/p?q#f", "https://u@x", "https://x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseProxyURL(s)
		if err != nil {
			return
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			t.Fatalf("ParseProxyURL(%q) = %q, which is not https://host[:port] (%v)", s, got, err)
		}
		if again, err := ParseProxyURL(got); err != nil || again != got {
			t.Fatalf("ParseProxyURL(%q) = %q, %v; want it unchanged", got, again, err)
		}
	})
}
