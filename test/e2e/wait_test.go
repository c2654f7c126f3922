package e2e

import (
	"errors"
	"testing"
	"time"
)

var errNotYet = errors.New("not yet")

// waitFor polls fn every 200 ms until it returns no error or timeout passes, then fails the
// test with the last error.
func waitFor[T any](t *testing.T, timeout time.Duration, what string, fn func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := fn()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
