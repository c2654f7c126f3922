// Package tour is the text octogate-demo prints once its cluster runs: the commands to try,
// with the demo's paths, URLs and secrets filled in. README.md's tour is a part of it, line for
// line (test/docs checks that every command line README.md's tour shows is one the demo
// prints), so the front page cannot show a command the demo's environment does not carry.
package tour

import (
	"fmt"
	"strings"
)

// Start is the tour's opening: the shell line that points kubectl at the demo. kubeconfig is
// the demo's kubeconfig (a context per user, the admin context current); path holds kubectl
// and octogate, colon-separated.
func Start(kubeconfig, path string) string {
	return fmt.Sprintf(`
octogate is running. In another shell:

  export KUBECONFIG=%s PATH=%s:$PATH
`, kubeconfig, path)
}

// RealGitHub is the tour against a real GitHub: one "me" context logging in with
// `octogate credential`.
func RealGitHub() string {
	return `
  kubectl --context me auth whoami                # your GitHub login, id and org/team groups
  kubectl --context me create namespace my-dev    # allowed for members of the configured orgs
  kubectl get namespace my-dev -o yaml            # octogate.dev/creator annotations (admin context)
  kubectl -n my-dev get rolebinding octogate-owner
  kubectl --context me -n kube-system get pods    # Forbidden by rule no-one-else-in-system-namespaces
`
}

// Standin is the tour against the GitHub stand-in: contexts alice, bob, carol, dave (fixed
// tokens; carol's and dave's through `octogate credential` with GITHUB_TOKEN in the exec env,
// so `octogate doctor --context carol` checks what kubectl sends), session (alice's token
// exchanged for a session for cluster demo) and login (device flow).
func Standin() string {
	return `
  kubectl --context alice auth whoami             # github:alice:1001, groups github:acme, github:acme/platform-admins
  kubectl --context bob create namespace bob-dev  # allowed; bob becomes its admin, the template's quota applies
  kubectl get namespace bob-dev -o jsonpath='{.metadata.annotations}{"\n"}'   # creator github:bob:1002
  kubectl -n bob-dev get rolebinding octogate-owner -o wide                   # bob is admin of bob-dev
  kubectl --context bob -n bob-dev create configmap hello --from-literal=greeting=hi
  kubectl --context bob -n kube-system get pods   # Forbidden: octogate: rule no-one-else-in-system-namespaces
  kubectl --context bob auth can-i create configmaps -n kube-public   # no
  kubectl --context alice annotate namespace bob-dev octogate.dev/creator=github:alice:1001 --overwrite
                                                  # denied by the validating webhook, even for a platform admin
  kubectl --context carol get namespaces          # You must be logged in: carol is not in acme
  octogate doctor --context carol                 # carol's token (her kubeconfig user's): [not_member], what it means, what to do
  kubectl --context dave get namespaces           # same: dave's invitation to acme is still pending

  kubectl --context session auth whoami           # the same user, through a 5-minute session for cluster demo; kubectl never sees the GitHub token
  octogate doctor --context session               # the exchange at the issuer, explained: accepted, a session for demo, alice's groups
  for c in $(kubectl config get-contexts -o name); do octogate doctor --context $c; done   # every context: who it makes you, or why not

  kubectl --context login auth whoami             # device flow once; the GitHub App token is cached and refreshed
                                                  # (the stand-in approves the code as alice after ~3 s; 8-hour token)
  for i in 1 2 3 4 5; do kubectl --context login get ns >/dev/null & done; wait   # no prompt: the cache serves all
  # On a laptop with a browser, real GitHub: octogate credential --browser (see docs/login.md)

  # Self-service namespaces (examples/namespace-templates.yaml, docs/namespaces.md)
  kubectl --context bob create namespace web      # denied: allowed names for you: bob-*, web-*
  kubectl -n bob-dev get resourcequota,limitrange,networkpolicy   # from template "members"
  kubectl --context bob get namespaces -l octogate.dev/creator-uid=1002   # bob lists his own namespaces
  octogate namespaces --context bob               # the same, uid found with SelfSubjectReview
  kubectl --context bob get namespaces            # Forbidden without the selector
  kubectl --context bob create namespace bob-2 && kubectl --context bob create namespace bob-3
  kubectl --context bob create namespace bob-4    # denied: github:bob:1002 owns 3 of the 3 namespaces ...
  kubectl --context bob delete namespace bob-3    # owners may delete their own namespaces
  kubectl --context bob annotate namespace bob-2 octogate.dev/owner-teams=acme/web   # team web co-owns it
  kubectl --context bob get namespaces -l octogate.dev/owner-team.acme.web           # listed by the team's label
  kubectl --context bob label namespace bob-dev istio-injection=enabled   # allowed: template "members" lists label istio-injection
  kubectl --context bob label namespace bob-2 pod-security.kubernetes.io/enforce=privileged   # denied: owners change only owner-teams and istio-injection
`
}

