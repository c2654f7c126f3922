// Package clientaddr finds the address of the client behind an HTTP request at a public door
// (the token exchange, the proxy): the connection's peer, or, when that peer is a proxy the
// operator trusts (OCTOGATE_TRUSTED_PROXIES), the address the proxies name in
// X-Forwarded-For. Anyone can write X-Forwarded-For; only the entries appended by trusted
// proxies are believed, as the de-facto standard reads it
// (https://developer.mozilla.org/docs/Web/HTTP/Reference/Headers/X-Forwarded-For#selecting_an_ip_address):
// from the right, the first address that is not a trusted proxy is the client.
package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds client addresses. The zero Resolver trusts no proxy: the client is the peer.
type Resolver struct {
	trusted []netip.Prefix
}

// New trusts the proxies of cidrs: CIDR prefixes ("10.0.0.0/8", "fd00::/8") or single
// addresses ("192.0.2.7"). Errors name the item that is neither.
func New(cidrs []string) (Resolver, error) {
	var r Resolver
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return Resolver{}, fmt.Errorf("%q is neither a CIDR prefix (10.0.0.0/8) nor an IP address", c)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		r.trusted = append(r.trusted, p.Masked())
	}
	return r, nil
}

// Addr is the client address of req: its peer (req.RemoteAddr), unless the peer is a trusted
// proxy; then the rightmost X-Forwarded-For entry that is not a trusted proxy, or, when an
// entry does not parse, the last trusted hop before it, or the leftmost entry when all are
// trusted. The zero Addr when RemoteAddr is not an address (a test's httptest request).
func (r Resolver) Addr(req *http.Request) netip.Addr {
	peer := parseAddr(req.RemoteAddr)
	if !peer.IsValid() || !r.isTrusted(peer) {
		return peer
	}
	client := peer
	values := req.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		entries := strings.Split(values[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			a := parseAddr(strings.TrimSpace(entries[j]))
			if !a.IsValid() {
				return client
			}
			client = a
			if !r.isTrusted(a) {
				return a
			}
		}
	}
	return client
}

func (r Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads "192.0.2.1", "192.0.2.1:443", "[2001:db8::1]:443" or "2001:db8::1" (a zone
// is dropped), unmapping IPv4-mapped IPv6; the zero Addr for anything else.
func parseAddr(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}
