// Package credential owns how a person's kubectl gets a GitHub token to present to a cluster
// that runs octogate.
//
// It speaks these client-side APIs:
//   - the kubectl exec credential plugin protocol, client.authentication.k8s.io/v1 (and v1beta1)
//     ExecCredential: the request comes in the KUBERNETES_EXEC_INFO environment variable, the
//     answer goes to stdout, prompts go to stderr
//     (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins);
//   - the GitHub OAuth device flow, RFC 8628 as GitHub serves it at /login/device/code and
//     /login/oauth/access_token
//     (https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#device-flow),
//     through golang.org/x/oauth2;
//   - GitHub's web application flow for a native app (authorization code with PKCE S256 on a
//     127.0.0.1 loopback redirect) and the refresh of GitHub App user access tokens
//     (https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens).
//
// A token is taken from, in order: GITHUB_TOKEN, `gh auth token`, this package's per-user cache
// of an earlier login (refreshed before it expires, rechecked with GET /user when GitHub last
// accepted it long ago), and finally a new login, browser or device flow. Concurrent runs share
// one login through a file lock beside the cache. It also renders the user
// kubeconfig (kubeconfig v1, k8s.io/client-go/tools/clientcmd) whose user runs
// `octogate credential`.
package credential
