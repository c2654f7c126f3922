package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// Authenticator is the decision of /authenticate (*tokenreview.Handler): the whole identity of
// a bearer token, or an error wrapping tokenreview.ErrRefused or tokenreview.ErrUnavailable.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (tokenreview.Identity, error)
}

// Authorizer is the decision of /authorize (*subjectaccessreview.Authorizer).
type Authorizer interface {
	Decide(a *subjectaccessreview.Attributes) subjectaccessreview.Decision
}

// Config configures a Proxy.
type Config struct {
	// Upstream is kube-apiserver as the proxy's own identity (the ServiceAccount whose RBAC
	// allows impersonation): its Host, TLS settings and credentials. Required.
	Upstream *rest.Config
	// UpstreamCredentials, when the proxy obtains Upstream's credentials itself
	// (ServiceAccountTokens), names them when kube-apiserver refuses them and gets new ones
	// then. Nil: Upstream's credentials are fixed.
	UpstreamCredentials Credentials
	// Authenticator and Authorizer are the decisions the webhooks answer with. Required.
	Authenticator Authenticator
	Authorizer    Authorizer
	// Limits bounds requests per user and in all (zero fields: defaults, see Limits).
	Limits Limits
	// ClientAddr finds the client address whose rate of new tokens a request counts against
	// (the zero Resolver: the connection's peer, trusting no X-Forwarded-For).
	ClientAddr clientaddr.Resolver
	// Logger receives one line per refused request and per upstream failure, and at debug
	// level one per decision (logDecisions). Nil discards.
	Logger *slog.Logger
	// Registerer gets the octogate_proxy_* metrics. Nil: not registered.
	Registerer prometheus.Registerer
}

// Proxy is the impersonating front door, an http.Handler for every path.
type Proxy struct {
	forward  *forwarder
	authn    Authenticator
	authz    Authorizer
	limits   *limiter
	clients  clientaddr.Resolver
	resolver *request.RequestInfoFactory
	// reviewCodecs read and write the SelfSubjectAccessReviews the proxy answers.
	reviewCodecs serializer.CodecFactory
	log          *slog.Logger
	metrics      *metrics
	readiness    *readiness
}

