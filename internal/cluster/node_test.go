package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/octogate/octogate/internal/nodeapi"
	"github.com/octogate/octogate/internal/syncbuf"
)

const (
	standInNode = "standin-1"
	demoNS      = "demo"
	demoPod     = "web"
)

// kubectlModes are kubectl's two streaming transports: websockets (the default since 1.30,
// falling back to SPDY) and SPDY only.
var kubectlModes = []struct {
	name string
	env  []string
	// kubectl -v=4 logs these when it streams over websockets (client-go
	// tools/remotecommand and tools/portforward); over SPDY neither appears.
	execLog, portForwardLog string
}{
	{"websockets", nil, `"Subprotocol negotiated" protocol="v5.channel.k8s.io"`, `"Negotiation complete" protocol="portforward.k8s.io"`},
	{"spdy", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}, "", ""},
}

// checkTransport fails unless kubectl's -v=4 stderr shows the transport of mode: the
// websocket negotiation line and no fallback to SPDY, or (SPDY mode) no websocket at all.
func checkTransport(t *testing.T, stderr, want string) {
	t.Helper()
	switch {
	case strings.Contains(stderr, "fallback"):
		t.Errorf("kubectl fell back to SPDY:\n%s", stderr)
	case want != "" && !strings.Contains(stderr, want):
		t.Errorf("kubectl did not log %s:\n%s", want, stderr)
	case want == "" && (strings.Contains(stderr, "Subprotocol negotiated") || strings.Contains(stderr, "Negotiation complete")):
		t.Errorf("kubectl used websockets with them turned off:\n%s", stderr)
	}
}

