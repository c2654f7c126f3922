package tokenreview

import (
	"strings"
	"testing"
)

func TestAPIBase(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want, wantErr string
	}{
		{"github.com as given", "https://api.github.com/", "https://api.github.com/", ""},
		{"github.com without the slash", "https://api.github.com", "https://api.github.com/", ""},
		{"GitHub Enterprise Server root gets api/v3", "https://ghe.example.com/", "https://ghe.example.com/api/v3/", ""},
		{"GitHub Enterprise Server bare host gets api/v3", "https://ghe.example.com", "https://ghe.example.com/api/v3/", ""},
		{"GitHub Enterprise Server api/v3 as given", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/", ""},
		{"GHE.com api host as given", "https://api.acme.ghe.com/", "https://api.acme.ghe.com/", ""},
		{"explicit path as given, not extended", "https://proxy.example.com/github/", "https://proxy.example.com/github/", ""},
		{"explicit path gets its slash", "https://proxy.example.com/github", "https://proxy.example.com/github/", ""},
		{"explicit root of a proxy", "https://proxy.example.com/./", "https://proxy.example.com/", ""},
		{"http on 127.0.0.1", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/api/v3/", ""},
		{"http on localhost with a path", "http://localhost:8080/api/v3/", "http://localhost:8080/api/v3/", ""},
		{"http on ::1", "http://[::1]:8080/./", "http://[::1]:8080/", ""},
		{"http to github.com", "http://api.github.com/", "", "clear text"},
		{"http to a private address", "http://10.0.0.1/api/v3/", "", "clear text"},
		{"no scheme", "api.github.com", "", "https URL"},
		{"ftp", "ftp://ghe.example.com/", "", "https URL"},
		{"user info", "https://u:p@ghe.example.com/api/v3/", "", "user info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := APIBase(tc.raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("APIBase(%q) = %v, %v; want an error containing %q", tc.raw, u, err, tc.wantErr)
				}
				return
			}
			if err != nil || u.String() != tc.want {
				t.Fatalf("APIBase(%q) = %v, %v; want %s", tc.raw, u, err, tc.want)
			}
		})
	}
}
