package door

import (
	"mime"
	"testing"
)

// FuzzMatchMediaType: any Content-Type value matches one of the accepted types or none, never
// panics, and a value that matches has that media type when parsed.
func FuzzMatchMediaType(f *testing.F) {
	for _, seed := range []string{"application/json", "application/json; charset=utf-8", "Application/X-WWW-Form-Urlencoded",
		"", "text/plain", "application/json; charset", "application/json;;", "multipart/form-data; boundary=x"} {
		f.Add(seed)
	}
	accepted := []string{MediaTypeJSON, "application/x-www-form-urlencoded"}
	f.Fuzz(func(t *testing.T, contentType string) {
		got := MatchMediaType(contentType, accepted)
		if got == "" {
			return
		}
		if got != accepted[0] && got != accepted[1] {
			t.Fatalf("MatchMediaType(%q) = %q: not an accepted type", contentType, got)
		}
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != got {
			t.Fatalf("MatchMediaType(%q) = %q, but it parses as %q (%v)", contentType, got, mt, err)
		}
	})
}
