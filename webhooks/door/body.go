package door

import (
	"bytes"
	"io"
	"net/http"
)

// MaxBodyBytes is the largest request body a webhook route accepts (1 MiB) unless the
// route sets its own (webhooks.WithMaxBodyBytes); the server answers larger bodies 413
// without calling the handler.
const MaxBodyBytes = 1 << 20

// Body is a request body the server has already read: it replaces r.Body with those bytes,
// and ReadBody hands them to handlers without copying them. The zero value is empty.
type Body struct {
	bytes.Reader
	b []byte
}

// Reset makes the body read b from its start.
func (br *Body) Reset(b []byte) {
	br.b = b
	br.Reader.Reset(b)
}

// Close does nothing: the bytes are in memory.
func (*Body) Close() error { return nil }

// ReadBody returns the request body. Behind a route of the server the body has already been
// read (and bounded to the route's limit: MaxBodyBytes unless webhooks.WithMaxBodyBytes set
// another), and ReadBody returns those bytes without a copy; elsewhere (a handler under test)
// it reads r.Body, up to MaxBodyBytes+1 bytes. The caller must not modify the bytes.
func ReadBody(r *http.Request) ([]byte, error) {
	if br, ok := r.Body.(*Body); ok {
		return br.b, nil
	}
	if r.Body == nil {
		return nil, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
}
