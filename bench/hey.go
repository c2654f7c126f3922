package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Load generators of the comparison with the bare handler (-bare-load).
const (
	// loadGo is this process's own client: keep-alive TLS connections with the bench's client
	// certificate, every answer checked.
	loadGo = "go"
	// loadHey is hey (https://github.com/rakyll/hey, Debian package hey), as
	// ../shared/bench/hot-routes.sh runs it: a process of its own posting one fixed body over
	// -workers keep-alive HTTP/1.1 connections. hey presents no client certificate, so the
	// servers then check none, as in hot-routes.sh.
	loadHey = "hey"
)

// heyChunk is the longest single hey run: hey keeps at most heyMaxResults results (its report's
// cap), which 32 connections reach in about 27 s on the development machine, so a longer phase
// is run as several hey runs whose samples add up.
const heyChunk = 10 * time.Second

// heyMaxResults is hey's cap on the results it reports; a run that reaches it has dropped
// some, and its figures would be wrong.
const heyMaxResults = 1_000_000

// heyRequest is the fixed POST hey sends for a route.
type heyRequest struct {
	path, contentType string
	body              []byte
}

// runHey runs hey against w for d, in runs of at most heyChunk, and counts what its CSV of
// every request says (status-code and response-time, seconds to 0.1 ms): 200s and their
// latencies, other statuses, and requests that got no answer (status 0). w.cpu is read before
// and after each run, as run does. hey checks no answer's body: the caller checks one answer
// with its own client after the phase.
func runHey(ctx context.Context, w workload, workers int, d time.Duration) sample {
	var all sample
	for left := d; left > 0; left -= heyChunk {
		s := runHeyOnce(ctx, w, workers, min(left, heyChunk))
		all.add(s)
		if s.failed() > 0 && s.ok == 0 {
			break
		}
	}
	return all
}

func runHeyOnce(ctx context.Context, w workload, workers int, d time.Duration) sample {
	fail := func(err error) sample { return sample{errors: 1, firstErr: "hey: " + err.Error()} }
	if w.hey == nil {
		return fail(errors.New("the route has no fixed request for hey"))
	}
	dir, err := os.MkdirTemp("", "octogate-bench-hey-")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bodyFile := filepath.Join(dir, "body")
	if err := os.WriteFile(bodyFile, w.hey.body, 0o600); err != nil {
		return fail(err)
	}
	cmd := exec.CommandContext(ctx, "hey", "-z", d.String(), "-c", strconv.Itoa(workers), "-m", "POST",
		"-T", w.hey.contentType, "-D", bodyFile, "-o", "csv", "https://"+w.addr+w.hey.path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cpu0 := w.cpu()
	out, err := cmd.Output()
	cpu1 := w.cpu()
	if err != nil {
		return fail(fmt.Errorf("%w: %.300s", err, stderr.Bytes()))
	}
	s, err := parseHeyCSV(bytes.NewReader(out))
	if err != nil {
		return fail(err)
	}
	if n := s.ok + s.failed(); n >= heyMaxResults {
		return fail(fmt.Errorf("%d results in %v: hey reports at most %d, so some were dropped; use fewer -workers", n, d, heyMaxResults))
	}
	s.elapsed, s.cpu = d, cpu1-cpu0
	return s
}

// parseHeyCSV reads hey's -o csv: a header naming the columns, then one row per request.
func parseHeyCSV(r io.Reader) (sample, error) {
	var s sample
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return s, fmt.Errorf("reading hey's CSV header: %w", err)
	}
	col := map[string]int{}
	for i, name := range header {
		col[name] = i
	}
	rt, okRT := col["response-time"]
	sc, okSC := col["status-code"]
	if !okRT || !okSC {
		return s, fmt.Errorf("hey's CSV has no response-time or status-code column: %q", header)
	}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, fmt.Errorf("reading hey's CSV: %w", err)
		}
		code, err := strconv.Atoi(row[sc])
		if err != nil {
			return s, fmt.Errorf("hey's CSV: status-code %q", row[sc])
		}
		secs, err := strconv.ParseFloat(row[rt], 64)
		if err != nil {
			return s, fmt.Errorf("hey's CSV: response-time %q", row[rt])
		}
		switch code {
		case 200:
			s.ok++
			s.latencies = append(s.latencies, time.Duration(secs*float64(time.Second)))
		case 0:
			s.errors++
			if s.firstErr == "" {
				s.firstErr = "hey: a request got no answer"
			}
		default:
			if s.status == nil {
				s.status = map[int]int{}
			}
			s.status[code]++
			if s.firstErr == "" {
				s.firstErr = fmt.Sprintf("hey: HTTP %d", code)
			}
		}
	}
}
