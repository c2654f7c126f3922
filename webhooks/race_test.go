//go:build race

package webhooks_test

// raceEnabled scales load tests down under the race detector, which makes TLS handshakes
// about ten times as expensive.
const raceEnabled = true
