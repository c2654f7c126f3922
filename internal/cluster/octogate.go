package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// InitCerts runs `octogate certs init --dir dir --hosts h1,h2` (ca.crt, ca.key, tls.crt,
// tls.key, client.crt, client.key).
func InitCerts(ctx context.Context, binary, dir string, hosts []string) error {
	_, err := run(ctx, os.Environ(), binary, "certs", "init", "--dir", dir, "--hosts", strings.Join(hosts, ","))
	return err
}

// WebhookKubeconfig runs `octogate kubeconfig webhook --kind kind --server server --certs-dir
// certsDir` and returns the kubeconfig it prints. kind is authn, authz or admission.
func WebhookKubeconfig(ctx context.Context, binary, kind, server, certsDir string) ([]byte, error) {
	out, err := run(ctx, os.Environ(), binary, "kubeconfig", "webhook", "--kind", kind, "--server", server, "--certs-dir", certsDir)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("octogate kubeconfig webhook --kind %s printed nothing", kind)
	}
	return out, nil
}

// Octogate is `octogate serve` run from a built binary, on a TLS address with certificates
// from InitCerts.
type Octogate struct {
	// Binary is the path of the octogate binary.
	Binary string
	// CertsDir holds ca.crt, tls.crt and tls.key.
	CertsDir string
	// Addr is the host:port to listen on (OCTOGATE_LISTEN).
	Addr string
	// Env is added to the inherited environment, whose OCTOGATE_* and KUBECONFIG are dropped.
	Env []string
	// LogPath receives stdout and stderr (appended across restarts).
	LogPath string

	proc *Process
}

// URL is the server's base URL, https://Addr.
func (o *Octogate) URL() string { return "https://" + o.Addr }

// Running reports whether the process was started and has not exited.
func (o *Octogate) Running() bool {
	if o.proc == nil {
		return false
	}
	select {
	case <-o.proc.Done():
		return false
	default:
		return true
	}
}

// Start starts `octogate serve` and waits until GET /readyz answers 200 or ctx ends. On failure
// the process is stopped and the error carries the end of its log.
func (o *Octogate) Start(ctx context.Context) error {
	if o.Running() {
		return errors.New("octogate is already running")
	}
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OCTOGATE_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, o.Env...)
	proc, err := StartProcess("octogate", o.Binary, []string{"serve"}, env, o.LogPath)
	if err != nil {
		return err
	}
	o.proc = proc
	if err := o.waitReady(ctx); err != nil {
		_ = proc.Stop(5 * time.Second)
		return fmt.Errorf("%w\n--- octogate log (end) ---\n%s", err, proc.LogTail(4000))
	}
	return nil
}

func (o *Octogate) waitReady(ctx context.Context) error {
	caPEM, err := os.ReadFile(filepath.Join(o.CertsDir, "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s", filepath.Join(o.CertsDir, "ca.crt"))
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	defer client.CloseIdleConnections()
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.URL()+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("readyz: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		last = err
		select {
		case <-o.proc.Done():
			return fmt.Errorf("octogate exited before it was ready: %w", o.proc.ExitErr())
		case <-ctx.Done():
			return fmt.Errorf("octogate not ready at %s/readyz: %w (last: %w)", o.URL(), ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (o *Octogate) Stop() error {
	if o.proc == nil {
		return nil
	}
	return o.proc.Stop(10 * time.Second)
}

// Kill ends the server at once (Process.Kill): no graceful shutdown, its clients' connections
// are reset. Start may run it again.
func (o *Octogate) Kill() error {
	if o.proc == nil {
		return nil
	}
	return o.proc.Kill()
}

// Pid is the process id of the running server, or 0 before Start.
func (o *Octogate) Pid() int {
	if o.proc == nil {
		return 0
	}
	return o.proc.Pid()
}

// LogTail returns up to the last n bytes of the server's log.
func (o *Octogate) LogTail(n int) string { return tailFile(o.LogPath, n) }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
