package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
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
	// flow is the plugin's --device or --browser.
	flow credential.Flow
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
"kubectl --context carol" sends), and its other variables (XDG_CACHE_HOME, where the plugin
caches its token) apply too: a cached token is reused, never a second login. A static token of
the user is the token checked. The token itself is never printed.

When nothing names the server's orgs or a session issuer, or the user of --context has no
GitHub token of ours (a client certificate, another exec plugin), the cluster of the context
answers instead: a SelfSubjectReview sent with the credential kubectl would send, which says
who it makes you, or 401 without a reason (kube-apiserver gives none).

With --session-issuer URL --audience CLUSTER, or when the kubeconfig user's plugin runs with
them, doctor exchanges the token at that issuer as the plugin would (docs/sessions.md) and
prints the session's identity, or the issuer's error (invalid_grant with the reason code,
invalid_target for an audience the issuer does not serve, 503 when it cannot answer now), what
it means and the fix; the issuer applies the orgs and token types, so none are needed here.

Exit status: 0 accepted, 1 refused, 2 GitHub (or the cluster) unavailable, 3 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := flags.or(settingsFromEnv(os.Getenv))
			token := tokenSetting{value: os.Getenv(envGitHubToken), source: string(credential.SourceEnv)}
			u, err := loadKubeconfigUser(kubeconfig, kubeContext)
			if err != nil && s.orgs == "" && s.sessionIssuer == "" {
				return &exitError{code: doctorUsage, err: fmt.Errorf("no allowed orgs: pass --github-orgs or set %s (%w)", envGitHubOrgs, err)}
			}
			var plugin *clientcmdapi.ExecConfig // the kubeconfig user's `octogate credential`, if any
			if err == nil {
				switch {
				case isCredentialPlugin(u.auth.Exec):
					plugin = u.auth.Exec
					s = s.or(settingsFromExec(plugin))
					if v, ok := execEnv(plugin, envGitHubToken); ok {
						// kubectl runs the plugin with its env over the caller's: the token of this
						// context is the kubeconfig's, not the shell's.
						token = tokenSetting{value: v, source: string(credential.SourceEnv) + " of kubeconfig user " + u.name}
					}
				case u.token != "":
					// kubectl sends a static token as it is: that token, not the shell's, is checked.
					token = tokenSetting{value: u.token, source: "the token of kubeconfig user " + u.name, static: true}
				case kubeContext != "":
					// A client certificate, another exec plugin or an auth provider: kubectl
					// sends no GitHub token of ours for this context; the cluster answers for it.
					return runClusterDoctor(cmd.Context(), cmd.OutOrStdout(), u, tokenSetting{}, "", timeout)
				}
			}
			if (s.sessionIssuer == "") != (s.audience == "") {
				return &exitError{code: doctorUsage, err: errors.New("--session-issuer and --audience: set both or neither")}
			}
			if s.orgs == "" && s.sessionIssuer == "" {
				if err != nil {
					return &exitError{code: doctorUsage, err: fmt.Errorf("no allowed orgs: pass --github-orgs, set %s, or use a kubeconfig from \"octogate kubeconfig user --github-orgs\"", envGitHubOrgs)}
				}
				// Nothing says which orgs the server allows: the cluster itself answers, with the
				// credential kubectl would send.
				if plugin == nil {
					return runClusterDoctor(cmd.Context(), cmd.OutOrStdout(), u, token, "", timeout)
				}
			}
			return runDoctor(cmd, s, token, pluginCacheDir(plugin), u, timeout)
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

// tokenSetting is the GitHub token the doctor checks and where it was set: GITHUB_TOKEN, or
// the kubeconfig user's static token (static: kubectl sends nothing else).
type tokenSetting struct {
	value, source string
	static        bool
}

