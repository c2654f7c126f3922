package credential

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrRedirect is wrapped when a token endpoint answered with a redirect (3xx with a Location).
// The plugin follows none: each of its requests carries a secret (the GitHub token in an RFC
// 8693 exchange or a GET /user, a device code, a refresh token, the Actions runtime's request
// token), and Go's client would resend the body of a 307 or 308 to wherever Location points,
// http:// included. The error names the endpoint and the target without its query.
var ErrRedirect = errors.New("token endpoint answered with a redirect, which octogate does not follow")

// noRedirect is a copy of client (nil: a new one) that follows no redirect: the request that
// was answered 3xx fails with an error wrapping ErrRedirect, and its body is never resent.
// The caller's client is not changed.
func noRedirect(client *http.Client) *http.Client {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	c.CheckRedirect = refuseRedirect
	return c
}

// refuseRedirect is an http.Client CheckRedirect: req is the request Location would make,
// via[0] the one that was answered with the redirect.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	status := "a redirect"
	if req.Response != nil {
		status = req.Response.Status
	}
	from := ""
	if len(via) > 0 {
		from = withoutQuery(via[0].URL)
	}
	return fmt.Errorf("%w: %s answered %s to %s; check the URL (an https issuer or GitHub must answer itself)",
		ErrRedirect, from, status, withoutQuery(req.URL))
}

// withoutQuery is u without its user info, query and fragment, which may carry secrets.
func withoutQuery(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}

// parseEndpointURL accepts an absolute https URL, or an http URL on a loopback host
// (127.0.0.0/8, ::1, localhost: the demo and tests), without user info, query or fragment, and
// drops trailing slashes. field names the setting in errors. A token sent over http to any
// other host crosses the network in clear.
func parseEndpointURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%s %q: want an absolute URL such as https://HOST", field, raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%s %q: http is allowed only on a loopback host (127.0.0.0/8, ::1, localhost): elsewhere it sends the token in clear text; use https", field, raw)
		}
	default:
		return nil, fmt.Errorf("%s %q: scheme must be https", field, raw)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("%s %q: must not have user info, query or fragment", field, raw)
	}
	return u, nil
}

// isLoopback reports whether host is "localhost" or an IP address in 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
