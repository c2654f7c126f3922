package main

import (
	"strings"
	"testing"
)

// Without a client id there is no cache file to look for: --forget says so and fails rather
// than report "no cached token" at a path no token is ever written to.
func TestForgetWithoutClientIDFails(t *testing.T) {
	isolate(t)
	stderr := &syncBuffer{}
	if _, code := runOctogate(t, stderr, "credential", "--forget"); code == 0 {
		t.Fatalf("exit 0, want a failure: %s", stderr)
	}
	if got := stderr.String(); !strings.Contains(got, "--forget needs --client-id") || strings.Contains(got, "no cached token") {
		t.Fatalf("stderr %q, want it to ask for --client-id", got)
	}

	t.Setenv(envOAuthClientID, "Iv1.fromenv")
	stderr = &syncBuffer{}
	if _, code := runOctogate(t, stderr, "credential", "--forget"); code != 0 || !strings.Contains(stderr.String(), "no cached token at ") {
		t.Fatalf("with $%s: exit %d, stderr %q", envOAuthClientID, code, stderr)
	}
}