// TestStandInNodeServesKubectl runs real kubectl as a system:masters admin against a real
// kube-apiserver (authorization Node,RBAC, as on a managed cluster) whose only node is a
// stand-in: exec, attach, logs -f, port-forward and cp, over websockets and over SPDY.
func TestStandInNodeServesKubectl(t *testing.T) {
	bin := requireBinaries(t, "etcd", "kube-apiserver", "kubectl")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	api, err := StartAPIServer(APIServerConfig{BinDir: bin, WorkDir: dir, AuthorizationModes: []string{"Node", "RBAC"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Error(err)
		}
	})
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig, "standin-admin", nil); err != nil {
		t.Fatal(err)
	}
	node, err := StartNode(ctx, api.Admin, standInNode, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs, err := kubernetes.NewForConfig(api.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := node.RunPod(ctx, demoNS, demoPod, "app", "sidecar"); err != nil {
		t.Fatalf("%v\n--- node log ---\n%s", err, tailFile(node.LogPath, 3000))
	}
	home := t.TempDir()
	kubectl := func(env []string) Kubectl {
		return Kubectl{Path: filepath.Join(bin, "kubectl"), Kubeconfig: kubeconfig, Home: home, Env: env}
	}
	// lastStream is the last streaming request the node received: kube-apiserver turns
	// kubectl's websockets into SPDY towards a node that does not declare
	// ExtendWebSocketsToKubelet, so every one arrives as SPDY/3.1.
	lastStream := func(t *testing.T, pathPrefix string) nodeapi.Request {
		t.Helper()
		reqs := node.API.Requests()
		for i := len(reqs) - 1; i >= 0; i-- {
			if strings.HasPrefix(reqs[i].Path, pathPrefix) {
				r := reqs[i]
				if r.Upgrade != "SPDY/3.1" {
					t.Errorf("%s arrived with upgrade %q, want SPDY/3.1", r.Path, r.Upgrade)
				}
				if r.ClientCert != "" {
					t.Errorf("kube-apiserver presented client certificate %q; without --kubelet-client-certificate it should present none", r.ClientCert)
				}
				t.Logf("node saw %s %s upgrade=%s protocols=%v", r.Method, r.Path, r.Upgrade, r.StreamProtocols)
				return r
			}
		}
		t.Fatalf("no request to %s reached the node", pathPrefix)
		return nodeapi.Request{}
	}
	run := func(t *testing.T, k Kubectl, stdin []byte, args ...string) Result {
		t.Helper()
		res, err := k.Run(ctx, stdin, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		return res
	}

	for _, mode := range kubectlModes {
		k := kubectl(mode.env)
		t.Run("exec over "+mode.name, func(t *testing.T) {
			res := run(t, k, nil, "-v=4", "-n", demoNS, "exec", demoPod, "-c", "app", "--", "echo", "hi")
			if res.ExitCode != 0 || res.Stdout != "hi\n" {
				t.Fatalf("want hi:\n%s", res)
			}
			checkTransport(t, res.Stderr, mode.execLog)
			lastStream(t, "/exec/demo/web/app")
		})
		t.Run("exec exit code over "+mode.name, func(t *testing.T) {
			if res := run(t, k, nil, "-n", demoNS, "exec", demoPod, "--", "exit", "3"); res.ExitCode != 3 {
				t.Errorf("want exit 3:\n%s", res)
			}
			if res := run(t, k, nil, "-n", demoNS, "exec", demoPod, "--", "sh"); res.ExitCode != nodeapi.ExitNotFound || !strings.Contains(res.Stderr, "executable file not found") {
				t.Errorf("want exit 127 and a not-found message:\n%s", res)
			}
		})
		t.Run("exec with stdin over "+mode.name, func(t *testing.T) {
			res := run(t, k, []byte("one\ntwo\n"), "-n", demoNS, "exec", "-i", demoPod, "-c", "sidecar", "--", "cat")
			if res.ExitCode != 0 || res.Stdout != "one\ntwo\n" {
				t.Fatalf("cat should end at the end of stdin and print it:\n%s", res)
			}
		})
		t.Run("attach over "+mode.name, func(t *testing.T) {
			res := run(t, k, []byte("typed\n"), "-n", demoNS, "attach", "-i", demoPod, "-c", "app")
			if res.ExitCode != 0 || !strings.Contains(res.Stdout, "stand-in container app of pod demo/web started") || !strings.HasSuffix(res.Stdout, "typed\n") {
				t.Fatalf("want the startup lines, then stdin echoed:\n%s", res)
			}
			lastStream(t, "/attach/demo/web/app")
		})
		t.Run("port-forward over "+mode.name, func(t *testing.T) {
			port, stop := portForward(ctx, t, k, "pod/"+demoPod, ":80")
			for i := range 2 { // two connections through one forward
				body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port))
				if body != "hello from web\n" {
					t.Fatalf("GET %d through the forward = %q", i, body)
				}
			}
			checkTransport(t, stop(), mode.portForwardLog)
			lastStream(t, "/portForward/demo/web")
		})
		t.Run("cp into and out of the pod over "+mode.name, func(t *testing.T) {
			local := t.TempDir()
			notes := filepath.Join(local, "notes.txt")
			if err := os.WriteFile(notes, []byte("hello from the laptop\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			remote := "/tmp/notes-" + mode.name + ".txt"
			if res := run(t, k, nil, "cp", notes, demoNS+"/"+demoPod+":"+remote, "-c", "app"); res.ExitCode != 0 {
				t.Fatalf("cp into the pod:\n%s", res)
			}
			if got, err := node.API.ReadFile(demoNS, demoPod, "app", remote); err != nil || string(got) != "hello from the laptop\n" {
				t.Fatalf("file in the pod = %q, %v", got, err)
			}
			back := filepath.Join(local, "back.txt")
			if res := run(t, k, nil, "cp", demoNS+"/"+demoPod+":"+remote, back, "-c", "app"); res.ExitCode != 0 {
				t.Fatalf("cp out of the pod:\n%s", res)
			}
			if got, err := os.ReadFile(back); err != nil || string(got) != "hello from the laptop\n" {
				t.Fatalf("file copied back = %q, %v", got, err)
			}

			site := filepath.Join(local, "site")
			if err := os.MkdirAll(filepath.Join(site, "css"), 0o700); err != nil {
				t.Fatal(err)
			}
			_ = os.WriteFile(filepath.Join(site, "index.html"), []byte("<h1>hi</h1>\n"), 0o600)
			_ = os.WriteFile(filepath.Join(site, "css", "a.css"), []byte("h1{}\n"), 0o600)
			// kubectl cp makes no parent directories; /tmp exists in every stand-in container.
			remoteDir := "/tmp/site-" + mode.name
			if res := run(t, k, nil, "cp", site, demoNS+"/"+demoPod+":"+remoteDir); res.ExitCode != 0 {
				t.Fatalf("cp a directory into the pod:\n%s", res)
			}
			res := run(t, k, nil, "exec", "-n", demoNS, demoPod, "--", "cat", remoteDir+"/index.html", remoteDir+"/css/a.css")
			if res.ExitCode != 0 || res.Stdout != "<h1>hi</h1>\nh1{}\n" {
				t.Fatalf("copied directory:\n%s", res)
			}
			out := filepath.Join(local, "site-back")
			if res := run(t, k, nil, "cp", demoNS+"/"+demoPod+":"+remoteDir, out); res.ExitCode != 0 {
				t.Fatalf("cp a directory out of the pod:\n%s", res)
			}
			if got, err := os.ReadFile(filepath.Join(out, "css", "a.css")); err != nil || string(got) != "h1{}\n" {
				t.Fatalf("directory copied back: css/a.css = %q, %v", got, err)
			}
		})
	}

	t.Run("logs -f receives a followed line", func(t *testing.T) {
		// --tail=1 is "ready\n"; --limit-bytes makes the node end the stream after the first
		// line that only a follow produces, so kubectl returns.
		limit := len("ready\n") + len(nodeapi.FollowLine(1)+"\n")
		res := run(t, kubectl(nil), nil, "-n", demoNS, "logs", "-f", demoPod, "-c", "app", "--tail=1", fmt.Sprintf("--limit-bytes=%d", limit))
		if res.ExitCode != 0 || res.Stdout != "ready\n"+nodeapi.FollowLine(1)+"\n" {
			t.Fatalf("want ready then %s:\n%s", nodeapi.FollowLine(1), res)
		}
	})
	t.Run("logs -f keeps streaming until kubectl is stopped", func(t *testing.T) {
		cmdCtx, stop := context.WithCancel(ctx)
		defer stop()
		cmd := kubectl(nil).Command(cmdCtx, "-n", demoNS, "logs", "-f", demoPod, "-c", "app", "--timestamps")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Wait() }()
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		want := []string{"started", "serving http", "ready", nodeapi.FollowLine(1), nodeapi.FollowLine(2)}
		for _, w := range want {
			select {
			case l, ok := <-lines:
				if !ok || !strings.Contains(l, w) || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT`).MatchString(l) {
					t.Fatalf("line %q (open %v), want a timestamped line containing %q", l, ok, w)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no line with %q within 20s", w)
			}
		}
		stop()
		for range lines {
		}
	})
	t.Run("deleting the pod removes it from the node at once", func(t *testing.T) {
		if err := node.RunPod(ctx, demoNS, "short-lived"); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Pods(demoNS).Delete(ctx, "short-lived", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Pods(demoNS).Get(ctx, "short-lived", metav1.GetOptions{})
			return apierrors.IsNotFound(err) && !node.API.HasPod(demoNS, "short-lived"), nil
		})
		if err != nil {
			t.Fatalf("pod still there after a graceful delete: %v", err)
		}
	})
	t.Run("the Node authorizer is on", func(t *testing.T) {
		cfg, err := api.AddUser("system:node:"+standInNode, "system:nodes")
		if err != nil {
			t.Fatal(err)
		}
		nodeClient, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nodeClient.CoreV1().Nodes().Get(ctx, standInNode, metav1.GetOptions{}); err != nil {
			t.Errorf("node identity reading its own Node: %v (RBAC alone would forbid it)", err)
		}
		if _, err := nodeClient.CoreV1().Nodes().Get(ctx, "another-node", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node identity reading another Node: %v, want forbidden", err)
		}
	})
}

// portForward starts `kubectl -v=4 port-forward --address 127.0.0.1 args...` in namespace demo and
// returns the local port it reports and a stop function that interrupts kubectl (as Ctrl-C
// does, so it flushes its log) and returns its stderr. The test's end stops it too.
func portForward(ctx context.Context, t *testing.T, k Kubectl, args ...string) (int, func() string) {
	t.Helper()
	cmdCtx, cancel := context.WithCancel(ctx)
	cmd := k.Command(cmdCtx, append([]string{"-v=4", "-n", demoNS, "port-forward", "--address", "127.0.0.1"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ports := make(chan int, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		re := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> `)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				var p int
				_, _ = fmt.Sscan(m[1], &p)
				select {
				case ports <- p:
				default:
				}
			}
		}
	}()
	var once sync.Once
	stop := func() string {
		once.Do(func() {
			cancel()
			<-drained
			_ = cmd.Wait()
		})
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	select {
	case p := <-ports:
		return p, stop
	case <-drained:
		t.Fatalf("kubectl port-forward ended: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward not ready in 30s: %s", stderr.String())
	}
	return 0, stop
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
