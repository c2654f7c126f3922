package proxy

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/octogate/octogate/tokenreview"
)

// authenticate is the Authenticator's answer for token, counted against the rate of new
// tokens of the request's client address (Config.ClientAddr; tokenreview.FromClient): a
// client sending token after unknown token is refused before GitHub is asked, and cannot take
// the GitHub lookups kube-apiserver's own reviews keep.
func (p *Proxy) authenticate(r *http.Request, token string) (tokenreview.Identity, error) {
	return p.authn.Authenticate(tokenreview.FromClient(r.Context(), p.clients.Addr(r)), token)
}

// throttled answers 429 with Retry-After (a Status of reason TooManyRequests, as
// kube-apiserver's own rate limits do, which client-go retries after the delay) when err is a
// *tokenreview.ThrottledError, and reports whether it did.
func (p *Proxy) throttled(w http.ResponseWriter, r *http.Request, err error) bool {
	var th *tokenreview.ThrottledError
	if !errors.As(err, &th) {
		return false
	}
	secs, _ := strconv.Atoi(th.RetryAfterSeconds())
	p.log.LogAttrs(r.Context(), slog.LevelInfo, "new token throttled", slog.String("client", p.clients.Addr(r).String()), slog.String("error", err.Error()))
	w.Header().Set("Retry-After", th.RetryAfterSeconds())
	p.refuse(w, "throttled", tokenreview.ReasonThrottled, apierrors.NewTooManyRequests(err.Error(), secs))
	return true
}