// End says which context is current, where the logs are (work) and how to stop.
func End(work string) string {
	return fmt.Sprintf(`
The current context is the cluster admin (system:masters, never sent to octogate).
Logs: %s/{octogate,kube-apiserver,kube-controller-manager}.log
Ctrl-C stops everything and removes this state.
`, work)
}

// Hardening shows what octogate refuses: the policy CLI deciding as kube-apiserver does for a
// Namespace object, and an oversized token refused before any GitHub call. octogate is the
// binary, work the demo's state directory (policy.yaml).
func Hardening(octogate, work string) string {
	return fmt.Sprintf(`
What octogate refuses (docs/configuration.md):

  kubectl --context bob get namespace kube-system # Forbidden: a Namespace object's namespace is its own name
  %[1]s policy check --file %[2]s/policy.yaml --user github:bob:1002 --group github:acme \
      --verb get --resource namespaces --name kube-system   # Deny, the same rule kube-apiserver applied
  kubectl --context carol --token "ghp_$(head -c 100000 /dev/zero | tr '\0' A)" get namespaces
                                                  # Unauthorized; octogate.log: /authenticate 413, no GitHub call
  OCTOGATE_GITHUB_ORGS=acme=2001 OCTOGATE_USERNAME_PREFIX=system: %[1]s serve
                                                  # refused at start: system: is reserved by Kubernetes
`, octogate, work)
}

// Actions is a simulated GitHub Actions job: the environment GitHub gives a job with
// "permissions: id-token: write", and the kubeconfigs it and the admin use.
type Actions struct {
	// CAFile trusts the stand-in issuer (SSL_CERT_FILE of the job).
	CAFile string
	// RequestURL and RequestToken are ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN.
	RequestURL, RequestToken string
	// Kubeconfig is the job's (`octogate kubeconfig user --github-actions`); AdminKubeconfig
	// is the demo's, whose context admin creates namespace prod.
	Kubeconfig, AdminKubeconfig string
	// Path holds kubectl and octogate.
	Path string
}

// ActionsDeploy is the tour of a GitHub Actions deploy (docs/github-actions.md): the cluster
// admin creates namespace prod, then the job deploys into it and only into it.
func ActionsDeploy(a Actions) string {
	return fmt.Sprintf(`
A GitHub Actions deploy (docs/github-actions.md): a job of acme/deploy in environment
production, with the environment GitHub gives a job with "permissions: id-token: write".
In a third shell:

  export PATH=%[6]s:$PATH
  kubectl --kubeconfig %[5]s --context admin create namespace prod   # the cluster admin, once
  export GITHUB_ACTIONS=true SSL_CERT_FILE=%[1]s
  export ACTIONS_ID_TOKEN_REQUEST_URL='%[2]s'
  export ACTIONS_ID_TOKEN_REQUEST_TOKEN=%[3]s
  export KUBECONFIG=%[4]s
  kubectl auth whoami      # github-actions:repo:acme/deploy:environment:production, actor alice
  kubectl -n prod create configmap release --from-literal=version=1.2.3
                           # allowed by policy rule deploy-production-to-prod
  kubectl -n default get configmaps   # Forbidden: the rule covers namespace prod only
`, a.CAFile, a.RequestURL, a.RequestToken, a.Kubeconfig, a.AdminKubeconfig, a.Path)
}

