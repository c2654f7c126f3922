package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseHeyCSV(t *testing.T) {
	const out = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n" +
		"0.0051,0.0043,0.0000,0.0001,0.0005,0.0002,200,0.0003\n" +
		"0.0003,0.0000,0.0000,0.0000,0.0001,0.0001,200,0.0053\n" +
		"0.0012,0.0000,0.0000,0.0000,0.0001,0.0001,503,0.0056\n" +
		"0.0100,0.0000,0.0000,0.0000,0.0000,0.0000,0,0.0060\n"
	s, err := parseHeyCSV(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if s.ok != 2 || s.status[503] != 1 || s.errors != 1 || s.failed() != 2 {
		t.Fatalf("ok %d, status %v, errors %d; want 2 ok, one 503, one request without an answer", s.ok, s.status, s.errors)
	}
	if s.latencies[0] != 5100*time.Microsecond || s.latencies[1] != 300*time.Microsecond {
		t.Errorf("latencies %v, want [5.1ms 300µs]", s.latencies)
	}
	if s.firstErr != "hey: HTTP 503" {
		t.Errorf("first error %q", s.firstErr)
	}
	for _, bad := range []string{"", "a,b\n1,2\n", "response-time,status-code\nx,200\n", "response-time,status-code\n0.1,OK\n"} {
		if _, err := parseHeyCSV(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestListeningAddr(t *testing.T) {
	for line, want := range map[string]string{
		`{"time":"2026-12-02T15:40:28Z","level":"INFO","msg":"webhook server listening","addr":"127.0.0.1:18444"}`:              "127.0.0.1:18444",
		`time=2026-12-02T15:40:28.999Z level=INFO msg="webhook server listening" addr=127.0.0.1:18444 clientCertRequired=false`: "127.0.0.1:18444",
		`time=2026-12-02T15:40:28.999Z level=INFO msg="metrics listening" addr=127.0.0.1:9090`:                                  "",
		`{"msg":"metrics listening","addr":"127.0.0.1:9090"}`:                                                                   "",
		`time=2026-12-02T15:40:28.999Z level=INFO msg="webhook server listening"`:                                               "",
	} {
		if got, ok := listeningAddr(line); got != want || ok != (want != "") {
			t.Errorf("listeningAddr(%s) = %q %v, want %q", line, got, ok, want)
		}
	}
}

// fakeHey puts a hey on PATH that appends its -z argument to calls and prints a CSV of rows
// answers of 200.
func fakeHey(t *testing.T, rows int) (calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := "#!/bin/sh\n" +
		"while [ $# -gt 0 ]; do [ \"$1\" = -z ] && echo \"$2\" >>" + calls + "; shift; done\n" +
		"echo response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n" +
		"awk 'BEGIN { for (i = 0; i < " + strconv.Itoa(rows) + "; i++) print \"0.0002,0,0,0,0.0001,0,200,0.001\" }'\n"
	if err := os.WriteFile(filepath.Join(dir, "hey"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return calls
}

func TestRunHeySplitsLongPhasesAndRefusesTruncatedResults(t *testing.T) {
	w := workload{addr: "127.0.0.1:1", cpu: func() time.Duration { return 0 },
		hey: &heyRequest{path: "/authorize", contentType: "application/json", body: []byte(`{}`)}}
	calls := fakeHey(t, 3)
	s := runHey(context.Background(), w, 2, 25*time.Second)
	got, _ := os.ReadFile(calls)
	if string(got) != "10s\n10s\n5s\n" || s.ok != 9 || s.failed() != 0 || s.elapsed != 25*time.Second {
		t.Errorf("hey runs %q, %d ok, %d failed, elapsed %v; want runs of 10s, 10s and 5s, 9 ok", got, s.ok, s.failed(), s.elapsed)
	}
	fakeHey(t, heyMaxResults)
	if s := runHey(context.Background(), w, 2, time.Second); s.ok != 0 || !strings.Contains(s.firstErr, "at most 1000000") {
		t.Errorf("a run at hey's cap: %d ok, error %q; want it refused", s.ok, s.firstErr)
	}
}
