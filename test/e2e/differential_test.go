package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// differentialPolicy is the policy of both clusters of TestDifferentialChecks: the cases of
// issue 34 (a Deny on the streaming subresources in prod, a Deny on binding cluster-admin
// above an Allow of everything in web-*), and Allows that reach the checks kube-apiserver
// makes inside a request (cluster-scoped RBAC writes and their escalation checks, CSR
// approval and its signer check).
const differentialPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-streams-in-prod
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["prod"]
  resourceRules: [{verbs: [create], apiGroups: [""], resources: [pods/exec, pods/attach, pods/portforward]}]
- name: no-cluster-admin-bindings
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [bind, escalate], apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], resourceNames: [cluster-admin]}]
- name: no-approving-other
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [approve], apiGroups: [certificates.k8s.io], resources: [signers], resourceNames: [example.com/other]}]
- name: web-everything
  effect: Allow
  subjects: [{kind: Group, name: "github:acme/web"}]
  namespaces: ["web-*"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
- name: web-cluster-rbac
  effect: Allow
  subjects: [{kind: Group, name: "github:acme/web"}]
  resourceRules: [{verbs: [create, get, list], apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles, clusterrolebindings]}]
- name: web-csr
  effect: Allow
  subjects: [{kind: Group, name: "github:acme/web"}]
  resourceRules:
  - {verbs: [create, get, list, watch], apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests]}
  - {verbs: [update], apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests/approval]}
  - {verbs: [approve], apiGroups: [certificates.k8s.io], resources: [signers], resourceNames: [example.com/web, example.com/other]}
