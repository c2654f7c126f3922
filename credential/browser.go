package credential

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/oauth2"
)

// ErrBrowserFlow: the browser login failed (nothing came back in time, GitHub's authorization
// page answered an error). A failed code exchange wraps ErrDeviceFlow, as every token endpoint
// error does.
var ErrBrowserFlow = errors.New("GitHub browser login failed")

// ErrNoClientSecret: the browser flow was asked for without the app's client secret, which
// GitHub requires to exchange the code.
var ErrNoClientSecret = errors.New("the browser login needs the GitHub app's client secret")

// callbackPath is the path of the loopback redirect URI: register
// http://127.0.0.1/callback as the app's callback URL; GitHub accepts any port on a loopback
// host.
// Source: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#loopback-redirect-urls
const callbackPath = "/callback"

// browserFlow runs GitHub's web application flow for a native app: listen on 127.0.0.1 on a
// random port, open the authorization URL (with a random state and a PKCE S256 challenge) in
// the browser through the platform's opener, wait for GitHub to send the browser back to
// http://127.0.0.1:PORT/callback with the code and the same state, and exchange the code with
// the PKCE verifier and the client secret. The URL is always printed on Prompt, so that a
// person can open it by hand when the opener fails or opens the wrong browser. The wait is
// bounded by Config.LoginTimeout.
// Sources: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#web-application-flow,
// RFC 8252 (OAuth for native apps) §7.3, RFC 7636 (PKCE).
func (p *Plugin) browserFlow(ctx context.Context) (*oauth2.Token, error) {
	if p.cfg.ClientSecret == "" {
		return nil, fmt.Errorf("%w (--client-secret or OCTOGATE_OAUTH_CLIENT_SECRET), which GitHub requires to exchange the code; use --device for the device flow", ErrNoClientSecret)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: listen on 127.0.0.1: %w", ErrBrowserFlow, err)
	}
	conf := p.oauthConfig()
	conf.ClientSecret = p.cfg.ClientSecret
	conf.RedirectURL = fmt.Sprintf("http://%s%s", l.Addr(), callbackPath)
	state, verifier := rand.Text(), oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	type callback struct{ code, errCode, errDesc string }
	got := make(chan callback, 1)
	done := make(chan error, 1) // the exchange's outcome, for the page the browser shows
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+callbackPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != state {
			// Not the redirect of this login (a stale tab, or a forged link): ignore it.
			http.Error(w, "octogate: this login link is not the one octogate opened (state mismatch); use the newest link in your terminal", http.StatusBadRequest)
			return
		}
		select {
		case got <- callback{code: q.Get("code"), errCode: q.Get("error"), errDesc: q.Get("error_description")}:
		default:
			http.Error(w, "octogate: this login was already completed", http.StatusConflict)
			return
		}
		var err error
		select {
		case err = <-done:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err != nil {
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, "<!doctype html><title>octogate</title><p>Login failed: %s</p><p>Go back to your terminal.</p>\n", html.EscapeString(err.Error()))
			return
		}
		_, _ = fmt.Fprint(w, "<!doctype html><title>octogate</title><p>You are logged in to Kubernetes with GitHub. You can close this tab.</p>\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // lets the success page reach the browser
	}()

	_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: to log in to Kubernetes with GitHub, open this URL in a browser (opening it for you): %s\n", authURL)
	if err := p.cfg.OpenBrowser(authURL); err != nil {
		_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: cannot open a browser (%v); open the URL above by hand\n", err)
	}

	wait := time.NewTimer(p.cfg.LoginTimeout)
	defer wait.Stop()
	var cb callback
	select {
	case cb = <-got:
	case <-wait.C:
		return nil, fmt.Errorf("%w: the browser login was not completed within %s; run the command again (or use --device)", ErrBrowserFlow, p.cfg.LoginTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: interrupted", ErrBrowserFlow)
	}
	tok, err := p.exchange(ctx, conf, cb.code, cb.errCode, cb.errDesc, verifier)
	done <- err
	return tok, err
}

// exchange turns the callback's answer into a token: an error answer from GitHub's
// authorization page, or the code exchanged with the PKCE verifier.
func (p *Plugin) exchange(ctx context.Context, conf *oauth2.Config, code, errCode, errDesc, verifier string) (*oauth2.Token, error) {
	switch {
	case errCode == errCodeAccessDenied:
		return nil, fmt.Errorf("%w: access was not granted in the browser; run the command again to retry", ErrAccessDenied)
	case errCode != "":
		return nil, fmt.Errorf("%w: GitHub's authorization page answered %s: %s", ErrBrowserFlow, errCode, errDesc)
	case code == "":
		return nil, fmt.Errorf("%w: GitHub sent the browser back without a code", ErrBrowserFlow)
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient)
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("browser login: %w", p.classify(ctx, err, ""))
	}
	return tok, nil
}

// openBrowser opens url with the platform's opener: open on macOS, rundll32's
// url.dll,FileProtocolHandler on Windows, xdg-open elsewhere. It fails when the opener is
// missing or exits with an error within 3 s; an opener still running then (some wait for the
// browser) is left to finish. The opener's output is discarded: stdout belongs to kubectl.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(3 * time.Second):
		return nil
	}
}

// displayAvailable reports whether a browser can be shown: always on macOS and Windows,
// elsewhere when DISPLAY or WAYLAND_DISPLAY is set.
func displayAvailable() bool {
	switch runtime.GOOS {
	case "darwin", "windows":
		return true
	}
	return os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}
