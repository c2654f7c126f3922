package proxy

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// bearerProtocolPrefix starts the WebSocket subprotocol that carries a bearer token for a
// client that cannot set Authorization on a WebSocket (a browser):
// "base64url.bearer.authorization.k8s.io.<base64url without padding of the token>", read by
// kube-apiserver's k8s.io/apiserver/pkg/authentication/request/websocket.ProtocolAuthenticator
// (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#putting-a-bearer-token-in-a-request).
const bearerProtocolPrefix = "base64url.bearer.authorization.k8s.io."

// websocketBearerToken is the bearer token r carries in its Sec-WebSocket-Protocol, as
// kube-apiserver reads it: only on a WebSocket upgrade; at most one such subprotocol, its token
// base64url without padding and UTF-8, beside at least one other subprotocol (the one the
// server answers with). ok is false when r carries none; err says what is wrong with one.
func websocketBearerToken(r *http.Request) (token string, ok bool, err error) {
	if !wsstream.IsWebSocketRequest(r) {
		return "", false, nil
	}
	others := 0
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			p = strings.TrimSpace(p)
			encoded, isToken := strings.CutPrefix(p, bearerProtocolPrefix)
			if !isToken {
				others++
				continue
			}
			if ok {
				return "", false, errors.New("more than one bearer token subprotocol")
			}
			b, err := base64.RawURLEncoding.DecodeString(encoded)
			if err != nil || !utf8.Valid(b) {
				return "", false, errors.New("the bearer token subprotocol is not base64url of a UTF-8 token")
			}
			token, ok = string(b), true
		}
	}
	switch {
	case !ok || token == "":
		return "", false, nil
	case others == 0:
		return "", false, errors.New("a bearer token subprotocol without another subprotocol to answer with")
	}
	return token, true, nil
}

// Headers a proxy does not forward, besides those a request's Connection names (RFC 9110
// section 7.6.1, https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1): the hop-by-hop
// headers Go's httputil.ReverseProxy drops, which apimachinery's upgrade path does not.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// upstreamHeader removes from h (a client's request headers, before the proxy's credentials
// and impersonation are set) what kube-apiserver could read as someone's identity, or what an
// intermediary between the proxy and kube-apiserver could act on:
//   - Authorization and Proxy-Authorization (the client's credentials; the proxy's replace them);
//   - every bearer token subprotocol of Sec-WebSocket-Protocol (websocketBearerToken; the header
//     goes when nothing else is left in it);
//   - X-Remote-* (and X_Remote_*): the headers of kube-apiserver's request-header
//     authentication (--requestheader-username-headers, -group-headers, -extra-headers-prefix,
//     -uid-headers; https://kubernetes.io/docs/reference/access-authn-authz/authentication/#authenticating-proxy);
//   - every header the client's Connection names: an intermediary that honours Connection
//     would otherwise drop a header of the proxy's own ("Connection: Upgrade, Impersonate-User"
//     makes the request the proxy's ServiceAccount's), and the hop-by-hop headers.
//
// On an upgrade (upgrade: exec, attach, port-forward), the request keeps Upgrade with
// "Connection: Upgrade" and nothing else in Connection; otherwise it keeps no Connection.
// Client Impersonate-* headers are refused before (impersonationHeader), not removed here.
func upstreamHeader(h http.Header, upgrade bool) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name != "" && !(upgrade && strings.EqualFold(name, "Upgrade")) {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		if !upgrade || name != "Upgrade" {
			h.Del(name)
		}
	}
	if upgrade {
		h.Set("Connection", "Upgrade")
	}
	h.Del("Authorization")
	for name := range h {
		if hasHeaderPrefix(name, "X-Remote-") {
			delete(h, name)
		}
	}
	stripBearerProtocols(h)
}

// isUpgrade reports whether r asks for an upgrade as apimachinery's upgrade-aware handler
// decides it (httpstream.IsUpgradeRequest: "upgrade" anywhere in Connection).
func isUpgrade(r *http.Request) bool { return httpstream.IsUpgradeRequest(r) }

// stripBearerProtocols removes every bearer token subprotocol from h's Sec-WebSocket-Protocol,
// keeping the others in their order, as kube-apiserver does once it has read the token.
func stripBearerProtocols(h http.Header) {
	const key = "Sec-Websocket-Protocol" // http.CanonicalHeaderKey("Sec-WebSocket-Protocol")
	values := h[key]
	if len(values) == 0 {
		return
	}
	kept := make([]string, 0, 2)
	stripped := false
	for _, v := range values {
		for p := range strings.SplitSeq(v, ",") {
			p = strings.TrimSpace(p)
			if strings.HasPrefix(p, bearerProtocolPrefix) {
				stripped = true
				continue
			}
			if p != "" {
				kept = append(kept, p)
			}
		}
	}
	switch {
	case !stripped:
	case len(kept) == 0:
		delete(h, key)
	default:
		h[key] = []string{strings.Join(kept, ", ")}
	}
}

// hasHeaderPrefix reports whether a header name starts with prefix, ignoring case and
// reading '_' as '-': Go and kube-apiserver tell "X_Remote_User" from "X-Remote-User", but
// an intermediary (CGI-style servers, some proxies) may not.
func hasHeaderPrefix(name, prefix string) bool {
	if len(name) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		if foldHeaderByte(name[i]) != foldHeaderByte(prefix[i]) {
			return false
		}
	}
	return true
}

// foldHeaderByte is c in lower case, with '_' read as '-'.
func foldHeaderByte(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}
