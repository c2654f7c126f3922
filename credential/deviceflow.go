package credential

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"golang.org/x/oauth2"
)

// Device-flow errors. Each is wrapped with a message that says what to do next.
var (
	// ErrNoClientID: no GITHUB_TOKEN, no gh login, and no OAuth client id for the device flow.
	ErrNoClientID = errors.New("no GitHub token: set GITHUB_TOKEN, log in with `gh auth login`, or give the OAuth app client id (--client-id or OCTOGATE_OAUTH_CLIENT_ID) for the device flow")
	// ErrAccessDenied: the person pressed Cancel on GitHub's device page (error access_denied).
	ErrAccessDenied = errors.New("GitHub login was denied")
	// ErrCodeExpired: the device code expired before it was entered (error expired_token).
	ErrCodeExpired = errors.New("the GitHub device code expired")
	// ErrDeviceFlow: any other device flow failure (GitHub unreachable, app misconfigured).
	ErrDeviceFlow = errors.New("GitHub device flow failed")
)

// Device flow error codes GitHub returns besides RFC 8628's.
// Source: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#error-codes-for-the-device-flow
const (
	errCodeAccessDenied       = "access_denied"
	errCodeExpiredToken       = "expired_token"
	errCodeDeviceFlowDisabled = "device_flow_disabled"
	errCodeIncorrectClient    = "incorrect_client_credentials"
)

func (p *Plugin) oauthConfig() *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.cfg.ClientID,
		Scopes:   Scopes,
		Endpoint: oauth2.Endpoint{
			AuthURL:       p.cfg.GitHubURL + "/login/oauth/authorize",
			DeviceAuthURL: p.cfg.GitHubURL + "/login/device/code",
			TokenURL:      p.cfg.GitHubURL + "/login/oauth/access_token",
			// A device-flow client has no secret; send client_id in the form.
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
}

// deviceFlow runs the GitHub device flow: ask for a device code, tell the person where to
// enter it (on Prompt), then poll until GitHub grants, denies or expires it. The wait is
// bounded by the code's expires_in (15 minutes on GitHub).
func (p *Plugin) deviceFlow(ctx context.Context) (*oauth2.Token, error) {
	conf := p.oauthConfig()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient)
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return nil, p.classify(ctx, err, "")
	}
	if da.DeviceCode == "" || da.UserCode == "" || da.VerificationURI == "" {
		return nil, fmt.Errorf("%w: GitHub answered %s without a device code", ErrDeviceFlow, conf.Endpoint.DeviceAuthURL)
	}
	verify := da.VerificationURI
	_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: to log in to Kubernetes with GitHub, open %s and enter the code %s\n", verify, da.UserCode)
	if !da.Expiry.IsZero() {
		_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: waiting for the code to be authorized (it expires at %s)\n", da.Expiry.Local().Format(time.Kitchen))
	}
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return nil, p.classify(ctx, err, verify)
	}
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("%w: GitHub answered without an access token", ErrDeviceFlow)
	}
	return tok, nil
}

// classify turns an oauth2 or transport error into one line that says what happened and what
// to do. It never includes a response body (which may carry a token).
func (p *Plugin) classify(ctx context.Context, err error, verify string) error {
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.ErrorCode == errCodeAccessDenied:
		return fmt.Errorf("%w: the code was cancelled at %s; run the command again to get a new code", ErrAccessDenied, verify)
	case errors.As(err, &re) && re.ErrorCode == errCodeExpiredToken,
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// DeviceAccessToken stops at the code's expiry with DeadlineExceeded.
		return fmt.Errorf("%w before it was entered; run the command again to get a new code", ErrCodeExpired)
	case errors.As(err, &re) && re.ErrorCode == errCodeDeviceFlowDisabled:
		return fmt.Errorf("%w: device flow is disabled for OAuth app %q; enable \"Device Flow\" in the app's settings on GitHub", ErrDeviceFlow, p.cfg.ClientID)
	case errors.As(err, &re) && re.ErrorCode == errCodeIncorrectClient:
		return fmt.Errorf("%w: GitHub does not know OAuth app client id %q or its client secret (incorrect_client_credentials: check --client-id or OCTOGATE_OAUTH_CLIENT_ID, and --client-secret for the browser flow)", ErrDeviceFlow, p.cfg.ClientID)
	case errors.As(err, &re) && re.ErrorCode != "":
		if re.ErrorDescription != "" {
			return fmt.Errorf("%w: GitHub answered %s: %s", ErrDeviceFlow, re.ErrorCode, re.ErrorDescription)
		}
		return fmt.Errorf("%w: GitHub answered %s", ErrDeviceFlow, re.ErrorCode)
	case errors.As(err, &re) && re.Response != nil:
		return fmt.Errorf("%w: GitHub answered HTTP %s", ErrDeviceFlow, re.Response.Status)
	case errors.Is(err, context.Canceled), ctx.Err() != nil:
		return fmt.Errorf("%w: interrupted", ErrDeviceFlow)
	}
	var ue *url.Error
	if errors.As(err, &ue) && errors.Is(err, ErrRedirect) {
		return fmt.Errorf("%w: %w", ErrDeviceFlow, ue.Err)
	}
	if errors.As(err, &ue) {
		return fmt.Errorf("%w: cannot reach GitHub at %s: %w", ErrDeviceFlow, p.cfg.GitHubURL, ue.Err)
	}
	return fmt.Errorf("%w: %w", ErrDeviceFlow, err)
}
