package nodeapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// timestampFormat is the kubelet's timestamps=true prefix (RFC 3339 with nine fraction
// digits, pkg/kubelet/kuberuntime/logs).
const timestampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// logLine is one line a stand-in container printed.
type logLine struct {
	at   time.Time
	text string
}

// startupLines are what every stand-in container prints when it starts, one millisecond
// apart from its start time.
func (c *container) startupLines() []logLine {
	texts := []string{
		fmt.Sprintf("stand-in container %s of pod %s/%s started", c.name, c.namespace, c.pod),
		fmt.Sprintf("serving http on port %d and echo on port %d", HTTPPort, EchoPort),
		"ready",
	}
	lines := make([]logLine, len(texts))
	for i, t := range texts {
		lines[i] = logLine{at: c.started.Add(time.Duration(i) * time.Millisecond), text: t}
	}
	return lines
}

// FollowLine is the text of the n-th line (from 1) a followed log adds.
func FollowLine(n int) string { return fmt.Sprintf("tick %d", n) }

func (l logLine) format(timestamps bool) []byte {
	if timestamps {
		return []byte(l.at.UTC().Format(timestampFormat) + " " + l.text + "\n")
	}
	return []byte(l.text + "\n")
}

// selectLines applies sinceSeconds / sinceTime and tailLines (0 = all lines: the
// virtual-kubelet options cannot tell tailLines=0 from no tailLines).
func selectLines(lines []logLine, opts api.ContainerLogOpts, now time.Time) []logLine {
	var since time.Time
	switch {
	case opts.SinceSeconds > 0:
		since = now.Add(-time.Duration(opts.SinceSeconds) * time.Second)
	case !opts.SinceTime.IsZero():
		since = opts.SinceTime
	}
	var out []logLine
	for _, l := range lines {
		if !l.at.Before(since) {
			out = append(out, l)
		}
	}
	if opts.Tail > 0 && len(out) > opts.Tail {
		out = out[len(out)-opts.Tail:]
	}
	return out
}

// logs returns the container's log for opts. With Follow it keeps adding FollowLine(n) every
// interval until ctx ends or the reader is closed.
func (c *container) logs(ctx context.Context, opts api.ContainerLogOpts, interval time.Duration, now func() time.Time) io.ReadCloser {
	var buf bytes.Buffer
	for _, l := range selectLines(c.startupLines(), opts, now()) {
		buf.Write(l.format(opts.Timestamps))
	}
	r := io.NopCloser(&buf)
	if opts.Follow {
		pr, pw := io.Pipe()
		go func() {
			if _, err := pw.Write(buf.Bytes()); err != nil {
				return
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for n := 1; ; n++ {
				select {
				case <-ctx.Done():
					_ = pw.CloseWithError(io.EOF)
					return
				case <-tick.C:
				}
				if _, err := pw.Write(logLine{at: now(), text: FollowLine(n)}.format(opts.Timestamps)); err != nil {
					return
				}
			}
		}()
		r = pr
	}
	if opts.LimitBytes > 0 {
		r = limitReadCloser{Reader: io.LimitReader(r, int64(opts.LimitBytes)), Closer: r}
	}
	return r
}

type limitReadCloser struct {
	io.Reader
	io.Closer
}
