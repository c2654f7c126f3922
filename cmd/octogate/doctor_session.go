package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/octogate/octogate/credential"
	"github.com/octogate/octogate/tokenreview"
)

// exchangeErrors explain the token endpoint's RFC 6749 section 5.2 error codes
// (docs/sessions.md). invalid_grant needs no entry: its error_description starts with the
// reason code of /authenticate, which tokenreview.Explain explains (as it does the reason code
// of a temporarily_unavailable).
var exchangeErrors = map[string]tokenreview.ReasonInfo{
	"invalid_target": {Result: tokenreview.ResultRefused,
		Meaning: "the issuer does not mint sessions for this audience: it is not in the issuer's OCTOGATE_SESSION_AUDIENCES or OCTOGATE_SESSION_CLUSTERS_FILE",
		Fix:     "check --audience (the kubeconfig's) against the cluster's name (\"octogate clusters --issuer URL\" lists yours); an admin adds the cluster to the issuer's OCTOGATE_SESSION_AUDIENCES or clusters file"},
	"temporarily_unavailable": {Result: tokenreview.ResultUnavailable,
		Meaning: "the issuer is up but cannot answer now (HTTP 503): GitHub or the GitHub Actions issuer did not answer it; this is not a refusal",
		Fix:     "retry in a moment; if it lasts, an admin checks the issuer's logs and GitHub's status"},
	"invalid_request": {Result: tokenreview.ResultRefused,
		Meaning: "the issuer could not read the exchange request",
		Fix:     "use an octogate as recent as the issuer's; the description says which parameter is wrong"},
	"unsupported_grant_type": {Result: tokenreview.ResultRefused,
		Meaning: "the issuer does not do this grant type: it is not an octogate session issuer, or a different version",
		Fix:     "check --session-issuer: it is the issuer's OCTOGATE_SESSION_ISSUER"},
}

// exchangeReasons explain the reason codes of the token endpoint's own refusals, which
// tokenreview.Explain does not know; they replace the explanation of the error code.
var exchangeReasons = map[string]tokenreview.ReasonInfo{
	"cluster_not_allowed": {Result: tokenreview.ResultRefused,
		Meaning: "the issuer serves this cluster, but its clusters file limits it to other people or teams (its subjects)",
		Fix:     "ask the cluster's administrators to add you or your team to its subjects; \"octogate clusters --issuer URL\" lists the clusters you may use"},
}

// runSessionDoctor exchanges the GitHub token at the issuer, as `octogate credential
// --session-issuer` would, and prints the session's identity, or the issuer's error with its
// reason code, what it means and the fix.
func runSessionDoctor(ctx context.Context, out io.Writer, p *credential.Plugin, s doctorSettings, githubToken string) error {
	sc := credential.SessionConfig{Issuer: s.sessionIssuer, Audience: s.audience, CAFile: s.sessionCAFile}
	_, _ = fmt.Fprintf(out, "exchange: %s for audience %s\n", credential.TokenEndpoint(s.sessionIssuer), s.audience)
	tok, err := p.ExchangeSession(ctx, sc, githubToken)
	if err == nil {
		c, cerr := sessionClaims(tok.Value)
		if cerr != nil {
			return &exitError{code: doctorUnavailable, err: fmt.Errorf("the issuer answered a session that is not a JWT: %w", cerr)}
		}
		_, _ = fmt.Fprintf(out, "result:   accepted: a session for %s until %s\nusername: %s\nuid:      %s\ngroups:   %s\n",
			c.Audience, tok.Expiry.UTC().Format(time.RFC3339), c.Username, c.UID, strings.Join(c.Groups, ", "))
		return nil
	}
	var se *credential.SessionError
	if !errors.As(err, &se) {
		_, _ = fmt.Fprintf(out, "result:   unavailable\nerror:    %s\nmeans:    the issuer could not be reached or did not answer as a token endpoint\nfix:      check --session-issuer (its OCTOGATE_SESSION_ISSUER), --session-ca-file and the network\n", oneLine(err))
		return &exitError{code: doctorUnavailable, err: errors.New("the exchange could not be made")}
	}
	result := tokenreview.ResultRefused
	if !se.Refused() {
		result = tokenreview.ResultUnavailable
	}
	_, _ = fmt.Fprintf(out, "result:   %s (HTTP %d)\nerror:    %s\n", result, se.Status, se.Code)
	// invalid_grant and temporarily_unavailable carry the reason code of /authenticate.
	code := se.ReasonCode()
	if code != "" {
		_, _ = fmt.Fprintf(out, "reason:   %s\n", code)
	}
	_, _ = fmt.Fprintf(out, "detail:   %s\n", se.Description)
	if info, ok := exchangeReasons[code]; ok {
		_, _ = fmt.Fprintf(out, "means:    %s\nfix:      %s\n", info.Meaning, info.Fix)
	} else if info, ok := exchangeErrors[se.Code]; ok {
		_, _ = fmt.Fprintf(out, "means:    %s\nfix:      %s\n", info.Meaning, info.Fix)
	}
	if info, ok := tokenreview.Explain(code); ok {
		_, _ = fmt.Fprintf(out, "means:    %s\nfix:      %s\n", info.Meaning, info.Fix)
	}
	exit := doctorRefused
	if result == tokenreview.ResultUnavailable {
		exit = doctorUnavailable
	}
	what := se.Code
	if code != "" {
		what += " " + code
	}
	return &exitError{code: exit, err: fmt.Errorf("the exchange would be %s: %s", result, what)}
}

// sessionClaim are the session's claims the doctor shows, read without verifying the
// signature: the issuer just minted it, and the cluster verifies it.
type sessionClaim struct {
	Audience string   `json:"aud"`
	Username string   `json:"username"`
	UID      string   `json:"uid"`
	Groups   []string `json:"groups"`
}

func sessionClaims(jwt string) (sessionClaim, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return sessionClaim{}, errors.New("not three parts")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return sessionClaim{}, errors.New("payload is not base64url")
	}
	var c sessionClaim
	if err := json.Unmarshal(b, &c); err != nil {
		return sessionClaim{}, errors.New("payload is not the claims of a session")
	}
	return c, nil
}
