package nodeapi

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/octogate/octogate/internal/syncbuf"
)

const (
	testNS  = "team-a"
	testPod = "web"
)

func startServer(t *testing.T) *Server {
	t.Helper()
	s, err := Start(Config{FollowInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := s.AddPod(testNS, testPod, "app", "sidecar"); err != nil {
		t.Fatal(err)
	}
	return s
}

func restConfig(s *Server) *rest.Config {
	return &rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: s.CA()}}
}

func httpClient(t *testing.T, s *Server) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CA()) {
		t.Fatal("CA is not PEM")
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// execURL is the URL kube-apiserver builds for an exec (pkg/registry/core/pod/strategy.go).
func execURL(s *Server, container string, stdin bool, cmd ...string) *url.URL {
	q := url.Values{"output": {"1"}, "error": {"1"}, "command": cmd}
	if stdin {
		q.Set("input", "1")
	}
	u, _ := url.Parse(s.URL() + "/exec/" + testNS + "/" + testPod + "/" + container + "?" + q.Encode())
	return u
}

func spdyExecutor(t *testing.T, s *Server, u *url.URL, protocols ...string) remotecommand.Executor {
	t.Helper()
	rt, upgrader, err := spdy.RoundTripperFor(restConfig(s))
	if err != nil {
		t.Fatal(err)
	}
	if len(protocols) == 0 {
		e, err := remotecommand.NewSPDYExecutorForTransports(rt, upgrader, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e, err := remotecommand.NewSPDYExecutorForProtocols(rt, upgrader, http.MethodPost, u, protocols...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wsExecutor(t *testing.T, s *Server, u *url.URL, protocols ...string) remotecommand.Executor {
	t.Helper()
	e, err := remotecommand.NewWebSocketExecutorForProtocols(restConfig(s), http.MethodGet, u.String(), protocols...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type result struct {
	stdout, stderr string
	err            error
}

func stream(t *testing.T, e remotecommand.Executor, stdin io.Reader) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out, errOut syncbuf.Buffer
	err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errOut})
	return result{out.String(), errOut.String(), err}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	return -1
}

func TestExecEchoOverEverySPDYProtocol(t *testing.T) {
	s := startServer(t)
	for _, proto := range []string{
		remotecommandconsts.StreamProtocolV5Name,
		remotecommandconsts.StreamProtocolV4Name,
		remotecommandconsts.StreamProtocolV3Name,
		remotecommandconsts.StreamProtocolV2Name,
		remotecommandconsts.StreamProtocolV1Name,
	} {
		t.Run(proto, func(t *testing.T) {
			r := stream(t, spdyExecutor(t, s, execURL(s, "app", false, "echo", "hi", "there"), proto), nil)
			if r.err != nil || r.stdout != "hi there\n" {
				t.Fatalf("echo hi there over %s: stdout %q, err %v", proto, r.stdout, r.err)
			}
			reqs := s.Requests()
			last := reqs[len(reqs)-1]
			if last.Upgrade != "SPDY/3.1" || strings.Join(last.StreamProtocols, ",") != proto {
				t.Errorf("node saw upgrade %q with protocols %v; want SPDY/3.1 offering %s", last.Upgrade, last.StreamProtocols, proto)
			}
		})
	}
}

func TestExecOverWebSocketLegacyProtocols(t *testing.T) {
	s := startServer(t)
	for _, proto := range []string{remotecommandconsts.StreamProtocolV4Name, remotecommandconsts.StreamProtocolV1Name} {
		t.Run(proto, func(t *testing.T) {
			r := stream(t, wsExecutor(t, s, execURL(s, "app", false, "echo", "hi"), proto), nil)
			if r.err != nil || r.stdout != "hi\n" {
				t.Fatalf("echo hi over websocket %s: stdout %q, err %v", proto, r.stdout, r.err)
			}
			reqs := s.Requests()
			if last := reqs[len(reqs)-1]; !strings.EqualFold(last.Upgrade, "websocket") {
				t.Errorf("node saw upgrade %q, want websocket", last.Upgrade)
			}
		})
	}
}

// kubectl's executor (websockets v5, falling back to SPDY on an upgrade failure) works
// straight against the node: v5 over websockets is refused, as by a kubelet without
// ExtendWebSocketsToKubelet, and SPDY takes over.
func TestKubectlFallbackExecutorEndsOnSPDY(t *testing.T) {
	s := startServer(t)
	u := execURL(s, "app", false, "echo", "fallback")
	ws, err := remotecommand.NewWebSocketExecutor(restConfig(s), http.MethodGet, u.String())
	if err != nil {
		t.Fatal(err)
	}
	e, err := remotecommand.NewFallbackExecutor(ws, spdyExecutor(t, s, u), func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	r := stream(t, e, nil)
	if r.err != nil || r.stdout != "fallback\n" {
		t.Fatalf("stdout %q, err %v", r.stdout, r.err)
	}
	var upgrades []string
	for _, req := range s.Requests() {
		upgrades = append(upgrades, strings.ToLower(req.Upgrade))
	}
	if got := strings.Join(upgrades, ","); got != "websocket,spdy/3.1" {
		t.Errorf("upgrades seen = %s, want websocket then spdy/3.1", got)
	}
}

func TestExecResults(t *testing.T) {
	s := startServer(t)
	if err := s.WriteFile(testNS, testPod, "app", "/etc/motd", []byte("welcome\n")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		cmd        []string
		stdin      string
		wantOut    string
		wantErrSub string
		wantCode   int
	}{
		{name: "echo prints its arguments", cmd: []string{"echo", "a", "b"}, wantOut: "a b\n"},
		{name: "cat copies stdin until EOF", cmd: []string{"cat"}, stdin: "line 1\nline 2\n", wantOut: "line 1\nline 2\n"},
		{name: "cat prints a file", cmd: []string{"cat", "/etc/motd"}, wantOut: "welcome\n"},
		{name: "cat of a missing file exits 1", cmd: []string{"cat", "/nope"}, wantErrSub: "cat: /nope: No such file or directory", wantCode: 1},
		{name: "env names the pod", cmd: []string{"env"}, wantOut: "HOME=/root\nHOSTNAME=web\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nPOD_CONTAINER=app\nPOD_NAME=web\nPOD_NAMESPACE=team-a\n"},
		{name: "exit N exits N", cmd: []string{"exit", "3"}, wantCode: 3},
		{name: "unknown command exits 127", cmd: []string{"sh", "-c", "id"}, wantErrSub: `exec: "sh": executable file not found in $PATH`, wantCode: 127},
	} {
		for _, transport := range []string{"spdy", "websocket"} {
			if transport == "websocket" && c.stdin != "" {
				// v4.channel.k8s.io has no way to say "stdin ended" (v5 added it), so a
				// command reading stdin to EOF never ends over it.
				continue
			}
			t.Run(c.name+" over "+transport, func(t *testing.T) {
				u := execURL(s, "app", c.stdin != "", c.cmd...)
				var e remotecommand.Executor
				if transport == "spdy" {
					e = spdyExecutor(t, s, u)
				} else {
					e = wsExecutor(t, s, u, remotecommandconsts.StreamProtocolV4Name)
				}
				var stdin io.Reader
				if c.stdin != "" {
					stdin = strings.NewReader(c.stdin)
				}
				r := stream(t, e, stdin)
				if code := exitCode(r.err); code != c.wantCode {
					t.Errorf("exit code %d (err %v), want %d", code, r.err, c.wantCode)
				}
				if r.stdout != c.wantOut {
					t.Errorf("stdout %q, want %q", r.stdout, c.wantOut)
				}
				if !strings.Contains(r.stderr, c.wantErrSub) {
					t.Errorf("stderr %q, want it to contain %q", r.stderr, c.wantErrSub)
				}
			})
		}
	}
}

func TestExecUnknownPodOrContainerIsNotFound(t *testing.T) {
	s := startServer(t)
	for _, path := range []string{"/exec/" + testNS + "/nope/app", "/exec/" + testNS + "/" + testPod + "/nope"} {
		u, _ := url.Parse(s.URL() + path + "?output=1&command=echo")
		r := stream(t, spdyExecutor(t, s, u), nil)
		if r.err == nil || !strings.Contains(r.err.Error(), "not found") {
			t.Errorf("%s: err %v, want a not-found upgrade failure", path, r.err)
		}
	}
}

// TestCopyIntoAndOutOfAPod runs the commands kubectl cp runs (k8s.io/kubectl/pkg/cmd/cp).
func TestCopyIntoAndOutOfAPod(t *testing.T) {
	s := startServer(t)
	run := func(stdin []byte, cmd ...string) result {
		t.Helper()
		var in io.Reader
		if stdin != nil {
			in = bytes.NewReader(stdin)
		}
		return stream(t, spdyExecutor(t, s, execURL(s, "app", stdin != nil, cmd...)), in)
	}
	if r := run(nil, "test", "-d", "/tmp"); r.err != nil {
		t.Fatalf("test -d /tmp: %v", r.err)
	}
	if r := run(nil, "test", "-d", "/tmp/notes.txt"); exitCode(r.err) != 1 {
		t.Fatalf("test -d of a missing path: %v, want exit 1", r.err)
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for _, f := range []struct{ name, body string }{{"tmp/notes.txt", "hello pod\n"}, {"tmp/sub/deeper.txt", "deep\n"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.body))
	}
	_ = tw.Close()
	if r := run(archive.Bytes(), "tar", "-xmf", "-", "-C", "/"); r.err != nil {
		t.Fatalf("tar -xmf - -C /: %v, stderr %s", r.err, r.stderr)
	}
	if got, err := s.ReadFile(testNS, testPod, "app", "/tmp/notes.txt"); err != nil || string(got) != "hello pod\n" {
		t.Fatalf("copied file = %q, %v", got, err)
	}
	if _, err := s.ReadFile(testNS, testPod, "sidecar", "/tmp/notes.txt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the sidecar's filesystem has the file too (err %v); containers must not share files", err)
	}

	r := run(nil, "tar", "cf", "-", "/tmp")
	if r.err != nil {
		t.Fatalf("tar cf - /tmp: %v", r.err)
	}
	if !strings.Contains(r.stderr, "Removing leading `/' from member names") {
		t.Errorf("stderr %q, want GNU tar's leading-slash notice", r.stderr)
	}
	tr := tar.NewReader(strings.NewReader(r.stdout))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "tmp/sub/deeper.txt" {
			if b, _ := io.ReadAll(tr); string(b) != "deep\n" {
				t.Errorf("deeper.txt = %q", b)
			}
		}
	}
	if got := strings.Join(names, " "); got != "tmp/ tmp/notes.txt tmp/sub/ tmp/sub/deeper.txt" {
		t.Errorf("archive members = %s", got)
	}
}

func TestAttachEchoesStdin(t *testing.T) {
	s := startServer(t)
	u, _ := url.Parse(s.URL() + "/attach/" + testNS + "/" + testPod + "/app?input=1&output=1&error=1")
	r := stream(t, spdyExecutor(t, s, u), strings.NewReader("typed\n"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.HasPrefix(r.stdout, "stand-in container app of pod team-a/web started\n") || !strings.HasSuffix(r.stdout, "ready\ntyped\n") {
		t.Errorf("attach stdout %q: want the startup lines, then stdin echoed", r.stdout)
	}
}

func getLogs(t *testing.T, s *Server, query string) (int, string) {
	t.Helper()
	resp, err := httpClient(t, s).Get(s.URL() + "/containerLogs/" + testNS + "/" + testPod + "/app?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestContainerLogs(t *testing.T) {
	s := startServer(t)
	all := "stand-in container app of pod team-a/web started\nserving http on port 80 and echo on port 7\nready\n"
	for _, c := range []struct {
		name, query string
		code        int
		body        string
	}{
		{"all lines", "", 200, all},
		{"tailLines keeps the last lines", "tailLines=1", 200, "ready\n"},
		{"limitBytes cuts the log", "limitBytes=9", 200, "stand-in "},
		{"previous has no terminated container", "previous=true", 400, `previous terminated container "app" in pod "web" not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := getLogs(t, s, c.query)
			// virtual-kubelet prefixes error bodies with its own words.
			if code != c.code || (body != c.body && (code == 200 || !strings.HasSuffix(body, c.body))) {
				t.Errorf("GET ?%s = %d %q, want %d %q", c.query, code, body, c.code, c.body)
			}
		})
	}
	t.Run("timestamps prefix RFC 3339 times", func(t *testing.T) {
		_, body := getLogs(t, s, "timestamps=true&tailLines=1")
		ts, text, ok := strings.Cut(strings.TrimSuffix(body, "\n"), " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !ok || text != "ready" {
			t.Errorf("body %q: want \"<RFC 3339 time> ready\" (%v)", body, err)
		}
	})
	t.Run("unknown container is not found", func(t *testing.T) {
		resp, err := httpClient(t, s).Get(s.URL() + "/containerLogs/" + testNS + "/" + testPod + "/nope")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %d, want 404", resp.StatusCode)
		}
	})
}

func TestFollowedLogsGrowUntilTheClientLeaves(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/containerLogs/"+testNS+"/"+testPod+"/app?follow=true&tailLines=1", nil)
	resp, err := httpClient(t, s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for len(lines) < 3 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if want := []string{"ready", FollowLine(1), FollowLine(2)}; fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("followed lines %q, want %q (err %v)", lines, want, sc.Err())
	}
}

func forwardPorts(t *testing.T, s *Server, dialer httpstream.Dialer, remotePort int) (localPort uint16) {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remotePort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc, ended := make(chan error, 1), make(chan struct{})
	go func() {
		errc <- pf.ForwardPorts()
		close(ended)
	}()
	t.Cleanup(func() {
		close(stop)
		<-ended
	})
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port forward: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("port forward not ready in 10s")
	}
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return ports[0].Local
}

func spdyDialer(t *testing.T, s *Server) httpstream.Dialer {
	t.Helper()
	rt, upgrader, err := spdy.RoundTripperFor(restConfig(s))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.URL() + "/portForward/" + testNS + "/" + testPod)
	return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
}

func TestPortForward(t *testing.T) {
	s := startServer(t)
	tunnel, err := portforward.NewSPDYOverWebsocketDialerForStreaming(must(url.Parse(s.URL()+"/portForward/"+testNS+"/"+testPod)), restConfig(s))
	if err != nil {
		t.Fatal(err)
	}
	dialers := map[string]httpstream.Dialer{
		"spdy": spdyDialer(t, s),
		// kubectl's dialer (k8s.io/kubectl/pkg/cmd/portforward createDialer): the websocket
		// tunnel is refused by a node, SPDY takes over.
		"kubectl fallback": portforward.NewFallbackDialerForStreaming(tunnel, spdyDialer(t, s), func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		}),
	}
	for name, d := range dialers {
		t.Run(name+" to port 80 answers HTTP", func(t *testing.T) {
			port := forwardPorts(t, s, d, HTTPPort)
			c := &http.Client{Timeout: 10 * time.Second}
			resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(b) != "hello from web\n" {
				t.Errorf("GET through the forward = %d %q", resp.StatusCode, b)
			}
		})
	}
}

func TestPortForwardEchoAndRefusedPorts(t *testing.T) {
	s := startServer(t)
	p, _, err := s.lookup(testNS, testPod, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	echo := &loopStream{in: strings.NewReader("ping")}
	if err := p.forward(ctx, EchoPort, echo); err != nil || echo.out.String() != "ping" {
		t.Errorf("port 7 echoed %q, err %v", echo.out.String(), err)
	}
	if err := p.forward(ctx, 81, &loopStream{in: strings.NewReader("")}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("port 81: err %v, want connection refused", err)
	}
}

type loopStream struct {
	in  io.Reader
	out bytes.Buffer
}

func (l *loopStream) Read(p []byte) (int, error)  { return l.in.Read(p) }
func (l *loopStream) Write(p []byte) (int, error) { return l.out.Write(p) }
func (l *loopStream) Close() error                { return nil }

func TestCloseEndsRunningStreams(t *testing.T) {
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddPod(testNS, testPod, "app"); err != nil {
		t.Fatal(err)
	}
	// cat echoes what arrives and then waits for more input, which never comes, until the
	// node stops.
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	e := spdyExecutor(t, s, execURL(s, "app", true, "cat"))
	go func() {
		done <- e.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdoutW, Stderr: io.Discard})
		_ = stdoutW.Close()
	}()
	go func() { _, _ = stdinW.Write([]byte("x")) }()
	echoed := make(chan string, 1)
	go func() {
		b := make([]byte, 1)
		_, _ = io.ReadFull(stdoutR, b)
		echoed <- string(b)
		_, _ = io.Copy(io.Discard, stdoutR)
	}()
	select {
	case got := <-echoed:
		if got != "x" {
			t.Fatalf("cat echoed %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cat did not echo within 10s")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		t.Logf("exec ended with the node: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("exec still running 10s after Close")
	}
}

func TestStartRefusesANonLoopbackAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "localhost:0"} {
		if s, err := Start(Config{Addr: addr}); err == nil {
			_ = s.Close()
			t.Errorf("Start(%q) succeeded; want a loopback-only error", addr)
		}
	}
}

func TestNoClientCertificateIsRecordedAsEmpty(t *testing.T) {
	s := startServer(t)
	_, _ = getLogs(t, s, "")
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].ClientCert != "" || reqs[0].Path != "/containerLogs/team-a/web/app" {
		t.Errorf("requests = %+v", reqs)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
