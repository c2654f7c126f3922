package clientaddr

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestAddr(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8", "192.0.2.7", " fd00::/8 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"an untrusted peer is the client, whatever it forwards", "203.0.113.5:1234", []string{"198.51.100.1"}, "203.0.113.5"},
		{"a trusted proxy's forwarded client", "10.1.2.3:443", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a client cannot hide behind an entry it wrote itself", "10.1.2.3:443", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"proxies in a chain are skipped from the right", "10.1.2.3:443", []string{"198.51.100.1, 192.0.2.7", "10.9.9.9"}, "198.51.100.1"},
		{"a trusted single address", "192.0.2.7:80", []string{"198.51.100.2"}, "198.51.100.2"},
		{"a trusted proxy without the header is the client", "10.1.2.3:443", nil, "10.1.2.3"},
		{"garbage stops at the last trusted hop", "10.1.2.3:443", []string{"198.51.100.1, not-an-ip"}, "10.1.2.3"},
		{"all trusted: the leftmost", "10.1.2.3:443", []string{"10.4.4.4, 10.5.5.5"}, "10.4.4.4"},
		{"IPv6 behind a trusted IPv6 proxy", "[fd00::1]:443", []string{"2001:db8::7"}, "2001:db8::7"},
		{"an IPv4-mapped peer counts as IPv4", "[::ffff:10.1.2.3]:443", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a forwarded entry with a port", "10.1.2.3:443", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"a forwarded IPv6 entry in brackets", "10.1.2.3:443", []string{"[2001:db8::9]"}, "2001:db8::9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
			for _, v := range tc.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got := r.Addr(req); got != netip.MustParseAddr(tc.want) {
				t.Errorf("Addr = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("the zero Resolver trusts no proxy", func(t *testing.T) {
		req := &http.Request{RemoteAddr: "10.1.2.3:443", Header: http.Header{"X-Forwarded-For": {"198.51.100.1"}}}
		if got := (Resolver{}).Addr(req); got != netip.MustParseAddr("10.1.2.3") {
			t.Errorf("Addr = %v", got)
		}
	})
}

func TestNewRefusesWhatIsNotAnAddress(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "proxy.example.com", "10.0.0"} {
		if _, err := New([]string{bad}); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
}

// FuzzAddr: any X-Forwarded-For and peer give an address without panicking, and an untrusted
// peer is always the answer.
func FuzzAddr(f *testing.F) {
	for _, s := range []string{"198.51.100.1", "1.1.1.1, 10.0.0.1", "[2001:db8::1]:80, ::ffff:10.0.0.1", "", ",,,", "fe80::1%eth0", "10.0.0.1:99999"} {
		f.Add("10.0.0.1:443", s)
		f.Add("203.0.113.9:443", s)
	}
	r, err := New([]string{"10.0.0.0/8"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		req := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := r.Addr(req)
		if peer := parseAddr(remote); peer.IsValid() && !r.isTrusted(peer) && got != peer {
			t.Fatalf("untrusted peer %v answered %v", peer, got)
		}
	})
}
