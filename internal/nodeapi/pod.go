package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Ports a stand-in pod answers on when forwarded to.
const (
	// HTTPPort answers every HTTP request with 200 and the body "hello from POD\n".
	HTTPPort = 80
	// EchoPort copies what it receives back (the echo service of RFC 862).
	EchoPort = 7
)

// pod is a stand-in pod: its containers and its HTTP listener.
type pod struct {
	namespace, name string
	containers      map[string]*container
	web             *http.Server
	webAddr         string
	webDone         chan struct{}
}

// container is one stand-in container: a filesystem and the time it started.
type container struct {
	namespace, pod, name string
	started              time.Time
	fs                   *memFS
}

func newPod(namespace, name string) (*pod, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: listen for port %d: %w", namespace, name, HTTPPort, err)
	}
	body := "hello from " + name + "\n"
	p := &pod{
		namespace:  namespace,
		name:       name,
		containers: map[string]*container{},
		webAddr:    l.Addr().String(),
		webDone:    make(chan struct{}),
		web: &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = io.WriteString(w, body)
			}),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
		},
	}
	go func() {
		defer close(p.webDone)
		_ = p.web.Serve(l)
	}()
	return p, nil
}

func (p *pod) addContainer(name string, now func() time.Time) {
	if _, ok := p.containers[name]; ok {
		return
	}
	c := &container{namespace: p.namespace, pod: p.name, name: name, started: now(), fs: newMemFS(now)}
	_ = c.fs.mkdirAll("/tmp", 0o777)
	_ = c.fs.writeFile("/etc/hostname", []byte(p.name+"\n"), 0o644, c.started)
	p.containers[name] = c
}

// stop closes the pod's HTTP listener and its connections and waits for its server.
func (p *pod) stop() {
	_ = p.web.Close()
	<-p.webDone
}

// forward connects stream to port in this pod until either side closes or ctx ends. A
// stream's end of input half-closes the pod side, as a TCP client's FIN would.
func (p *pod) forward(ctx context.Context, port int32, stream io.ReadWriteCloser) error {
	switch port {
	case EchoPort:
		stop := context.AfterFunc(ctx, func() { _ = stream.Close() })
		defer stop()
		_, err := io.Copy(stream, stream)
		return err
	case HTTPPort:
	default:
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s/%s: connection refused", port, p.namespace, p.name)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", p.webAddr)
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s/%s: %w", port, p.namespace, p.name, err)
	}
	tcp := conn.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { _ = tcp.Close(); _ = stream.Close() })
	defer stop()
	toPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(tcp, stream)
		_ = tcp.CloseWrite()
		toPod <- err
	}()
	_, fromPod := io.Copy(stream, tcp)
	_ = tcp.Close()
	// The pod side is done: stop reading the stream too, so the copy above ends.
	_ = stream.Close()
	errIn := <-toPod
	if err := errors.Join(fromPod, errIn); err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