// runDoctor finds the GitHub token as `octogate credential` would (with the plugin's cache
// in cacheDir, "" for the default) and checks it: at the session issuer, else with GitHub and
// the server's orgs, else, when neither is known, at the cluster of the kubeconfig user u.
func runDoctor(cmd *cobra.Command, s doctorSettings, token tokenSetting, cacheDir string, u *kubeconfigUser, timeout time.Duration) error {
	out := cmd.OutOrStdout()
	var apiURL string
	var lookup tokenreview.Lookup
	if s.sessionIssuer == "" && s.orgs != "" { // else the issuer (or the cluster) applies its orgs and token types
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
		Flow:         s.flow,
		GitHubToken:  token.value,
		CacheDir:     cacheDir,
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
	if lookup == nil {
		return runClusterDoctor(cmd.Context(), out, u, token, tok.Value, timeout)
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
	for _, a := range exec.Args {
		switch a {
		case "--device", "--device=true":
			s.flow = credential.FlowDevice
		case "--browser", "--browser=true":
			s.flow = credential.FlowBrowser
		}
	}
	// The plugin's own variables, which kubectl sets from the exec env; a flag wins, as in
	// `octogate credential`.
	env := func(name string) string { v, _ := execEnv(exec, name); return v }
	s.githubURL = firstSet(s.githubURL, env(envGitHubURL))
	s.githubCAFile = firstSet(s.githubCAFile, env(envGitHubCAFile))
	s.clientID = firstSet(s.clientID, env(envOAuthClientID))
	s.clientSecret = firstSet(s.clientSecret, env(envOAuthSecret))
	s.orgs, s.tokenTypes = env(envGitHubOrgs), env(envGitHubTokenTypes)
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
		flow:          credential.Flow(pick(string(s.flow), string(d.flow))),
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

// kubeconfigUser is the user of a kubeconfig context: its name, its entry, the token kubectl
// sends for it (Token, else TokenFile's content; "" without one) and the client
// configuration kubectl would use.
type kubeconfigUser struct {
	context, name string
	auth          *clientcmdapi.AuthInfo
	token         string
	cfg           *clientcmdapi.Config
	rules         clientcmd.ClientConfigLoader
}

// restConfig is the client configuration kubectl would use for the context; with bearer not
// empty, that token replaces the user's credential (exec plugin, token, auth provider).
func (u *kubeconfigUser) restConfig(bearer string) (*rest.Config, error) {
	cfg := u.cfg
	if bearer != "" {
		cfg = cfg.DeepCopy()
		auth := cfg.AuthInfos[u.name]
		auth.Exec, auth.AuthProvider, auth.TokenFile = nil, nil, ""
		auth.Token = bearer
	}
	return clientcmd.NewNonInteractiveClientConfig(*cfg, u.context, &clientcmd.ConfigOverrides{}, u.rules).ClientConfig()
}

// loadKubeconfigUser reads the context's user (the current context when context is "") from
// the kubeconfig kubectl would use (--kubeconfig, else $KUBECONFIG, else ~/.kube/config).
func loadKubeconfigUser(path, context string) (*kubeconfigUser, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, err
	}
	if context == "" {
		context = cfg.CurrentContext
	}
	ctx := cfg.Contexts[context]
	if ctx == nil {
		return nil, fmt.Errorf("kubeconfig has no context %q", context)
	}
	auth := cfg.AuthInfos[ctx.AuthInfo]
	if auth == nil {
		return nil, fmt.Errorf("kubeconfig context %q names no user of the kubeconfig (%q)", context, ctx.AuthInfo)
	}
	u := &kubeconfigUser{context: context, name: ctx.AuthInfo, auth: auth, token: auth.Token, cfg: cfg, rules: rules}
	if u.token == "" && auth.TokenFile != "" {
		b, err := os.ReadFile(auth.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig user %q: tokenFile: %w", u.name, err)
		}
		u.token = strings.TrimSpace(string(b))
	}
	return u, nil
}

// isCredentialPlugin reports whether exec runs `octogate credential` for a person's GitHub
// token, as the kubeconfigs of `octogate kubeconfig user` and `octogate login` do (whatever
// the binary is called). With --github-actions it sends a GitHub Actions OIDC token, which
// the doctor leaves to the plugin itself (the cluster's answer).
func isCredentialPlugin(exec *clientcmdapi.ExecConfig) bool {
	if exec == nil || len(exec.Args) == 0 || exec.Args[0] != "credential" {
		return false
	}
	for _, a := range exec.Args {
		if a == "--github-actions" || strings.HasPrefix(a, "--github-actions=") {
			return false
		}
	}
	return true
}

// pluginCacheDir is the token cache `octogate credential` uses when kubectl runs it with
// exec's env: os.UserCacheDir's rule over XDG_CACHE_HOME and HOME, with the env's values where
// it sets them, and "octogate" below; "" (the default of this process) when the env sets
// neither, or for a nil exec.
// https://pkg.go.dev/os#UserCacheDir
func pluginCacheDir(exec *clientcmdapi.ExecConfig) string {
	xdg, hasXDG := execEnv(exec, "XDG_CACHE_HOME")
	home, hasHome := execEnv(exec, "HOME")
	if !hasXDG && !hasHome {
		return ""
	}
	switch runtime.GOOS {
	case "windows", "plan9":
		return ""
	case "darwin", "ios":
		if hasHome && home != "" {
			return filepath.Join(home, "Library", "Caches", "octogate")
		}
		return ""
	}
	if !hasXDG {
		xdg = os.Getenv("XDG_CACHE_HOME")
	}
	if xdg != "" && filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "octogate")
	}
	if !hasHome {
		home = os.Getenv("HOME")
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".cache", "octogate")
}
