package credential

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
)

// refuseAll is a GitHub lookup that refuses every token: the Actions path must not use it.
type refuseAll struct{}

func (refuseAll) Lookup(context.Context, string) (tokenreview.Identity, error) {
	return tokenreview.Identity{}, errors.New("GitHub asked for a GitHub Actions job")
}

// actionsSessionIssuer serves session's real token handler, exchanging Actions ID tokens of
// iss (aud "octogate", owner acme) for sessions for cluster-a. It counts exchanges.
func actionsSessionIssuer(t *testing.T, iss *githubapi.ActionsIssuer) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	verifier, err := actionsoidc.New(actionsoidc.Config{Issuer: iss.URL(), Audience: "octogate", Orgs: []string{"acme"}, HTTPClient: iss.Client()})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	var token http.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != session.TokenPath {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		token.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	x, err := session.NewExchanger(session.ExchangerConfig{Issuer: srv.URL, Audiences: []string{"cluster-a"}, Keys: keys,
		GitHub: refuseAll{}, Actions: verifier})
	if err != nil {
		t.Fatal(err)
	}
	token = session.NewTokenHandler(x)
	return srv, &n
}

func TestActionsSessionIsExchangedCachedPerJob(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	srv, exchanges := actionsSessionIssuer(t, iss)
	getenv := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	deploy := iss.WorkflowEnv(githubapi.Workflow{Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production"})
	p := newPlugin(t, Config{})
	sc := SessionConfig{Issuer: srv.URL, Audience: "cluster-a", HTTPClient: srv.Client(),
		Actions: &ActionsJob{Getenv: getenv(deploy), Client: iss.Client(), Audience: "octogate"}}

	tok, err := p.Session(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	claims := payloadOf(t, tok.Value)
	if claims["iss"] != srv.URL || claims["aud"] != "cluster-a" || !strings.Contains(claims["username"].(string), "acme/deploy") {
		t.Fatalf("session claims iss=%v aud=%v username=%v", claims["iss"], claims["aud"], claims["username"])
	}
	if tok.Source != SourceSession || !tok.Expiry.After(p.cfg.Now()) {
		t.Fatalf("session %v", tok)
	}
	if again, err := p.Session(context.Background(), sc); err != nil || again.Value != tok.Value || exchanges.Load() != 1 {
		t.Fatalf("a live session is not reused: %v, %d exchanges", err, exchanges.Load())
	}
	if iss.Calls(githubapi.PathIDToken) != 1 {
		t.Errorf("%d ID token requests for one session, want 1", iss.Calls(githubapi.PathIDToken))
	}

	// Another job on the same runner (same cache directory) gets its own session.
	other := iss.WorkflowEnv(githubapi.Workflow{Repository: "acme/web", RepositoryID: 75, OwnerID: 2001})
	sc.Actions.Getenv = getenv(other)
	tok2, err := p.Session(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if tok2.Value == tok.Value || !strings.Contains(payloadOf(t, tok2.Value)["username"].(string), "acme/web") {
		t.Fatalf("another job got the first job's session: %v", payloadOf(t, tok2.Value)["username"])
	}
	if p.sessionCachePath(srv.URL, "cluster-a", subjectActions) == p.actionsSessionCachePath(srv.URL, "cluster-a", deploy[EnvIDTokenRequestURL], deploy[EnvIDTokenRequestToken]) {
		t.Error("a job's session shares the person's cache file")
	}
	fi, err := os.Stat(p.actionsSessionCachePath(srv.URL, "cluster-a", other[EnvIDTokenRequestURL], other[EnvIDTokenRequestToken]))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("job session cache: %v %v", fi, err)
	}
}

func TestActionsSessionRefusals(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	srv, exchanges := actionsSessionIssuer(t, iss)
	outsider := iss.WorkflowEnv(githubapi.Workflow{Repository: "evil/deploy", RepositoryID: 9, OwnerID: 666})
	p := newPlugin(t, Config{})
	sc := SessionConfig{Issuer: srv.URL, Audience: "cluster-a", HTTPClient: srv.Client(),
		Actions: &ActionsJob{Getenv: func(k string) string { return outsider[k] }, Client: iss.Client(), Audience: "octogate"}}
	_, err := p.Session(context.Background(), sc)
	if !errors.Is(err, ErrSessionRefused) || !strings.Contains(err.Error(), "invalid_grant: [") {
		t.Fatalf("a job of another owner: %v", err)
	}
	sc.Actions.Getenv = func(string) string { return "" }
	if _, err := p.Session(context.Background(), sc); !errors.Is(err, ErrNotInActions) || exchanges.Load() != 1 {
		t.Fatalf("outside a job: %v after %d exchanges", err, exchanges.Load())
	}
}
