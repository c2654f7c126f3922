package main

import (
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