`

// check is one authorization check's attributes, as a SubjectAccessReview carries them
// (groups aside: the user is the same on both paths).
type check struct {
	User, Verb, APIGroup, Resource, Subresource, Namespace, Name, Path string
}

func (c check) String() string {
	if c.Path != "" {
		return c.Verb + " " + c.Path
	}
	res := c.Resource
	if c.Subresource != "" {
		res += "/" + c.Subresource
	}
	if c.APIGroup != "" {
		res += "." + c.APIGroup
	}
	s := c.Verb + " " + res
	if c.Name != "" {
		s += " name=" + c.Name
	}
	if c.Namespace != "" {
		s += " namespace=" + c.Namespace
	}
	return s
}

// decided is a check with octogate's verdict on it (Allow, Deny or NoOpinion).
type decided struct {
	check
	Verdict string
}

// sarRecorder sits between kube-apiserver and octogate's /authorize: it serves octogate's own
// certificate (so the authorization kubeconfig that octogate wrote verifies it), forwards each
// SubjectAccessReview with kube-apiserver's client certificate, and keeps the review's
// attributes with octogate's verdict: kube-apiserver's own account of the checks it makes.
type sarRecorder struct {
	URL      string
	certsDir string
	target   string // octogate's https://HOST:PORT

	once   sync.Once
	client *http.Client
	err    error

	mu      sync.Mutex
	records []decided
	srv     *http.Server
}

// startSARRecorder listens on 127.0.0.1 and forwards to target with the certificates that
// cluster.Start writes to certsDir (read at the first review, when they exist).
func startSARRecorder(t *testing.T, certsDir, target string) *sarRecorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &sarRecorder{URL: "https://" + l.Addr().String(), certsDir: certsDir, target: target}
	r.srv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(filepath.Join(certsDir, "tls.crt"), filepath.Join(certsDir, "tls.key"))
			return &c, err
		}},
	}
	go func() { _ = r.srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *sarRecorder) upstream() (*http.Client, error) {
	r.once.Do(func() {
		ca, err := os.ReadFile(filepath.Join(r.certsDir, "ca.crt"))
		if err != nil {
			r.err = err
			return
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		cert, err := tls.LoadX509KeyPair(filepath.Join(r.certsDir, "client.crt"), filepath.Join(r.certsDir, "client.key"))
		if err != nil {
			r.err = err
			return
		}
		r.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}},
		}}
	})
	return r.client, r.err
}

func (r *sarRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	client, err := r.upstream()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, r.target+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header.Set("Content-Type", req.Header.Get("Content-Type"))
	resp, err := client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	var review, status authorizationv1.SubjectAccessReview
	if json.Unmarshal(body, &review) == nil && json.Unmarshal(answer, &status) == nil && resp.StatusCode == http.StatusOK {
		r.mu.Lock()
		r.records = append(r.records, decided{reviewCheck(&review.Spec), sarVerdict(status.Status)})
		r.mu.Unlock()
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// mark is the number of reviews recorded so far; since(mark) are those recorded after it.
func (r *sarRecorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.records)
}

func (r *sarRecorder) since(mark int) []decided {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records[mark:])
}

func reviewCheck(s *authorizationv1.SubjectAccessReviewSpec) check {
	c := check{User: s.User}
	if ra := s.ResourceAttributes; ra != nil {
		c.Verb, c.APIGroup, c.Resource, c.Subresource, c.Namespace, c.Name = ra.Verb, ra.Group, ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	}
	if nra := s.NonResourceAttributes; nra != nil {
		c.Verb, c.Path = nra.Verb, nra.Path
	}
	return c
}

func sarVerdict(s authorizationv1.SubjectAccessReviewStatus) string {
	switch {
	case s.Allowed:
		return "Allow"
	case s.Denied:
		return "Deny"
	}
	return "NoOpinion"
}

// proxyDecision is one "proxy decision" line of octogate's JSON log: when, which check, which
// verdict.
type proxyDecision struct {
	at time.Time
	decided
}

// proxyDecisions reads the "proxy decision" lines of octogate's JSON log
// (OCTOGATE_LOG_LEVEL=debug): every check the proxy evaluated, in order.
func proxyDecisions(t *testing.T, logPath string) []proxyDecision {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []proxyDecision
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		var l struct {
			Time                                                                             time.Time
			Msg, User, Verb, APIGroup, Resource, Subresource, Namespace, Name, Path, Verdict string
		}
		if json.Unmarshal(s.Bytes(), &l) != nil || l.Msg != "proxy decision" {
			continue
		}
		out = append(out, proxyDecision{l.Time, decided{check{l.User, l.Verb, l.APIGroup, l.Resource, l.Subresource, l.Namespace, l.Name, l.Path}, l.Verdict}})
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffSide is one path of the differential run: the webhook-mode cluster (kubectl straight to
// kube-apiserver) or the managed-like one (kubectl to octogate's proxy).
type diffSide struct {
	name    string
	kubectl cluster.Kubectl
	admin   kubernetes.Interface
	node    *cluster.Node
	work    string
}

// diffStep is one kubectl run of the script: args as bob, with stdin and environment (the
// transport); portForward runs `kubectl port-forward` and fetches one page through it.
type diffStep struct {
	args        []string
	stdin       []byte
	env         []string
	portForward bool
}

// impersonates reports whether the step runs kubectl --as (or --as-group, --as-uid).
func (s diffStep) impersonates() bool {
	return slices.ContainsFunc(s.args, func(a string) bool { return strings.HasPrefix(a, "--as") })
}

func (s diffStep) String() string {
	line := "kubectl " + strings.Join(s.args, " ")
	if len(s.env) > 0 {
		line = strings.Join(s.env, " ") + " " + line
	}
	return line
}

// The two transports of exec, attach, port-forward and cp: kubectl's default (WebSockets)
// and SPDY.
var (
	overWebSockets = []string(nil)
	overSPDY       = []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}
)

// run runs step as bob on side and returns how it ended.
func (d *diffSide) run(t *testing.T, step diffStep) cluster.Result {
	t.Helper()
	k := d.kubectl
	k.Env = step.env
	args := append([]string{"--context=bob"}, step.args...)
	if step.portForward {
		return d.portForward(t, k, args)
	}
	res, err := k.Run(context.Background(), step.stdin, args...)
	if err != nil {
		// A kubectl that did not return in its 30 s (once, on a loaded machine) gets a second
		// try, which tells a lost answer from a wrong one; a second timeout is an answer of
		// its own, compared with the other path's.
		t.Logf("%s: %v (retrying once)\n%s", d.name, err, res)
		if res, err = k.Run(context.Background(), step.stdin, args...); err != nil {
			res.ExitCode, res.Stderr = -1, res.Stderr+"\n(test: "+err.Error()+")"
		}
	}
	return res
}

// portForward starts kubectl port-forward (args end in POD and :80), fetches / through the
// forwarded port and stops it: exit 0 when the page came through, else kubectl's own exit and
// stderr (a refused upgrade ends kubectl before it forwards).
func (d *diffSide) portForward(t *testing.T, k cluster.Kubectl, args []string) cluster.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := k.Command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := cluster.Result{Args: args}
	port := ""
	re := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> `)
	sc := bufio.NewScanner(stdout)
	for port == "" && sc.Scan() {
		res.Stdout += sc.Text() + "\n"
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if port != "" {
		client := &http.Client{Timeout: 10 * time.Second}
		resp, err := client.Get("http://127.0.0.1:" + port + "/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			res.Stdout += string(b)
		}
		cancel()
		_ = cmd.Wait()
		res.Stderr = stderr.String()
		if err != nil || !strings.HasPrefix(res.Stdout[strings.LastIndex(strings.TrimSuffix(res.Stdout, "\n"), "\n")+1:], "hello from ") {
			res.ExitCode = 1
			res.Stderr += fmt.Sprintf("\n(test: fetch through the forward: %v)", err)
		}
		return res
	}
	_ = cmd.Wait() // the exit code is read from ProcessState
	res.Stderr = stderr.String()
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		t.Fatalf("%s: kubectl %s printed no port within 30 s\n%s", d.name, strings.Join(args, " "), res)
	}
	if res.ExitCode == 0 {
		res.ExitCode = 1 // ended without forwarding
	}
	return res
}