// New checks cfg and builds the upstream transports. Errors name the Config field.
func New(cfg Config) (*Proxy, error) {
	switch {
	case cfg.Upstream == nil:
		return nil, errors.New("proxy: Upstream is required")
	case cfg.Authenticator == nil:
		return nil, errors.New("proxy: Authenticator is required")
	case cfg.Authorizer == nil:
		return nil, errors.New("proxy: Authorizer is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "proxy")
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	f, err := newForwarder(cfg.Upstream, cfg.UpstreamCredentials, log, m)
	if err != nil {
		return nil, err
	}
	lim, err := newLimiter(cfg.Limits)
	if err != nil {
		return nil, err
	}
	return &Proxy{
		forward: f,
		authn:   cfg.Authenticator,
		authz:   logDecisions(cfg.Authorizer, log),
		limits:  lim,
		clients: cfg.ClientAddr,
		resolver: &request.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
		reviewCodecs: newReviewCodecs(),
		log:          log,
		metrics:      m,
		readiness:    newReadiness(f),
	}, nil
}

// Ready reports whether kube-apiserver answers its /readyz to the proxy's credentials (the
// last check of at most a second ago): the proxy's readiness check. While kube-apiserver
// refuses the proxy's own credentials (401), the proxy is not ready.
func (p *Proxy) Ready() error { return p.readiness.check() }

// ServeHTTP authenticates, decides and forwards one request (see the package comment).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	token, ok := bearerToken(r)
	if !ok {
		p.refuse(w, "unauthenticated", "no_token", apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	id, err := p.authenticate(r, token)
	switch {
	case p.throttled(w, r, err):
		return
	case errors.Is(err, tokenreview.ErrUnavailable):
		p.log.LogAttrs(ctx, slog.LevelWarn, "authentication unavailable", slog.String("reason", tokenreview.Reason(err)), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		p.refuse(w, "unavailable", tokenreview.Reason(err),
			apierrors.NewServiceUnavailable("octogate cannot verify credentials right now ("+tokenreview.Reason(err)+"); retry"))
		return
	case err != nil:
		p.log.LogAttrs(ctx, slog.LevelInfo, "authentication refused", slog.String("reason", tokenreview.Reason(err)), slog.String("error", err.Error()))
		p.refuse(w, "unauthenticated", tokenreview.Reason(err), apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	u := userInfo(id)
	if h := impersonationHeader(r.Header); h != "" {
		p.log.LogAttrs(ctx, slog.LevelInfo, "impersonation refused", slog.String("user", u.Name), slog.String("header", h))
		p.refuse(w, "impersonation", "impersonation", apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "users"}, "",
			fmt.Errorf("octogate's proxy does not forward impersonation headers (%s; kubectl --as, --as-group, --as-uid): requests go to the cluster as the user who logged in", h)))
		return
	}
	info, err := p.resolver.NewRequestInfo(r)
	if err != nil {
		p.refuse(w, "bad_request", "bad_request", apierrors.NewBadRequest("the request path cannot be parsed"))
		return
	}

	attrs := attributes(u, id, info)
	d := p.authz.Decide(&attrs)
	if d.Verdict == subjectaccessreview.Deny {
		p.log.LogAttrs(ctx, slog.LevelInfo, "request denied", slog.String("user", u.Name), slog.String("verb", info.Verb),
			slog.String("resource", info.Resource), slog.String("namespace", info.Namespace), slog.String("rule", d.Rule))
		p.metrics.requests.WithLabelValues("denied").Inc()
		writeStatus(w, forbidden(u.Name, info, d.Reason))
		return
	}
	if isSelfSubjectAccessReview(info) {
		if p.answerSelfSubjectAccessReview(w, r, u, id) {
			return
		}
	}
	release, err := p.limits.acquire(u.GetUID(), longRunning(info))
	if err != nil {
		w.Header().Set("Retry-After", "1")
		p.log.LogAttrs(ctx, slog.LevelInfo, "request throttled", slog.String("user", u.Name), slog.String("limit", err.Error()))
		p.refuse(w, "throttled", "throttled", apierrors.NewTooManyRequests("too many requests of "+u.Name+" through octogate's proxy: "+err.Error()+"; retry", 1))
		return
	}
	defer release()
	groups, refusal := p.checkInside(ctx, r, u, attrs, info, d)
	if refusal != nil {
		writeStatus(w, refusal)
		return
	}
	if g := d.Group(); g != "" {
		u.Groups = append(u.Groups, g)
	}
	for _, g := range groups {
		if !slices.Contains(u.Groups, g) {
			u.Groups = append(u.Groups, g)
		}
	}
	// A request no rule decides that an elevation would allow: when the cluster's RBAC
	// refuses it, the refusal names the elevation, as in webhook mode.
	if hint := d.ElevationHint(); hint != "" && p.forward.clusterRefuses(ctx, u, info) {
		p.log.LogAttrs(ctx, slog.LevelInfo, "request refused by the cluster; an elevation would allow it", slog.String("user", u.Name), slog.String("verb", info.Verb),
			slog.String("resource", info.Resource), slog.String("namespace", info.Namespace))
		p.metrics.requests.WithLabelValues("elevation_hint").Inc()
		writeStatus(w, forbidden(u.Name, info, "octogate: "+hint))
		return
	}
	p.metrics.requests.WithLabelValues("forwarded").Inc()
	p.forward.serve(w, r, u)
}

// refuse answers err as kube-apiserver would (a JSON Status) and counts it.
func (p *Proxy) refuse(w http.ResponseWriter, result, reason string, err *apierrors.StatusError) {
	p.metrics.refused.WithLabelValues(result, reason).Inc()
	writeStatus(w, err)
}

// bearerToken is the token of an "Authorization: Bearer TOKEN" header (the scheme's case
// ignored, RFC 6750 §2.1) or, on a WebSocket upgrade without Authorization, of a bearer token
// subprotocol (websocketBearerToken), as kube-apiserver accepts from browsers. Unlike
// kube-apiserver, which tries the subprotocol when the header's token is refused, the header
// decides when there is one: a token is looked up once.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		token, ok, err := websocketBearerToken(r)
		return token, ok && err == nil
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// impersonationHeader is the first Impersonate-* header of h (in any case, and spelled
// Impersonate_* too, which an intermediary may read as the same), "" when there is none
// (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation).
func impersonationHeader(h http.Header) string {
	for k := range h {
		if hasHeaderPrefix(k, "Impersonate-") {
			return k
		}
	}
	return ""
}

// userInfo is the Kubernetes user of id as kube-apiserver would see it after authentication:
// its groups (never one under "octogate:", which only the proxy adds) and system:authenticated.
func userInfo(id tokenreview.Identity) *user.DefaultInfo {
	groups := make([]string, 0, len(id.Groups)+2)
	for _, g := range id.Groups {
		if !strings.HasPrefix(g, subjectaccessreview.ProxyGroupPrefix) && g != user.AllAuthenticated {
			groups = append(groups, g)
		}
	}
	groups = append(groups, user.AllAuthenticated)
	return &user.DefaultInfo{Name: id.Username, UID: id.UID, Groups: groups, Extra: id.Extra}
}

// attributes are the request's authorization attributes, as kube-apiserver would send them in
// a SubjectAccessReview: the RequestInfo's verb, group, resource, subresource, namespace and
// name, and the label selector's requirements.
func attributes(u *user.DefaultInfo, id tokenreview.Identity, info *request.RequestInfo) subjectaccessreview.Attributes {
	a := subjectaccessreview.Attributes{
		User:            u.Name,
		UID:             u.UID,
		Groups:          u.Groups,
		ResourceRequest: info.IsResourceRequest,
		Verb:            info.Verb,
		Path:            info.Path,
	}
	if l := id.Extra[tokenreview.ExtraLogin]; len(l) > 0 {
		a.Login = l[0]
	}
	if info.IsResourceRequest {
		a.Path = ""
		a.APIGroup, a.Resource, a.Subresource = info.APIGroup, info.Resource, info.Subresource
		a.Namespace, a.Name = info.Namespace, info.Name
		a.LabelRequirements = labelRequirements(info.LabelSelector)
	}
	return a
}

// labelRequirements converts a label selector to SubjectAccessReview requirements the way
// kube-apiserver does (= == in: In; != notin: NotIn; exists; !: DoesNotExist). A selector
// that does not parse gives none (kube-apiserver refuses the request itself).
func labelRequirements(selector string) []subjectaccessreview.LabelRequirement {
	if selector == "" {
		return nil
	}
	reqs, err := labels.ParseToRequirements(selector)
	if err != nil {
		return nil
	}
	out := make([]subjectaccessreview.LabelRequirement, 0, len(reqs))
	for _, r := range reqs {
		var op string
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = string(metav1.LabelSelectorOpIn)
		case selection.NotEquals, selection.NotIn:
			op = string(metav1.LabelSelectorOpNotIn)
		case selection.Exists:
			op = string(metav1.LabelSelectorOpExists)
		case selection.DoesNotExist:
			op = string(metav1.LabelSelectorOpDoesNotExist)
		default:
			continue // gt, lt: kube-apiserver sends none either
		}
		values := r.Values().List()
		slices.Sort(values)
		out = append(out, subjectaccessreview.LabelRequirement{Key: r.Key(), Operator: op, Values: values})
	}
	return out
}

// longRunning reports whether a request may stay open indefinitely, as kube-apiserver's
// LongRunningRequestCheck says: watches, and the exec, attach, portforward, proxy and log
// subresources.
func longRunning(info *request.RequestInfo) bool {
	if info.Verb == "watch" || info.Verb == "proxy" {
		return true
	}
	switch info.Subresource {
	case "exec", "attach", "portforward", "proxy", "log":
		return true
	}
	return false
}