// Revocation is the revocation part of the tour (docs/revocation.md).
type Revocation struct {
	// GitHubCA, GitHubURL (ending in /) and AdminToken: alice's call to the stand-in's REST
	// API that removes bob from Org.
	GitHubCA, GitHubURL, AdminToken, Org string
	// Delivery is the shell command that sends GitHub's signed member_removed for bob.
	Delivery string
	// WebhookURL is octogate's /github/webhook, OctogateCA the CA of its serving certificate.
	WebhookURL, OctogateCA string
	// Secret is the org webhook's secret (OCTOGATE_GITHUB_WEBHOOK_SECRET).
	Secret string
	// OwnLogin and OwnID are the member a delivery of one's own removes; OrgID is Org's id.
	OwnLogin     string
	OwnID, OrgID int64
	// OrphanedGroup owns bob's namespaces once he is removed (OCTOGATE_ORPHAN_OWNER_GROUP).
	OrphanedGroup string
}

// RevocationTour is alice (an acme owner) removing bob from acme at the GitHub stand-in
// through GitHub's REST API, then the signed organization member_removed GitHub would send,
// then how to sign and send a delivery of one's own with the webhook's secret.
//
// A delivery is signed as GitHub signs them: X-Hub-Signature-256 is "sha256=" and the hex
// HMAC-SHA256 of the body keyed with the secret, X-GitHub-Event names the event and
// X-GitHub-Delivery is a GUID
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
func RevocationTour(r Revocation) string {
	return fmt.Sprintf(`
  # Revocation pushed by GitHub (docs/revocation.md), in the first shell (KUBECONFIG of the
  # tour's first export line, with the bob context): bob is a member...
  kubectl --context bob auth whoami               # github:bob:1002
  # ...alice removes him from acme...
  curl -sS --cacert %[1]s -X DELETE -H 'Authorization: Bearer %[2]s' %[3]sorgs/%[4]s/members/bob
  # ...and GitHub's signed organization member_removed webhook reaches octogate:
  %[5]s
  sleep 10                                        # the first whoami left bob's TokenReview in kube-apiserver's 10 s cache (--authentication-token-webhook-cache-ttl)
  kubectl --context bob auth whoami               # error: You must be logged in: octogate evicted bob at once
  kubectl get namespace bob-dev -o jsonpath='{.metadata.annotations}{"\n"}'   # octogate.dev/orphaned-at, orphaned-reason
  kubectl -n bob-dev get rolebinding octogate-owner -o wide                   # now group %[6]s; bob's ConfigMap is still there
  kubectl annotate namespace bob-dev octogate.dev/orphaned-at- octogate.dev/orphaned-reason-   # an admin gives bob-dev back to bob
%[7]s`, r.GitHubCA, r.AdminToken, r.GitHubURL, r.Org, r.Delivery, r.OrphanedGroup, OwnDelivery(r))
}

