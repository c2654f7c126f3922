package e2e

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
	"testing"
	"time"

	"github.com/octogate/octogate/internal/cluster"
)

// proxyStreams drives exec, attach, logs -f, port-forward and cp through the proxy to a pod on a
// stand-in node (internal/nodeapi), over websockets (kubectl's default) and over SPDY:
// upgrades carry the impersonation, so bob's own namespace lets him in, and a Deny rule's
// namespace does not.
func proxyStreams(t *testing.T, p *proxyEnv) {
	ctx := context.Background()
	node, err := cluster.StartNode(ctx, p.m.APIServer.Admin, "standin-1", filepath.Join(p.work, "node"))
	if err != nil {
		t.Fatalf("stand-in node: %v", err)
	}
	t.Cleanup(func() { _ = node.Stop() })
	const ns, pod = "bob-streams", "web"
	if res := p.as(t, "bob", "create", "namespace", ns); res.ExitCode != 0 {
		t.Fatalf("bob creates %s:\n%s", ns, res)
	}
	if err := node.RunPod(ctx, ns, pod, "app"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "bob may exec in his namespace (owner RoleBinding)", func() (bool, error) {
		res := p.as(t, "bob", "auth", "can-i", "create", "pods/exec", "-n", ns)
		if verdict(res) != "yes" {
			return false, fmt.Errorf("%s", res)
		}
		return true, nil
	})
	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"websockets", nil},
		{"SPDY", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
	} {
		k := p.kubectl
		k.Env = mode.env
		run := func(t *testing.T, stdin []byte, args ...string) cluster.Result {
			t.Helper()
			res, err := k.Run(ctx, stdin, append([]string{"--context=bob", "-n", ns}, args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, res)
			}
			return res
		}
		t.Run("exec over "+mode.name, func(t *testing.T) {
			if res := run(t, nil, "exec", pod, "-c", "app", "--", "echo", "hi"); res.ExitCode != 0 || res.Stdout != "hi\n" {
				t.Fatalf("want hi:\n%s", res)
			}
			if res := run(t, []byte("one\ntwo\n"), "exec", "-i", pod, "--", "cat"); res.ExitCode != 0 || res.Stdout != "one\ntwo\n" {
				t.Fatalf("stdin through the proxy:\n%s", res)
			}
			if res := run(t, nil, "exec", pod, "--", "exit", "3"); res.ExitCode != 3 {
				t.Errorf("exit code through the proxy: want 3:\n%s", res)
			}
		})
		t.Run("attach over "+mode.name, func(t *testing.T) {
			res := run(t, []byte("typed\n"), "attach", "-i", pod, "-c", "app")
			if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "typed\n") {
				t.Fatalf("want stdin echoed by the attached container:\n%s", res)
			}
		})
		t.Run("port-forward over "+mode.name, func(t *testing.T) {
			lines := streamLines(t, k, "--context=bob", "-n", ns, "port-forward", "pod/"+pod, ":80")
			ports := make(chan string, 1)
			go func() {
				re := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> `)
				for l := range lines {
					if m := re.FindStringSubmatch(l); m != nil {
						ports <- m[1]
					}
				}
			}()
			var port string
			select {
			case port = <-ports:
			case <-time.After(20 * time.Second):
				t.Fatal("kubectl port-forward printed no port")
			}
			client := &http.Client{Timeout: 10 * time.Second}
			resp, err := client.Get("http://127.0.0.1:" + port + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(b) != "hello from "+pod+"\n" {
				t.Errorf("through the forward: %q", b)
			}
		})
		t.Run("cp both ways over "+mode.name, func(t *testing.T) {
			local := t.TempDir()
			src := filepath.Join(local, "notes.txt")
			if err := os.WriteFile(src, []byte("through the proxy\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			remote := "/tmp/notes-" + mode.name + ".txt"
			if res := run(t, nil, "cp", src, ns+"/"+pod+":"+remote, "-c", "app"); res.ExitCode != 0 {
				t.Fatalf("cp into the pod:\n%s", res)
			}
			back := filepath.Join(local, "back.txt")
			if res := run(t, nil, "cp", ns+"/"+pod+":"+remote, back, "-c", "app"); res.ExitCode != 0 {
				t.Fatalf("cp out of the pod:\n%s", res)
			}
			if got, err := os.ReadFile(back); err != nil || string(got) != "through the proxy\n" {
				t.Errorf("copied back: %q %v", got, err)
			}
		})
	}
	t.Run("logs -f streams as lines come", func(t *testing.T) {
		lines := streamLines(t, p.kubectl, "--context=bob", "-n", ns, "logs", "-f", pod, "-c", "app", "--tail=1")
		for i := range 3 {
			select {
			case l := <-lines:
				t.Logf("followed line %d: %s", i, l)
			case <-time.After(10 * time.Second):
				t.Fatalf("logs -f through the proxy: line %d did not arrive", i)
			}
		}
	})
	t.Run("exec where a Deny rule says no", func(t *testing.T) {
		res := p.as(t, "bob", "-n", "kube-system", "exec", "anything", "--", "echo")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, denySystemRule) {
			t.Errorf("want a 403 naming %s:\n%s", denySystemRule, res)
		}
	})
}

// streamLines runs a kubectl that streams until stopped (watch, logs -f, port-forward) and
// returns its stdout lines, closed when it ends; the test's end stops it.
func streamLines(t *testing.T, k cluster.Kubectl, args ...string) <-chan string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	cmd := k.Command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	return lines
}