// setup creates on side what the script needs, as the cluster admin: namespaces prod and
// web-a with a ServiceAccount ci and a running pod web each (on a stand-in node), and bob's
// RBAC edit RoleBinding in prod (no Allow rule of the policy covers prod).
func (d *diffSide) setup(ctx context.Context, t *testing.T, admin *rest.Config) {
	t.Helper()
	for _, ns := range []string{"prod", "web-a"} {
		if _, err := d.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		if _, err := d.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
	}
	if _, err := d.admin.RbacV1().RoleBindings("prod").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: cluster.BobUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	var err error
	if d.node, err = cluster.StartNode(ctx, admin, "standin-"+d.name, filepath.Join(d.work, "node")); err != nil {
		t.Fatalf("%s: stand-in node: %v", d.name, err)
	}
	t.Cleanup(func() { _ = d.node.Stop() })
	for _, ns := range []string{"prod", "web-a"} {
		if err := d.node.RunPod(ctx, ns, "web", "app"); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
	}
}

// csrManifest is a CertificateSigningRequest named name for signer (a fresh ECDSA key's
// request for CN name), with the client usages kube-apiserver requires of
// kubernetes.io/kube-apiserver-client and accepts for any other signer.
func csrManifest(t *testing.T, name, signer string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	req := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	return fmt.Appendf(nil, `apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  request: %s
  signerName: %s
  usages: [digital signature, client auth]
`, name, req, signer)
}

