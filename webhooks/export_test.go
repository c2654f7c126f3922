package webhooks

import "time"

// SetReadTimeout shortens the server's read timeout (10 s) so that tests of a stalled body
// need not wait for it. Call it before Run.
func SetReadTimeout(s *Server, d time.Duration) { s.readTimeout = d }
