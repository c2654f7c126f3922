package main

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWriter counts the Write calls it gets and keeps what they wrote.
type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *countingWriter) read() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.writes
}

// The request log reaches stderr in a few large writes, whole lines in order, within the
// flush interval of being logged, and everything is out once flush returns.
func TestLoggerBuffersWholeLinesAndFlushes(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			w := &countingWriter{}
			log, flush := newLogger(format, "info", w)
			const lines = 1000
			for i := range lines {
				log.Info("webhook request", "n", i, "path", "/authorize")
			}
			// Within the interval (and a margin for a loaded machine) every line is out.
			deadline := time.Now().Add(logFlushInterval + 5*time.Second)
			for {
				out, _ := w.read()
				if strings.Count(out, "\n") == lines || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			out, writes := w.read()
			if got := strings.Count(out, "\n"); got != lines {
				t.Fatalf("%d lines out %v after logging, want %d", got, logFlushInterval+5*time.Second, lines)
			}
			if writes > lines/10 {
				t.Errorf("%d writes for %d lines, want them batched", writes, lines)
			}
			for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if want := []string{"n=" + strconv.Itoa(i) + " ", `"n":` + strconv.Itoa(i) + ","}; !strings.Contains(l, want[0]) && !strings.Contains(l, want[1]) {
					t.Fatalf("line %d is %q: lines out of order or cut", i, l)
				}
			}

			log.Info("last words")
			flush()
			if out, _ := w.read(); !strings.Contains(out, "last words") {
				t.Fatalf("flush returned with the last line still buffered")
			}
			flush() // a second flush is harmless
		})
	}
}

// OCTOGATE_LOG_LEVEL sets the least severe level written: debug lines only at debug.
func TestLoggerLevel(t *testing.T) {
	for level, wantDebug := range map[string]bool{"debug": true, "DEBUG": true, "info": false, "": false, "warn": false} {
		w := &countingWriter{}
		log, flush := newLogger("text", level, w)
		log.Debug("a debug line")
		flush()
		if out, _ := w.read(); strings.Contains(out, "a debug line") != wantDebug {
			t.Errorf("level %q: debug line written = %v, want %v", level, !wantDebug, wantDebug)
		}
	}
}
