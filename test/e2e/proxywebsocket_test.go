package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/cluster"
)

// TestProxyBrowserStyleWebSocketExec execs through the proxy as a browser does: no
// Authorization header (a browser cannot set one on a WebSocket), the token in the subprotocol
// base64url.bearer.authorization.k8s.io.<token> beside v5.channel.k8s.io. The proxy
// authenticates it as kube-apiserver would, strips it, and kube-apiserver answers the
// remaining subprotocol and runs the command as the user.
func TestProxyBrowserStyleWebSocketExec(t *testing.T) {
	e := requireEnv(t)
	p := startProxyEnv(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := cluster.StartNode(ctx, p.m.APIServer.Admin, "standin-ws", filepath.Join(p.work, "node"))
	if err != nil {
		t.Fatalf("stand-in node: %v", err)
	}
	t.Cleanup(func() { _ = node.Stop() })
	const ns, pod = "bob-ws", "web"
	if res := p.as(t, "bob", "create", "namespace", ns); res.ExitCode != 0 {
		t.Fatalf("bob creates %s:\n%s", ns, res)
	}
	if err := node.RunPod(ctx, ns, pod, "app"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "bob may exec in his namespace (owner RoleBinding)", func() (bool, error) {
		if res := p.as(t, "bob", "auth", "can-i", "create", "pods/exec", "-n", ns); verdict(res) != "yes" {
			return false, fmt.Errorf("%s", res)
		}
		return true, nil
	})

	target, _ := url.Parse(p.m.ProxyURL)
	path := "/api/v1/namespaces/" + ns + "/pods/" + pod + "/exec?command=echo&command=hi&container=app&stdout=true"
	protocol := func(token string) string {
		return "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(token))
	}

	t.Run("the token as a subprotocol runs the command as bob", func(t *testing.T) {
		resp, br := websocketUpgrade(t, p, target.Host, path, "v5.channel.k8s.io, "+protocol(cluster.BobToken)) //nolint:bodyclose // websocketUpgrade closes it at cleanup
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "v5.channel.k8s.io" {
			t.Errorf("kube-apiserver answered subprotocol %q, want v5.channel.k8s.io", got)
		}
		var stdout strings.Builder
		for {
			opcode, payload, err := readFrame(br)
			if err != nil {
				t.Fatalf("reading the stream: %v (stdout so far %q)", err, stdout.String())
			}
			if opcode == 8 { // close
				break
			}
			if len(payload) > 0 && payload[0] == 1 { // stdout
				stdout.Write(payload[1:])
			}
		}
		if stdout.String() != "hi\n" {
			t.Errorf("stdout %q, want hi", stdout.String())
		}
	})
	t.Run("a token GitHub does not know is 401", func(t *testing.T) {
		resp, _ := websocketUpgrade(t, p, target.Host, path, "v5.channel.k8s.io, "+protocol("not-a-github-token")) //nolint:bodyclose // websocketUpgrade closes it at cleanup
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("got %d, want 401", resp.StatusCode)
		}
	})
}

// websocketUpgrade opens a WebSocket to the proxy at path with the given subprotocols and no
// Authorization, and returns the answer and the connection's reader (20 s deadline).
func websocketUpgrade(t *testing.T, p *proxyEnv, host, path, protocols string) (*http.Response, *bufio.Reader) {
	t.Helper()
	tr := p.client.Transport.(*http.Transport)
	conf := tr.TLSClientConfig.Clone()
	conf.NextProtos = []string{"http/1.1"}
	conn, err := tls.Dial("tcp", host, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	key := base64.StdEncoding.EncodeToString([]byte("octogate-e2e-key"))
	_, _ = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		path, host, key, protocols)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp, br
}

// readFrame reads one WebSocket frame a server sent (unmasked, RFC 6455 section 5.2).
func readFrame(br *bufio.Reader) (opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, fmt.Errorf("a frame of %d bytes", n)
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(br, payload)
	return h[0] & 0x0f, payload, err
}
