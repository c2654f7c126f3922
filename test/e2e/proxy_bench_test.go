package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/cluster"
)

const (
	// benchConfigMaps ConfigMaps of about benchConfigMapBytes of JSON each make a list of
	// about 1 MiB, the size ./proxy's BenchmarkList serves from its fake kube-apiserver.
	benchConfigMaps     = 2000
	benchConfigMapBytes = 500
	benchNamespace      = "bench-list"
)

// BenchmarkProxyRealAPIServer measures the impersonating proxy against a real kube-apiserver
// (the managed-like cluster of TestProxy: etcd, kube-apiserver with RBAC, octogate serve with
// the proxy), on loopback, with client-go's REST client over HTTP/2 and JSON as kubectl uses
// it. Direct is the cluster admin's client certificate straight to kube-apiserver; proxied is
// alice's GitHub token to the proxy, which authenticates her (cached after the first request),
// authorizes her by the policy (rule platform-admins-everything, whose ClusterRoleBinding
// OCTOGATE_PROXY_RBAC keeps) and impersonates her upstream, where kube-apiserver checks the
// proxy's right to impersonate and her RBAC.
//
// list is one list of benchConfigMaps ConfigMaps (about 1 MiB) in MB/s; get one small
// ConfigMap. The direct, impersonated (the admin straight to kube-apiserver with alice's
// Impersonate-* headers: the proxy's requests without its hop) and proxied sub-benchmarks run
// one path each (b.SetBytes for lists); interleaved takes the three in turn per iteration and
// reports each path's median (p50), and proxied against direct as a ratio of MB/s (lists) and a
// difference (added-p50-µs), which a busy machine blurs less.
//
//	OCTOGATE_K8S_BIN=bin/k8s go test -run '^$' -bench ProxyRealAPIServer -benchtime 20x -count 3 ./test/e2e/
func BenchmarkProxyRealAPIServer(b *testing.B) {
	e := requireEnv(b)
	p := startProxyEnv(b, e)
	ctx := context.Background()
	direct, impersonated, proxied := benchClients(b, p)
	fillBenchNamespace(b, p.admin)

	list := func(c *rest.RESTClient) func() ([]byte, error) {
		return func() ([]byte, error) {
			return c.Get().Namespace(benchNamespace).Resource("configmaps").DoRaw(ctx)
		}
	}
	get := func(c *rest.RESTClient) func() ([]byte, error) {
		return func() ([]byte, error) {
			return c.Get().Namespace(benchNamespace).Resource("configmaps").Name("cm-0000").DoRaw(ctx)
		}
	}
	// RBAC of the rule's group is written by octogate's controller after it starts; the first
	// proxied list also fills the identity cache. Both lists must hold every ConfigMap.
	size := sameItems(b, list(direct), waitOK(b, list(proxied)))

	for _, c := range []struct {
		name  string
		do    func(*rest.RESTClient) func() ([]byte, error)
		bytes int
	}{
		{"list", list, size},
		{"get", get, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for _, path := range []struct {
				name   string
				client *rest.RESTClient
			}{{"direct", direct}, {"impersonated", impersonated}, {"proxied", proxied}} {
				b.Run(path.name, func(b *testing.B) {
					do := c.do(path.client)
					b.SetBytes(int64(c.bytes))
					for b.Loop() {
						mustDo(b, do)
					}
				})
			}
			b.Run("interleaved", func(b *testing.B) {
				doDirect, doAs, doProxied := c.do(direct), c.do(impersonated), c.do(proxied)
				var d, as, pr []time.Duration
				for b.Loop() {
					d = append(d, timed(b, doDirect))
					as = append(as, timed(b, doAs))
					pr = append(pr, timed(b, doProxied))
				}
				md, ma, mp := median(d), median(as), median(pr)
				b.ReportMetric(float64(md.Microseconds()), "direct-p50-µs")
				b.ReportMetric(float64(ma.Microseconds()), "impersonated-p50-µs")
				b.ReportMetric(float64(mp.Microseconds()), "proxied-p50-µs")
				b.ReportMetric(float64((mp - md).Microseconds()), "added-p50-µs")
				if c.bytes > 0 {
					b.ReportMetric(float64(c.bytes)/md.Seconds()/1e6, "direct-MB/s")
					b.ReportMetric(float64(c.bytes)/mp.Seconds()/1e6, "proxied-MB/s")
					b.ReportMetric(md.Seconds()/mp.Seconds(), "proxied/direct")
				}
			})
		})
	}
}

