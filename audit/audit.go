// Package audit writes octogate's audit events: one JSON object per line (JSON Lines,
// https://jsonlines.org), one event per decision an auditor traces (a session issued, a
// session refused), to OCTOGATE_AUDIT_FILE or stdout.
//
// An event never carries a token: Event has no field that could hold one, and callers fill
// it from decisions (the identity, the cluster, the reason code, the session's jti), never
// from a request body. Writing never holds a request up: Log queues the event and returns;
// when the queue is full the event is dropped and counted in
// octogate_audit_events_dropped_total.
package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/promreg"
)

// Event names.
const (
	// SessionIssued: a token exchange minted a session.
	SessionIssued = "session.issued"
	// SessionRefused: a token exchange was refused (the reason code says why).
	SessionRefused = "session.refused"
	// SessionUnavailable: a token exchange could not be answered now (GitHub down, no key).
	SessionUnavailable = "session.unavailable"
	// SessionLogout: a logout at the issuer (POST <issuer>/oauth2/revoke) was answered: the
	// person's sessions were revoked (OutcomeRevoked), or the logout was refused or could not
	// be answered now.
	SessionLogout = "session.logout"
)

// Outcomes.
const (
	OutcomeIssued      = "issued"
	OutcomeRefused     = "refused"
	OutcomeUnavailable = "unavailable"
	// OutcomeRevoked: a logout revoked the person's sessions for Cluster.
	OutcomeRevoked = "revoked"
)

// Event is one audit line. Time and Expiry are written in RFC 3339, UTC, seconds.
type Event struct {
	// Time of the decision; zero: when Log was called.
	Time time.Time `json:"-"`
	// Event is SessionIssued, SessionRefused, SessionUnavailable or SessionLogout.
	Event string `json:"event"`
	// User and UID are the identity the subject token stood for ("" when the token named
	// none: a refused lookup).
	User string `json:"user"`
	UID  string `json:"uid"`
	// Cluster is the audience asked for ("" when the request named none). For SessionLogout it
	// is the clusters logged out of, comma-separated (every cluster of the issuer when the
	// request named none).
	Cluster string `json:"cluster"`
	// Outcome is OutcomeIssued, OutcomeRefused, OutcomeUnavailable or OutcomeRevoked.
	Outcome string `json:"outcome"`
	// Reason is a reason code (cluster_not_allowed, not_member, ...) or the OAuth error code
	// when there is none (invalid_request); "" for an issued session or a logout done.
	Reason string `json:"reason"`
	// JTI is the session's id (its jti claim), for an issued session.
	JTI string `json:"jti"`
	// Expiry is the session's exp, for an issued session.
	Expiry time.Time `json:"-"`
	// ClientAddress is the IP address the request came from.
	ClientAddress string `json:"clientAddress"`
}

// line is Event as written.
type line struct {
	Time string `json:"time"`
	Event
	Exp string `json:"exp"`
}

// DefaultBuffer is how many events may wait for the writer before new ones are dropped.
const DefaultBuffer = 4096

// Config configures New.
type Config struct {
	// Out receives the lines; Writer.Run is its only writer.
	Out io.Writer
	// Buffer is the queue length (default DefaultBuffer).
	Buffer int
	// Registerer gets octogate_audit_events_total and octogate_audit_events_dropped_total;
	// nil: not registered.
	Registerer prometheus.Registerer
}

// Writer queues events and writes them on Run's goroutine. Log is safe for concurrent use;
// a nil *Writer drops every event silently (auditing is off).
type Writer struct {
	out     io.Writer
	queue   chan Event
	written prometheus.Counter
	dropped prometheus.Counter
	failed  prometheus.Counter
}

// New is a Writer to cfg.Out. Errors name the Config field at fault.
func New(cfg Config) (*Writer, error) {
	if cfg.Out == nil {
		return nil, fmt.Errorf("audit: Out is required")
	}
	n := cfg.Buffer
	if n <= 0 {
		n = DefaultBuffer
	}
	w := &Writer{out: cfg.Out, queue: make(chan Event, n),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "octogate_audit_events_total", Help: "Audit events written."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "octogate_audit_events_dropped_total", Help: "Audit events dropped because the writer's queue was full."}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "octogate_audit_write_errors_total", Help: "Audit events that could not be written (the output refused them)."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []*prometheus.Counter{&w.written, &w.dropped, &w.failed} {
			got, err := promreg.Register(cfg.Registerer, *c)
			if err != nil {
				return nil, fmt.Errorf("audit: Registerer: %w", err)
			}
			*c = got
		}
	}
	return w, nil
}

// Open is the output named by OCTOGATE_AUDIT_FILE: "-" is stdout, anything else a file
// opened for appending (created with mode 0600). close closes the file (not stdout).
func Open(path string) (out io.Writer, closeFn func() error, err error) {
	if path == "-" {
		return os.Stdout, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// Log queues e and returns at once; when the queue is full e is dropped and counted.
func (w *Writer) Log(e Event) {
	if w == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	select {
	case w.queue <- e:
	default:
		w.dropped.Inc()
	}
}

// Run writes queued events until ctx is done, then writes what is still queued and returns
// nil. The output is flushed whenever the queue is empty.
func (w *Writer) Run(ctx context.Context) error {
	bw := bufio.NewWriter(w.out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	write := func(e Event) {
		l := line{Time: e.Time.UTC().Format(time.RFC3339), Event: e}
		if !e.Expiry.IsZero() {
			l.Exp = e.Expiry.UTC().Format(time.RFC3339)
		}
		if err := enc.Encode(l); err != nil {
			w.failed.Inc()
			return
		}
		w.written.Inc()
	}
	for {
		select {
		case e := <-w.queue:
			write(e)
			if len(w.queue) == 0 {
				_ = bw.Flush()
			}
		case <-ctx.Done():
			for {
				select {
				case e := <-w.queue:
					write(e)
				default:
					_ = bw.Flush()
					return nil
				}
			}
		}
	}
}