// differentialScript is the kubectl session of TestDifferentialChecks, as bob (team web):
// streams over both transports in prod (RBAC edit, Deny on the streams) and web-a (Allow of
// everything), kubectl debug, RBAC writes that need bind or escalate, CSRs and their approval,
// token requests, --as, and kubectl auth can-i before the commands it speaks for.
func differentialScript(t *testing.T, local string) []diffStep {
	src := filepath.Join(local, "notes.txt")
	if err := os.WriteFile(src, []byte("copied\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var script []diffStep
	for _, ns := range []string{"web-a", "prod"} {
		script = append(script,
			diffStep{args: []string{"-n", ns, "auth", "can-i", "create", "pods", "--subresource=exec"}},
			diffStep{args: []string{"-n", ns, "auth", "can-i", "get", "pods", "--subresource=exec"}},
			diffStep{args: []string{"-n", ns, "auth", "can-i", "create", "pods", "--subresource=attach"}},
			diffStep{args: []string{"-n", ns, "auth", "can-i", "create", "pods", "--subresource=portforward"}},
			diffStep{args: []string{"-n", ns, "get", "pods"}},
			diffStep{args: []string{"-n", ns, "logs", "web", "-c", "app", "--tail=1"}},
		)
		for _, transport := range [][]string{overWebSockets, overSPDY} {
			script = append(script,
				diffStep{args: []string{"-n", ns, "exec", "web", "-c", "app", "--", "echo", "hi"}, env: transport},
				diffStep{args: []string{"-n", ns, "attach", "-i", "web", "-c", "app"}, stdin: []byte("typed\n"), env: transport},
				diffStep{args: []string{"-n", ns, "port-forward", "pod/web", ":80"}, env: transport, portForward: true},
				diffStep{args: []string{"-n", ns, "cp", src, ns + "/web:/tmp/notes.txt", "-c", "app"}, env: transport},
				diffStep{args: []string{"-n", ns, "cp", ns + "/web:/tmp/notes.txt", filepath.Join(local, "back-"+ns+".txt"), "-c", "app"}, env: transport},
			)
		}
		script = append(script,
			diffStep{args: []string{"-n", ns, "debug", "web", "--image=busybox", "-c", "debugger", "--profile=general"}},
			diffStep{args: []string{"-n", ns, "create", "token", "ci"}},
			diffStep{args: []string{"-n", ns, "get", "--raw", "/api/v1/namespaces/" + ns + "/pods/web:80/proxy/"}},
			diffStep{args: []string{"-n", ns, "get", "pods", "-l", "app=web", "-o", "name"}},
			diffStep{args: []string{"-n", ns, "label", "pod", "web", "checked=yes"}},
		)
	}
	script = append(script,
		// RBAC writes: bind and escalate checks inside the request.
		diffStep{args: []string{"-n", "web-a", "auth", "can-i", "bind", "clusterroles/cluster-admin"}},
		diffStep{args: []string{"-n", "web-a", "create", "rolebinding", "ci-admin", "--clusterrole=cluster-admin", "--serviceaccount=web-a:ci"}},
		diffStep{args: []string{"-n", "web-a", "auth", "can-i", "bind", "clusterroles/view"}},
		diffStep{args: []string{"-n", "web-a", "create", "rolebinding", "ci-view", "--clusterrole=view", "--serviceaccount=web-a:ci"}},
		diffStep{args: []string{"-n", "web-a", "create", "role", "secret-reader", "--verb=get", "--resource=secrets"}},
		diffStep{args: []string{"-n", "web-a", "create", "rolebinding", "ci-secrets", "--role=secret-reader", "--serviceaccount=web-a:ci"}},
		diffStep{args: []string{"auth", "can-i", "escalate", "clusterroles"}},
		diffStep{args: []string{"create", "clusterrole", "web-pod-reader", "--verb=get", "--resource=pods"}},
		diffStep{args: []string{"auth", "can-i", "bind", "clusterroles/view"}},
		diffStep{args: []string{"create", "clusterrolebinding", "web-view", "--clusterrole=view", "--serviceaccount=web-a:ci"}},
		diffStep{args: []string{"create", "clusterrolebinding", "web-admin", "--clusterrole=cluster-admin", "--serviceaccount=web-a:ci"}},
		diffStep{args: []string{"-n", "prod", "create", "rolebinding", "ci-edit", "--clusterrole=edit", "--serviceaccount=prod:ci"}},
		// CSRs: the approval's signer check.
		diffStep{args: []string{"create", "-f", "-"}, stdin: csrManifest(t, "csr-web", "example.com/web")},
		diffStep{args: []string{"create", "-f", "-"}, stdin: csrManifest(t, "csr-other", "example.com/other")},
		diffStep{args: []string{"create", "-f", "-"}, stdin: csrManifest(t, "csr-client", "kubernetes.io/kube-apiserver-client")},
		diffStep{args: []string{"certificate", "approve", "csr-web"}},
		diffStep{args: []string{"certificate", "approve", "csr-other"}},
		diffStep{args: []string{"certificate", "approve", "csr-client"}},
		diffStep{args: []string{"auth", "whoami"}},
		// Impersonation: impersonate checks behind the webhook; the proxy refuses kubectl --as
		// whatever they would answer (a ServiceAccount of web-a, which rule web-everything
		// lets bob impersonate behind the webhook, included).
		diffStep{args: []string{"-n", "web-a", "get", "pods", "--as", cluster.AliceUser}},
		diffStep{args: []string{"-n", "web-a", "get", "pods", "--as", cluster.BobUser, "--as-group", "system:masters"}},
		diffStep{args: []string{"-n", "web-a", "get", "pods", "--as", "system:serviceaccount:web-a:ci"}},
	)
	return script
}

// canIPairs names, by their argument lists, a kubectl auth can-i and the commands whose
// answer it must predict: the can-i asks about the check that decides them.
var canIPairs = map[string][]string{
	"-n web-a auth can-i create pods --subresource=exec":        {"-n web-a exec web -c app -- echo hi"},
	"-n prod auth can-i create pods --subresource=exec":         {"-n prod exec web -c app -- echo hi"},
	"-n web-a auth can-i create pods --subresource=attach":      {"-n web-a attach -i web -c app"},
	"-n prod auth can-i create pods --subresource=attach":       {"-n prod attach -i web -c app"},
	"-n web-a auth can-i create pods --subresource=portforward": {"-n web-a port-forward pod/web :80"},
	"-n prod auth can-i create pods --subresource=portforward":  {"-n prod port-forward pod/web :80"},
	"-n web-a auth can-i bind clusterroles/cluster-admin":       {"-n web-a create rolebinding ci-admin --clusterrole=cluster-admin --serviceaccount=web-a:ci"},
}

// TestDifferentialChecks shows that every authorization check kube-apiserver makes while
// serving a request (the request's own and the checks inside it: the WebSocket upgrade's
// create on pods/exec, attach and portforward, RBAC's bind and escalate, a CSR approval's
// approve on its signer) gets the same verdict through octogate's proxy as behind its
// authorization webhook. One kubectl session as bob runs against a webhook-mode
// cluster, whose SubjectAccessReviews a recorder in front of /authorize keeps with octogate's
// verdicts (kube-apiserver's own account of its checks), and the same session runs through the
// proxy of a managed-like cluster with the same policy and RBAC, whose decisions octogate logs
// at debug level. Every check recorded for bob must have been evaluated by the proxy with the
// same verdict, every command must end the same way on both paths, and kubectl auth can-i must
// agree with what the command it asks for then does.
//
// Only checks of bob are compared: kube-apiserver's own, the controllers' and the proxy's
// ServiceAccount's reach no webhook or are not the user's. kubectl --as is the exception by
// design: the proxy refuses it outright (403 naming kubectl --as) and decides nothing, while
// behind the webhook the impersonate checks decide (kube-apiserver 1.37 asks
// impersonate-on:KIND:VERB, impersonate:KIND, then impersonate); the transcript lists them.
func TestDifferentialChecks(t *testing.T) {
	e := requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := t.TempDir()
	gh := githubapi.NewTLS()
	t.Cleanup(gh.Close)
	if err := gh.Load(cluster.Fixture()); err != nil {
		t.Fatal(err)
	}
	githubCA := filepath.Join(work, "github-ca.crt")
	if err := gh.WriteCAFile(githubCA); err != nil {
		t.Fatal(err)
	}
	binary := e.cluster.Config.OctogateBinary

	// Both clusters start at once: each waits on its own processes most of the time.
	octogatePort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	webhookWork := filepath.Join(work, "webhook")
	rec := startSARRecorder(t, filepath.Join(webhookWork, "certs"), fmt.Sprintf("https://127.0.0.1:%d", octogatePort))
	var (
		wc          *cluster.Cluster
		m           *cluster.Managed
		wcErr, mErr error
		wg          sync.WaitGroup
		started     = time.Now()
	)
	wg.Go(func() {
		wc, wcErr = cluster.Start(ctx, cluster.Config{
			BinDir: e.binDir, OctogateBinary: binary, WorkDir: webhookWork,
			GitHubAPIURL: gh.URL(), GitHubCAFile: githubCA, Orgs: []string{cluster.Org},
			Policy: []byte(differentialPolicy), Port: octogatePort, AuthzServer: rec.URL,
			TokenReviewVersion: "v1", OctogateEnv: []string{"OCTOGATE_NAMESPACE=default"},
			// Every check of every request reaches the recorder, none answered from a cache.
			AuthzUncached: true,
		})
	})
	wg.Go(func() {
		m, mErr = cluster.StartManaged(ctx, cluster.ManagedConfig{
			BinDir: e.binDir, OctogateBinary: binary, WorkDir: filepath.Join(work, "managed"),
			GitHubAPIURL: gh.URL(), GitHubCAFile: githubCA, Orgs: []string{cluster.Org},
			Policy: []byte(differentialPolicy),
			// Debug: the proxy logs each decision it makes, which the test compares.
			OctogateEnv: []string{"OCTOGATE_PROXY_RBAC=true", "OCTOGATE_LOG_LEVEL=debug", "OCTOGATE_LOG_FORMAT=json", "OCTOGATE_NAMESPACE=default"},
		})
	})
	wg.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{"webhook/octogate.log", "webhook/kube-apiserver.log", "managed/octogate.log", "managed/kube-apiserver.log"} {
				if b, err := os.ReadFile(filepath.Join(work, p)); err == nil {
					t.Logf("--- %s (end) ---\n%s", p, b[max(0, len(b)-3000):])
				}
			}
		}
		if err := wc.Stop(); err != nil {
			t.Errorf("stop the webhook-mode cluster: %v", err)
		}
		if err := m.Stop(); err != nil {
			t.Errorf("stop the managed-like cluster: %v", err)
		}
	})
	if wcErr != nil || mErr != nil {
		t.Fatalf("start the clusters: webhook mode: %v; managed-like: %v", wcErr, mErr)
	}
	t.Logf("MEASURED: both clusters up in %s", time.Since(started).Round(time.Millisecond))

	webhook := &diffSide{name: "webhook", work: webhookWork}
	proxied := &diffSide{name: "proxy", work: filepath.Join(work, "managed")}
	if webhook.admin, err = kubernetes.NewForConfig(wc.APIServer.Admin); err != nil {
		t.Fatal(err)
	}
	if proxied.admin, err = kubernetes.NewForConfig(m.APIServer.Admin); err != nil {
		t.Fatal(err)
	}
	users := []cluster.KubeconfigUser{{Name: "bob", Token: cluster.BobToken}}
	for _, side := range []*diffSide{webhook, proxied} {
		home := filepath.Join(side.work, "home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		side.kubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: filepath.Join(side.work, "bob.kubeconfig"), Home: home}
	}
	if err := wc.APIServer.WriteKubeconfig(webhook.kubectl.Kubeconfig, "", users); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteProxyKubeconfig(proxied.kubectl.Kubeconfig, users); err != nil {
		t.Fatal(err)
	}
	webhook.setup(ctx, t, wc.APIServer.Admin)
	proxied.setup(ctx, t, m.APIServer.Admin)
	if err := m.WaitProxyRBAC(ctx, []byte(differentialPolicy)); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		step           diffStep
		webhook, proxy cluster.Result
		// checks are those kube-apiserver sent the webhook during the step; the proxy's are
		// the decisions it logged between proxyFrom and proxyTo.
		checks             []decided
		proxyFrom, proxyTo time.Time
	}
	var outcomes []outcome
	for _, step := range differentialScript(t, t.TempDir()) {
		mark := rec.mark()
		w := webhook.run(t, step)
		checks := rec.since(mark)
		from := time.Now()
		p := proxied.run(t, step)
		outcomes = append(outcomes, outcome{step, w, p, checks, from, time.Now()})
	}

	// The proxy's log is written through a buffer: a last request whose decision is known
	// marks the end of the script's lines.
	sentinel := diffStep{args: []string{"-n", "web-a", "get", "configmap", "end-of-script", "--ignore-not-found"}}
	proxied.run(t, sentinel)
	var decisions []proxyDecision
	sentinelCheck := check{User: cluster.BobUser, Verb: "get", Resource: "configmaps", Namespace: "web-a", Name: "end-of-script"}
	for deadline := time.Now().Add(10 * time.Second); ; {
		decisions = proxyDecisions(t, m.Octogate.LogPath)
		if slices.ContainsFunc(decisions, func(d proxyDecision) bool { return d.check == sentinelCheck }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy logged no decision on %s within 10 s (OCTOGATE_LOG_LEVEL=debug)", sentinelCheck)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var transcript, divergent, distinct, answers []string
	seen := map[check]bool{}
	for _, o := range outcomes {
		wv, pv := verdict(o.webhook), verdict(o.proxy)
		transcript = append(transcript, fmt.Sprintf("%s\n    webhook: %s, proxy: %s", o.step, wv, pv))
		if o.step.impersonates() {
			// Refused by the proxy by design; behind the webhook the impersonate checks
			// decide, and are listed.
			if o.proxy.ExitCode == 0 || !strings.Contains(o.proxy.Stderr, "kubectl --as") {
				answers = append(answers, fmt.Sprintf("%s: the proxy did not refuse kubectl --as (%s)\n    proxy stderr: %s", o.step, pv, strings.TrimSpace(o.proxy.Stderr)))
			}
		} else if wv != pv {
			answers = append(answers, fmt.Sprintf("%s: webhook %s, proxy %s\n    webhook stderr: %s\n    proxy stderr: %s",
				o.step, wv, pv, strings.TrimSpace(o.webhook.Stderr), strings.TrimSpace(o.proxy.Stderr)))
		}
		// What the proxy decided during this step, check by check.
		proxyVerdicts := map[check][]string{}
		for _, d := range decisions {
			if !d.at.Before(o.proxyFrom) && !d.at.After(o.proxyTo) && !slices.Contains(proxyVerdicts[d.check], d.Verdict) {
				proxyVerdicts[d.check] = append(proxyVerdicts[d.check], d.Verdict)
			}
		}
		stepSeen := map[check]bool{}
		for _, c := range o.checks {
			if c.User != cluster.BobUser || stepSeen[c.check] {
				continue
			}
			stepSeen[c.check], seen[c.check] = true, true
			transcript = append(transcript, fmt.Sprintf("    check %s: %s", c.check, c.Verdict))
			if o.step.impersonates() {
				continue // the proxy decides nothing: it refuses kubectl --as (above)
			}
			var diff string
			switch got := proxyVerdicts[c.check]; {
			case len(got) == 0:
				diff = fmt.Sprintf("%s: webhook %s, proxy never evaluated it", c.check, c.Verdict)
			case !slices.Equal(got, []string{c.Verdict}):
				diff = fmt.Sprintf("%s: webhook %s, proxy %s", c.check, c.Verdict, strings.Join(got, ","))
			default:
				continue
			}
			divergent = append(divergent, diff+"\n      in: "+o.step.String())
			if !slices.Contains(distinct, diff) {
				distinct = append(distinct, diff)
			}
		}
	}
	t.Logf("transcript (each command's answer on both paths, then the checks kube-apiserver sent octogate's webhook):\n%s", strings.Join(transcript, "\n"))

	// kubectl auth can-i speaks for the command it names, on each path.
	answerOf := map[string][2]string{}
	for _, o := range outcomes {
		if o.step.env == nil { // the default transport
			answerOf[strings.Join(o.step.args, " ")] = [2]string{verdict(o.webhook), verdict(o.proxy)}
		}
	}
	var canI []string
	for q, cmds := range canIPairs {
		for _, c := range cmds {
			qa, ca := answerOf[q], answerOf[c]
			for i, path := range []string{"webhook", "proxy"} {
				if (qa[i] == "yes") != (ca[i] == "allowed") {
					canI = append(canI, fmt.Sprintf("%s: kubectl %s says %s, kubectl %s is %s", path, q, qa[i], c, ca[i]))
				}
			}
		}
	}
	slices.Sort(canI)

	if len(divergent) > 0 {
		t.Errorf("%d checks kube-apiserver made behind the webhook got another verdict through the proxy (attributes: webhook verdict, proxy verdict; the command):\n  %s\n"+
			"%d distinct:\n  %s", len(divergent), strings.Join(divergent, "\n  "), len(distinct), strings.Join(distinct, "\n  "))
	}
	if len(answers) > 0 {
		t.Errorf("%d commands ended differently:\n  %s", len(answers), strings.Join(answers, "\n  "))
	}
	if len(canI) > 0 {
		t.Errorf("kubectl auth can-i disagrees with what then happens:\n  %s", strings.Join(canI, "\n  "))
	}
	if len(seen) < 20 {
		t.Errorf("only %d distinct checks of %s recorded behind the webhook: the recorder missed the script", len(seen), cluster.BobUser)
	}
}
