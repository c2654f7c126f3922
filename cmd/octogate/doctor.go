package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/credential"
	"github.com/octogate/octogate/tokenreview"
)

// Variables `octogate doctor` reads besides those of `octogate credential`; the server's
// variables of the same names mean the same.
const (
	envGitHubOrgs       = "OCTOGATE_GITHUB_ORGS"
	envGitHubTokenTypes = "OCTOGATE_GITHUB_TOKEN_TYPES"
	envGitHubAPIURL     = "OCTOGATE_GITHUB_API_URL"
	envUsernamePrefix   = "OCTOGATE_USERNAME_PREFIX"
	envUsernameFormat   = "OCTOGATE_USERNAME_FORMAT"
)

// Exit codes of `octogate doctor`.
const (
	doctorAccepted    = 0
	doctorRefused     = 1
	doctorUnavailable = 2
	doctorUsage       = 3
)

// doctorSettings are what the doctor needs besides the token; each comes from its flag, else
// the variable of the same name, else the kubeconfig user written by `octogate kubeconfig user`.
type doctorSettings struct {
	githubURL, githubCAFile, clientID string
	clientSecret                      string
	apiURL                            string
	orgs, tokenTypes                  string
	prefix, format                    string
	// sessionIssuer, audience and sessionCAFile, when set, make the doctor run the session
	// exchange (`octogate credential --session-issuer`) instead of asking GitHub itself.
	sessionIssuer, audience, sessionCAFile string
}

