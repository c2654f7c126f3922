package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/octogate/octogate/subjectaccessreview"
)

// verdictOf is a fake Authorizer: Deny for secrets, else Allow by rule "all".
type verdictOf struct{}

func (verdictOf) Decide(a *subjectaccessreview.Attributes) subjectaccessreview.Decision {
	if a.Resource == "secrets" {
		return subjectaccessreview.Decision{Verdict: subjectaccessreview.Deny, Rule: "no-secrets"}
	}
	return subjectaccessreview.Decision{Verdict: subjectaccessreview.Allow, Rule: "all"}
}

// At debug level every decision is one "proxy decision" line with its attributes and
// verdict; at info the Authorizer is not wrapped at all.
func TestLogDecisions(t *testing.T) {
	var buf bytes.Buffer
	debug := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := logDecisions(verdictOf{}, debug)
	d := a.Decide(&subjectaccessreview.Attributes{User: "github:bob:1002", ResourceRequest: true, Verb: "create",
		Resource: "pods", Subresource: "exec", Namespace: "prod", Name: "web"})
	if d.Verdict != subjectaccessreview.Allow || d.Rule != "all" {
		t.Fatalf("decision changed by the wrapper: %+v", d)
	}
	var line map[string]string
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	want := map[string]string{"level": "DEBUG", "msg": "proxy decision", "user": "github:bob:1002", "verb": "create", "apiGroup": "",
		"resource": "pods", "subresource": "exec", "namespace": "prod", "name": "web", "path": "", "verdict": "Allow", "rule": "all"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %q, want %q (line %s)", k, line[k], v, strings.TrimSpace(buf.String()))
		}
	}

	info := slog.New(slog.NewJSONHandler(&buf, nil))
	if _, wrapped := logDecisions(verdictOf{}, info).(decisionLogger); wrapped {
		t.Error("at info level the Authorizer is wrapped")
	}
}