// OwnDelivery is the shell lines that sign a member_removed delivery of one's own with
// openssl and send it with curl: edit body, keep the rest.
func OwnDelivery(r Revocation) string {
	body := fmt.Sprintf(`{"action":"member_removed","organization":{"login":"%s","id":%d},"membership":{"state":"active","role":"member","user":{"login":"%s","id":%d,"type":"User"}}}`,
		r.Org, r.OrgID, r.OwnLogin, r.OwnID)
	return fmt.Sprintf(`
  # The org webhook's secret is %[1]s (OCTOGATE_GITHUB_WEBHOOK_SECRET). Sign a delivery of your
  # own as GitHub does (X-Hub-Signature-256: sha256=HMAC-SHA256 of the body) and send it:
  secret=%[1]s
  body='%[2]s'
  sig=$(printf '%%s' "$body" | openssl dgst -sha256 -hmac "$secret" | sed 's/^.*= //')
  guid=$(openssl rand -hex 16 | sed 's/^\(.\{8\}\)\(.\{4\}\)\(.\{4\}\)\(.\{4\}\)/\1-\2-\3-\4-/')
  curl -sS --cacert %[3]s -X POST %[4]s -H 'Content-Type: application/json' -H 'X-GitHub-Event: organization' -H "X-GitHub-Delivery: $guid" -H "X-Hub-Signature-256: sha256=$sig" --data-binary "$body"
                                                  # {"result":"evicted",...}: whatever octogate had cached for %[5]s is gone
`, shellQuote(r.Secret), strings.ReplaceAll(body, "'", `'\''`), r.OctogateCA, r.WebhookURL, r.OwnLogin)
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,/:=@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Sessions shows that /authenticate verified sessions (docs/sessions.md): the credentials
// metric by kind. addr is octogate's host:port, caFile its CA.
func Sessions(addr, caFile string) string {
	return fmt.Sprintf(`
Sessions (docs/sessions.md): the demo's octogate is issuer and verifier for cluster demo; the
session context's kubectl sends a session, never alice's GitHub token:

  curl -s --cacert %s https://%s/metrics | grep octogate_token_review_credentials_total   # kind="session"
`, caFile, addr)
}

// Proxy is the tour of the impersonating proxy (docs/managed-clusters.md): contexts
// proxy-alice and proxy-bob talk to octogate's proxy in front of the demo's second cluster, set
// up as a managed one whose kube-apiserver flags cannot be set (RBAC only, no octogate
// webhook, the proxy's RBAC on), and proxy-admin is that cluster's admin.
func Proxy() string {
	return `
The impersonating proxy (docs/managed-clusters.md), in the first shell: contexts proxy-alice and
proxy-bob talk to octogate's proxy in front of a second cluster set up as a managed one (EKS,
GKE, AKS): its kube-apiserver has RBAC only, no octogate authentication or authorization
webhook (the namespace admission webhooks are API objects there). The proxy authenticates and
decides as the webhooks do, then forwards as its ServiceAccount with Impersonate-User, and with
the group octogate:rule:NAME when rule NAME allowed; octogate's controller binds that group to
what the rule allows (OCTOGATE_PROXY_RBAC). proxy-admin is that cluster's admin.

  kubectl --context proxy-bob auth whoami         # github:bob:1002, groups github:acme, github:acme/web
  kubectl --context proxy-bob -n kube-system get pods   # Forbidden at the proxy: octogate: rule no-one-else-in-system-namespaces
  kubectl --context proxy-bob auth can-i create namespaces   # yes: rule members-create-namespaces, answered by the proxy
  kubectl --context proxy-bob get pods --as=github:alice:1001   # Forbidden: the proxy does not forward kubectl --as
  kubectl --context proxy-alice get namespaces    # allowed by RBAC: the proxy added group octogate:rule:platform-admins-everything
  kubectl --context proxy-admin get clusterrolebindings,rolebindings -A -l octogate.dev/proxy-rbac=true   # each Allow rule's group bound to its ClusterRole (a rule with namespaces: in those)
  kubectl --context proxy-admin get namespaces    # the managed-like cluster's own: bob-dev of the first shell is not here
`
}

// FleetTour is the fleet part of the tour (docs/sessions.md, "Fleet").
type FleetTour struct {
	// Issuer is the session issuer's URL, CAFile the CA of its certificate.
	Issuer, CAFile string
	// AliceToken and BobToken are their GitHub tokens: alice may use every cluster, bob not
	// the one limited to acme/platform-admins.
	AliceToken, BobToken string
	// Kubeconfig is the file `octogate login` writes; Cache the plugin's token cache
	// (XDG_CACHE_HOME) for the sessions of its contexts.
	Kubeconfig, Cache string
}

// Fleet shows one login for every cluster of the issuer: the cluster table of `octogate
// clusters`, `octogate login` writing a context per cluster, kubectl through one of them, and
// `octogate logout` of that cluster.
// Each command carries its GitHub token (and the session cache) in its environment, so that
// it runs as written in any shell with the tour's PATH.
func Fleet(f FleetTour) string {
	return fmt.Sprintf(`
Fleet (docs/sessions.md, "Fleet"): the demo's octogate is the session issuer of two clusters,
demo (this one, its octogate verifies sessions) and managed (the managed-like one: its proxy
verifies the same issuer's sessions), managed for acme/platform-admins only:

  GITHUB_TOKEN=%[3]s octogate clusters --issuer %[1]s --session-ca-file %[2]s
                                                  # demo and managed: accepts, server and labels
  GITHUB_TOKEN=%[4]s octogate clusters --issuer %[1]s --session-ca-file %[2]s
                                                  # bob: demo only
  GITHUB_TOKEN=%[3]s octogate login --issuer %[1]s --session-ca-file %[2]s --kubeconfig %[5]s
                                                  # one GitHub login, a context per cluster: demo, managed
  kubectl --kubeconfig %[5]s config get-contexts
  GITHUB_TOKEN=%[3]s XDG_CACHE_HOME=%[6]s kubectl --kubeconfig %[5]s --context managed auth whoami
                                                  # alice at the managed-like cluster, through a session for managed
  GITHUB_TOKEN=%[3]s XDG_CACHE_HOME=%[6]s octogate logout --issuer %[1]s --session-ca-file %[2]s --cluster managed
                                                  # the issuer revokes alice's managed sessions (the proxy hears it within 2 s) and the local one goes
`, f.Issuer, f.CAFile, f.AliceToken, f.BobToken, f.Kubeconfig, f.Cache)
}

// RateLimit shows the conditional requests that spare the users' GitHub rate limit
// (docs/performance.md, "GitHub rate limit"). addr is octogate's host:port, caFile its CA.
func RateLimit(addr, caFile string) string {
	return fmt.Sprintf(`
After a minute or two of kubectl calls, octogate revalidates identities with conditional
requests; GitHub's 304 answers cost the user no rate limit:

  curl -s --cacert %s https://%s/metrics | grep octogate_github_requests_total   # code="304"
`, caFile, addr)
}

// Certs shows certificate renewal (docs/install.md, "Certificates").
func Certs(octogate, certsDir, octogateURL string) string {
	return fmt.Sprintf(`
Certificates (docs/install.md):

  %[1]s certs renew --dir %[2]s            # nothing is due yet
  %[1]s certs renew --dir %[2]s --force    # a new serving certificate; octogate serves it within seconds
  curl -s --cacert %[2]s/ca.crt %[3]s/metrics | grep octogate_certificate_expiry
`, octogate, certsDir, octogateURL)
}

// Elevation is the elevation part of the tour (docs/elevation.md): one request of the demo
// policy's elevation payments-debug from ask to end. bob is refused with the hint, asks with a
// reason, may not approve it himself; alice (acme/platform-admins) approves, bob reads the
// Secret, alice revokes, bob is refused again. The request's name is kept in the shell
// variable req, so the lines run in one shell, in order. Each wait covers octogate's informer
// and kube-apiserver's authorization cache of the demo (1 s).
func Elevation() string {
	return `
Elevation on request (docs/elevation.md), in the first shell: elevation payments-debug of the
demo's policy lets an acme member read namespace payments' Secrets for up to an hour, with a
reason, once someone in acme/platform-admins approves. Nobody holds it standing:

  kubectl --context bob -n payments get secret db # Forbidden: octogate: no rule allows this; elevation payments-debug would: octogate request payments-debug --reason ...
  req=$(octogate request payments-debug --reason "INC-123 payments failing" --for 10m --namespace payments --context bob); echo $req
  octogate requests --context bob                 # NAME, ELEVATION, REQUESTER github:bob:1002, PHASE Pending
  octogate approve $req --context bob             # refused: github:bob:1002 requested it and may not approve it
  octogate approve $req --reason "ok for INC-123" --context alice   # Active for 10 minutes: alice is in acme/platform-admins
  sleep 2; kubectl --context bob -n payments get secret db          # allowed: octogate: elevation payments-debug
  octogate revoke $req --reason "INC-123 fixed" --context alice     # Revoked: it ends now, not in 10 minutes
  sleep 2; kubectl --context bob -n payments get secret db          # Forbidden again
  octogate requests --context alice               # PHASE Revoked
`
}
