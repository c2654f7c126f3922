package proxy

import (
	"context"
	"log/slog"

	"github.com/octogate/octogate/subjectaccessreview"
)

// logDecisions returns a, or, when log is enabled at debug level (OCTOGATE_LOG_LEVEL=debug),
// a wrapper that logs every decision a makes for the proxy: one "proxy decision" line with the
// attributes (user, verb, apiGroup, resource, subresource, namespace, name, path) and the
// verdict (Allow, Deny or NoOpinion) with its rule. The level is fixed when the proxy is
// built, so at other levels a costs nothing more. Attributes carry no credentials.
func logDecisions(a Authorizer, log *slog.Logger) Authorizer {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return a
	}
	return decisionLogger{a, log}
}

type decisionLogger struct {
	Authorizer
	log *slog.Logger
}

func (l decisionLogger) Decide(a *subjectaccessreview.Attributes) subjectaccessreview.Decision {
	d := l.Authorizer.Decide(a)
	l.log.LogAttrs(context.Background(), slog.LevelDebug, "proxy decision",
		slog.String("user", a.User), slog.String("verb", a.Verb),
		slog.String("apiGroup", a.APIGroup), slog.String("resource", a.Resource), slog.String("subresource", a.Subresource),
		slog.String("namespace", a.Namespace), slog.String("name", a.Name), slog.String("path", a.Path),
		slog.String("verdict", d.Verdict.String()), slog.String("rule", d.Rule))
	return d
}