func newDoctorCmd() *cobra.Command {
	var flags doctorSettings
	var kubeconfig, kubeContext string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "say whether octogate would accept your GitHub token, and if not why and what to do",
		Long: `doctor takes a GitHub token the way "octogate credential" does (GITHUB_TOKEN, then
"gh auth token", then the cached or a new device-flow token), asks GitHub with the same code and
rules as the server (allowed orgs and their id pins, accepted token types), and prints the
Kubernetes identity the server would give, or the reason code, what it means and the fix.
kubectl itself only says "You must be logged in to the server" for a refused token.

The GitHub URL, orgs and token types come from the flags, else OCTOGATE_GITHUB_URL,
OCTOGATE_GITHUB_ORGS and OCTOGATE_GITHUB_TOKEN_TYPES, else the current kubeconfig user written
by "octogate kubeconfig user". When that user's exec env sets GITHUB_TOKEN, its value is the
token, as kubectl would run the plugin ("octogate doctor --context carol" checks what
"kubectl --context carol" sends). The token itself is never printed.

With --session-issuer URL --audience CLUSTER, or when the kubeconfig user's plugin runs with
them, doctor exchanges the token at that issuer as the plugin would (docs/sessions.md) and
prints the session's identity, or the issuer's error (invalid_grant with the reason code,
invalid_target for an audience the issuer does not serve, 503 when it cannot answer now), what
it means and the fix; the issuer applies the orgs and token types, so none are needed here.

Exit status: 0 accepted, 1 refused, 2 GitHub unavailable, 3 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := flags.or(settingsFromEnv(os.Getenv))
			token := tokenSetting{value: os.Getenv(envGitHubToken), source: string(credential.SourceEnv)}
			user, exec, err := kubeconfigExec(kubeconfig, kubeContext)
			if err != nil && s.orgs == "" && s.sessionIssuer == "" {
				return &exitError{code: doctorUsage, err: fmt.Errorf("no allowed orgs: pass --github-orgs or set %s (%w)", envGitHubOrgs, err)}
			}
			s = s.or(settingsFromExec(exec))
			if v, ok := execEnv(exec, envGitHubToken); ok {
				// kubectl runs the plugin with its env over the caller's: the token of this
				// context is the kubeconfig's, not the shell's.
				token = tokenSetting{value: v, source: string(credential.SourceEnv) + " of kubeconfig user " + user}
			}
			if (s.sessionIssuer == "") != (s.audience == "") {
				return &exitError{code: doctorUsage, err: errors.New("--session-issuer and --audience: set both or neither")}
			}
			if s.orgs == "" && s.sessionIssuer == "" {
				return &exitError{code: doctorUsage, err: fmt.Errorf("no allowed orgs: pass --github-orgs, set %s, or use a kubeconfig from \"octogate kubeconfig user --github-orgs\"", envGitHubOrgs)}
			}
			return runDoctor(cmd, s, token, timeout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&flags.githubURL, "github-url", "", "GitHub web URL, https://HOST for GitHub Enterprise (default $"+envGitHubURL+", the kubeconfig's, or "+credential.DefaultGitHubURL+")")
	f.StringVar(&flags.apiURL, "github-api-url", "", "GitHub REST base (default $"+envGitHubAPIURL+", or derived from --github-url)")
	f.StringVar(&flags.githubCAFile, "github-ca-file", "", "extra PEM CA bundle for GitHub Enterprise (default $"+envGitHubCAFile+")")
	f.StringVar(&flags.clientSecret, "client-secret", "", "the GitHub app's client secret, for the browser flow (default $"+envOAuthSecret+")")
	f.StringVar(&flags.clientID, "client-id", "", "GitHub OAuth app client id for the device flow (default $"+envOAuthClientID+")")
	f.StringVar(&flags.orgs, "github-orgs", "", "the server's allowed orgs, e.g. acme=2001,umbrella (default $"+envGitHubOrgs+" or the kubeconfig's)")
	f.StringVar(&flags.tokenTypes, "github-token-types", "", "the server's accepted token types (default $"+envGitHubTokenTypes+", the kubeconfig's, or all user token types)")
	f.StringVar(&flags.prefix, "username-prefix", "", "the server's username prefix (default $"+envUsernamePrefix+" or github:)")
	f.StringVar(&flags.format, "username-format", "", "the server's username format (default $"+envUsernameFormat+" or login:id)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to read the settings from (default $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context (default the current one)")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each GitHub call, and of the session exchange")
	f.StringVar(&flags.sessionIssuer, "session-issuer", "", "run the session exchange at this octogate issuer instead (default the kubeconfig's)")
	f.StringVar(&flags.audience, "audience", "", "the cluster of the session, with --session-issuer (default the kubeconfig's)")
	f.StringVar(&flags.sessionCAFile, "session-ca-file", "", "extra PEM CA bundle for the session issuer (default the kubeconfig's)")
	return cmd
}

// tokenSetting is the GITHUB_TOKEN the doctor checks and where it was set.
type tokenSetting struct{ value, source string }

func runDoctor(cmd *cobra.Command, s doctorSettings, token tokenSetting, timeout time.Duration) error {
	out := cmd.OutOrStdout()
	var apiURL string
	var lookup tokenreview.Lookup
	if s.sessionIssuer == "" { // else the issuer applies its orgs and token types
		var err error
		if apiURL, err = doctorAPIURL(s); err != nil {
			return &exitError{code: doctorUsage, err: err}
		}
		var types []string
		if s.tokenTypes != "" {
			types = strings.Split(s.tokenTypes, ",")
		}
		lookup, err = tokenreview.NewLookup(tokenreview.Config{
			GitHubAPIURL:   apiURL,
			GitHubCAFile:   s.githubCAFile,
			Orgs:           strings.Split(s.orgs, ","),
			TokenTypes:     types,
			Timeout:        timeout,
			UsernamePrefix: s.prefix,
			UsernameFormat: s.format,
		})
		if err != nil {
			return &exitError{code: doctorUsage, err: err}
		}
	}
	p, err := credential.New(credential.Config{
		GitHubURL:    s.githubURL,
		GitHubCAFile: s.githubCAFile,
		ClientID:     s.clientID,
		ClientSecret: s.clientSecret,
		GitHubToken:  token.value,
		Prompt:       cmd.ErrOrStderr(),
	})
	if err != nil {
		return &exitError{code: doctorUsage, err: oneLine(err)}
	}
	tok, err := p.Token(cmd.Context())
	if err != nil {
		return &exitError{code: doctorUsage, err: oneLine(err)}
	}
	source := string(tok.Source)
	if tok.Source == credential.SourceEnv {
		source = token.source
	}
	_, _ = fmt.Fprintf(out, "token:    GitHub token of type %s, from %s\n", tokenreview.TokenType(tok.Value), source)
	if s.sessionIssuer != "" {
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		return runSessionDoctor(ctx, out, p, s, tok.Value)
	}
	_, _ = fmt.Fprintf(out, "checked:  %s for orgs %s\n", apiURL, s.orgs)
	id, err := lookup.Lookup(cmd.Context(), tok.Value)
	return reportDoctor(out, id, err)
}

// reportDoctor prints the identity, or the reason code, the explanation and the fix.
func reportDoctor(out io.Writer, id tokenreview.Identity, err error) error {
	if err == nil {
		_, _ = fmt.Fprintf(out, "result:   accepted\nusername: %s\nuid:      %s\ngroups:   %s\n", id.Username, id.UID, strings.Join(id.Groups, ", "))
		return nil
	}
	code := tokenreview.Reason(err)
	result := tokenreview.Result(err)
	_, _ = fmt.Fprintf(out, "result:   %s\nreason:   %s\nerror:    %s\n", result, code, err)
	if info, ok := tokenreview.Explain(code); ok {
		_, _ = fmt.Fprintf(out, "means:    %s\nfix:      %s\n", info.Meaning, info.Fix)
	}
	exit := doctorRefused
	if result == tokenreview.ResultUnavailable {
		exit = doctorUnavailable
	}
	return &exitError{code: exit, err: fmt.Errorf("the token would be %s: %s", result, code)}
}

// doctorAPIURL is the REST base: --github-api-url, else derived from the web URL as GitHub
// lays it out (github.com -> api.github.com; GitHub Enterprise https://HOST -> HOST/api/v3/).
func doctorAPIURL(s doctorSettings) (string, error) {
	if s.apiURL != "" {
		return s.apiURL, nil
	}
	web := s.githubURL
	if web == "" {
		web = credential.DefaultGitHubURL
	}
	u, err := url.Parse(strings.TrimRight(web, "/"))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--github-url %q: want a URL such as https://github.com", web)
	}
	if u.Host == "github.com" {
		return tokenreview.DefaultGitHubAPIURL, nil
	}
	return u.String() + "/api/v3/", nil
}

func settingsFromEnv(getenv func(string) string) doctorSettings {
	return doctorSettings{
		githubURL: getenv(envGitHubURL), githubCAFile: getenv(envGitHubCAFile), clientID: getenv(envOAuthClientID),
		clientSecret: getenv(envOAuthSecret),
		apiURL:       getenv(envGitHubAPIURL), orgs: getenv(envGitHubOrgs), tokenTypes: getenv(envGitHubTokenTypes),
		prefix: getenv(envUsernamePrefix), format: getenv(envUsernameFormat),
	}
}

// settingsFromExec reads the exec plugin of a user kubeconfig written by
// `octogate kubeconfig user`: the credential flags in its args and the doctor's settings in
// its env. A nil exec gives nothing.
func settingsFromExec(exec *clientcmdapi.ExecConfig) doctorSettings {
	var s doctorSettings
	if exec == nil {
		return s
	}
	flag := func(name string) string {
		for i, a := range exec.Args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
			if a == "--"+name && i+1 < len(exec.Args) {
				return exec.Args[i+1]
			}
		}
		return ""
	}
	s.githubURL, s.githubCAFile, s.clientID = flag("github-url"), flag("github-ca-file"), flag("client-id")
	s.clientSecret = flag("client-secret")
	s.sessionIssuer, s.audience, s.sessionCAFile = flag("session-issuer"), flag("audience"), flag("session-ca-file")
	for _, e := range exec.Env {
		switch e.Name {
		case envGitHubOrgs:
			s.orgs = e.Value
		case envGitHubTokenTypes:
			s.tokenTypes = e.Value
		case envGitHubURL:
			s.githubURL = e.Value
		}
	}
	return s
}

// or fills s's empty fields from d.
func (s doctorSettings) or(d doctorSettings) doctorSettings {
	pick := func(a, b string) string { return firstSet(a, b) }
	return doctorSettings{
		githubURL: pick(s.githubURL, d.githubURL), githubCAFile: pick(s.githubCAFile, d.githubCAFile),
		clientID: pick(s.clientID, d.clientID), clientSecret: pick(s.clientSecret, d.clientSecret), apiURL: pick(s.apiURL, d.apiURL), orgs: pick(s.orgs, d.orgs),
		tokenTypes: pick(s.tokenTypes, d.tokenTypes), prefix: pick(s.prefix, d.prefix), format: pick(s.format, d.format),
		sessionIssuer: pick(s.sessionIssuer, d.sessionIssuer), audience: pick(s.audience, d.audience),
		sessionCAFile: pick(s.sessionCAFile, d.sessionCAFile),
	}
}

// execEnv is the value exec's env gives name, and whether it names it at all.
func execEnv(exec *clientcmdapi.ExecConfig, name string) (string, bool) {
	if exec == nil {
		return "", false
	}
	for _, e := range exec.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// kubeconfigExec is the name and the exec plugin of the context's user, from the kubeconfig
// kubectl would use (--kubeconfig, else $KUBECONFIG, else ~/.kube/config).
func kubeconfigExec(path, context string) (string, *clientcmdapi.ExecConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := rules.Load()
	if err != nil {
		return "", nil, err
	}
	if context == "" {
		context = cfg.CurrentContext
	}
	ctx := cfg.Contexts[context]
	if ctx == nil {
		return "", nil, fmt.Errorf("kubeconfig has no context %q", context)
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	if user == nil || user.Exec == nil {
		return ctx.AuthInfo, nil, errors.New("the kubeconfig user does not log in with \"octogate credential\"")
	}
	return ctx.AuthInfo, user.Exec, nil
}
