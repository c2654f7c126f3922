package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/transport"
)

// storedTimeout bounds one read of a stored object for a second check.
const storedTimeout = 10 * time.Second

// read GETs path from kube-apiserver as u (impersonated, as forwarded requests are) in JSON
// and returns the status code and at most maxStoredObject bytes of the body. An error is a
// failure to reach kube-apiserver.
func (f *forwarder) read(ctx context.Context, path string, u *user.DefaultInfo) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, storedTimeout)
	defer cancel()
	loc := *f.location
	loc.Path = strings.TrimSuffix(loc.Path, "/") + path
	loc.RawPath, loc.RawQuery = "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	as := transport.ImpersonationConfig{UserName: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	resp, err := transport.NewImpersonatingRoundTripper(as, f.rt).RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStoredObject+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > maxStoredObject {
		return 0, nil, fmt.Errorf("the stored object at %s is over %d bytes", path, maxStoredObject)
	}
	return resp.StatusCode, body, nil
}

// objectPath is the path of the object a resource request is about, without its subresource:
// /api/v1/namespaces/N/R/NAME or /apis/G/V/R/NAME.
func objectPath(info *request.RequestInfo) string {
	var b strings.Builder
	b.WriteString("/" + info.APIPrefix)
	if info.APIGroup != "" {
		b.WriteString("/" + info.APIGroup)
	}
	b.WriteString("/" + info.APIVersion)
	if info.Namespace != "" {
		b.WriteString("/namespaces/" + info.Namespace)
	}
	b.WriteString("/" + info.Resource + "/" + info.Name)
	return b.String()
}