// benchClients returns REST clients of core/v1 in JSON, without client-side rate limit: the
// admin's straight to kube-apiserver; the admin's impersonating alice as the proxy does (her
// user, uid, groups and extra from a SelfSubjectReview through the proxy), which costs
// kube-apiserver what the proxy's requests cost it but for the proxy's hop and the RBAC checks
// of the proxy's right to impersonate (the admin is system:masters); and alice's (a platform
// admin) through the proxy.
func benchClients(b *testing.B, p *proxyEnv) (direct, impersonated, proxied *rest.RESTClient) {
	b.Helper()
	ca, err := os.ReadFile(filepath.Join(p.m.CertsDir, "ca.crt"))
	if err != nil {
		b.Fatal(err)
	}
	client := func(cfg *rest.Config) (*kubernetes.Clientset, *rest.RESTClient) {
		cfg.QPS = -1 // no client-side limiter: the benchmark measures the servers
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		c, ok := cs.CoreV1().RESTClient().(*rest.RESTClient)
		if !ok {
			b.Fatalf("core/v1 REST client is a %T", cs.CoreV1().RESTClient())
		}
		return cs, c
	}
	_, direct = client(rest.CopyConfig(p.m.APIServer.Admin))
	cs, proxied := client(&rest.Config{Host: p.m.ProxyURL, BearerToken: cluster.AliceToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("alice's SelfSubjectReview through the proxy: %v", err)
	}
	u := review.Status.UserInfo
	as := rest.CopyConfig(p.m.APIServer.Admin)
	as.Impersonate = rest.ImpersonationConfig{UserName: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string][]string{}}
	for k, v := range u.Extra {
		as.Impersonate.Extra[k] = v
	}
	_, impersonated = client(as)
	return direct, impersonated, proxied
}

// fillBenchNamespace creates benchNamespace with benchConfigMaps ConfigMaps cm-0000, cm-0001,
// ..., each with one value padding its JSON to about benchConfigMapBytes.
func fillBenchNamespace(b *testing.B, admin kubernetes.Interface) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// The rest of an item's JSON (metadata with uid, resourceVersion, creationTimestamp and a
	// managedFields entry) is about 300 bytes.
	value := strings.Repeat("x", benchConfigMapBytes-300)
	names := make(chan string)
	errs := make(chan error, benchConfigMaps)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}
				if _, err := admin.CoreV1().ConfigMaps(benchNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range benchConfigMaps {
		names <- fmt.Sprintf("cm-%04d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("create ConfigMaps: %v", err)
	}
}

// waitOK retries do for up to 30 s until it succeeds, and returns do.
func waitOK(b *testing.B, do func() ([]byte, error)) func() ([]byte, error) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := do()
		if err == nil {
			return do
		}
		if time.Now().After(deadline) {
			b.Fatalf("through the proxy after 30 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sameItems checks that both lists hold benchConfigMaps items and returns the size of the
// direct list's body in bytes.
func sameItems(b *testing.B, direct, proxied func() ([]byte, error)) int {
	b.Helper()
	var size int
	for name, do := range map[string]func() ([]byte, error){"direct": direct, "proxied": proxied} {
		body := mustDo(b, do)
		var list corev1.ConfigMapList
		if err := json.Unmarshal(body, &list); err != nil {
			b.Fatalf("%s list: %v", name, err)
		}
		if len(list.Items) != benchConfigMaps {
			b.Fatalf("%s list: %d ConfigMaps, want %d", name, len(list.Items), benchConfigMaps)
		}
		if name == "direct" {
			size = len(body)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: a list of %d ConfigMaps is %d bytes of JSON\n", benchConfigMaps, size)
	return size
}

func mustDo(b *testing.B, do func() ([]byte, error)) []byte {
	body, err := do()
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func timed(b *testing.B, do func() ([]byte, error)) time.Duration {
	start := time.Now()
	mustDo(b, do)
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
