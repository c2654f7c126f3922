// Command octogate-demo runs octogate on a laptop: etcd, kube-apiserver and
// kube-controller-manager on loopback wired to octogate, GitHub answered by the stand-in
// (internal/githubapi) with users alice, bob, carol and dave, and demo/kubeconfig with a
// context per user. It prints a short tour and runs until Ctrl-C, then stops everything and
// removes its temporary state.
//
// With OCTOGATE_GITHUB_API_URL and GITHUB_TOKEN set it talks to that GitHub instead, and the
// kubeconfig's "me" context gets a token through `octogate credential`.
//
// Run it from the repository (`make demo`); it builds bin/k8s (tools/build.sh) and octogate
// first when they are missing or stale.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

func main() {
	// A FlagSet of its own: controller-runtime registers -kubeconfig on flag.CommandLine.
	flags := flag.NewFlagSet("octogate-demo", flag.ExitOnError)
	dir := flags.String("dir", "demo", "directory for the kubeconfig, relative to the repository root")
	port := flags.Int("port", 0, "octogate's port on 127.0.0.1 (0 = a free one)")
	keep := flags.Bool("keep", false, "keep the temporary state (logs, certificates) after Ctrl-C")
	octogate := flags.String("octogate", "", "use this octogate binary instead of building ./cmd/octogate")
	_ = flags.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *port, *keep, *octogate); err != nil {
		fmt.Fprintln(os.Stderr, "octogate-demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, port int, keep bool, binary string) error {
	ctrllog.SetLogger(logr.Discard())
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := cluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	binDir := cluster.BinDir(root)

	step("building Kubernetes binaries (tools/build.sh; the first build takes several minutes)")
	build := exec.CommandContext(ctx, "bash", filepath.Join(root, "tools", "build.sh"))
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("tools/build.sh: %w", err)
	}

	work, err := os.MkdirTemp("", "octogate-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if keep {
			fmt.Println("state kept in", work)
			return
		}
		_ = os.RemoveAll(work)
	}()

	if binary == "" {
		step("building octogate")
		if binary, err = cluster.BuildOctogate(ctx, root, work); err != nil {
			return err
		}
	} else if binary, err = filepath.Abs(binary); err != nil {
		return err
	}

	cfg := cluster.Config{
		BinDir:             binDir,
		OctogateBinary:     binary,
		WorkDir:            work,
		Port:               port,
		TokenReviewVersion: "v1",
		AuthnCacheTTL:      10 * time.Second,
		TokenCacheTTL:      10 * time.Second,
		// Self-service namespaces: quotas, names and limits per creator (docs/namespaces.md).
		OctogateEnv: []string{"OCTOGATE_NAMESPACE_TEMPLATES_FILE=" + filepath.Join(root, "examples", "namespace-templates.yaml")},
	}
	var githubURL string // the stand-in's web URL, for the "login" context
	var doctor string    // the tour's `octogate doctor` line (stand-in only)
	var actions *actionsDemo
	apiURL, token := os.Getenv("OCTOGATE_GITHUB_API_URL"), os.Getenv("GITHUB_TOKEN")
	realGitHub := apiURL != "" && token != ""
	var standin *githubapi.Server
	if realGitHub {
		cfg.GitHubAPIURL = apiURL
		cfg.GitHubCAFile = os.Getenv("OCTOGATE_GITHUB_CA_FILE")
		cfg.Orgs = splitList(os.Getenv("OCTOGATE_GITHUB_ORGS"))
		if len(cfg.Orgs) == 0 {
			cfg.Orgs = []string{"*"}
		}
		cfg.Policy = []byte(policyFor(cfg.Orgs))
		step("using GitHub at " + apiURL + " for orgs " + strings.Join(cfg.Orgs, ","))
	} else {
		gh := githubapi.NewTLS()
		defer gh.Close()
		if err := gh.Load(cluster.Fixture()); err != nil {
			return err
		}
		cfg.GitHubAPIURL = gh.URL()
		cfg.GitHubCAFile = filepath.Join(work, "github-ca.crt")
		if err := gh.WriteCAFile(cfg.GitHubCAFile); err != nil {
			return err
		}
		// Pinned to its id: a renamed acme's name, registered by someone else, lets no one in.
		cfg.Orgs = []string{cluster.Org + "=" + strconv.Itoa(cluster.OrgID)}
		cfg.Policy = []byte(cluster.ExamplePolicy)
		// A GitHub App with expiring tokens for the "login" context; the stand-in approves
		// its device codes as alice after a few polls, as a person would.
		gh.SetDeviceFlow(githubapi.DeviceFlow{ClientID: demoClientID, ApproveAs: "alice", PendingPolls: 3, GitHubApp: true})
		githubURL = strings.TrimSuffix(gh.URL(), "/")
		doctor = fmt.Sprintf("GITHUB_TOKEN=%s %s doctor --github-url %s --github-ca-file %s --github-orgs %s",
			cluster.CarolToken, binary, strings.TrimSuffix(gh.URL(), "/"), cfg.GitHubCAFile, cfg.Orgs[0])
		cfg.OctogateEnv = append(cfg.OctogateEnv, revocationEnv...)
		standin = gh
		step("GitHub stand-in at " + gh.URL() + " (alice, bob, carol, dave)")
		actions = newActionsDemo(cfg.GitHubCAFile)
		defer actions.issuer.Close()
		cfg.OctogateEnv = append(cfg.OctogateEnv, actions.octogateEnv()...)
		step("GitHub Actions OIDC issuer stand-in at " + actions.issuer.URL())
	}

	step("starting etcd, kube-apiserver, kube-controller-manager and octogate")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	c, err := cluster.Start(startCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		step("stopping")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "octogate-demo: stop:", err)
		}
	}()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	var users []cluster.KubeconfigUser
	if realGitHub {
		users = []cluster.KubeconfigUser{{Name: "me", Exec: &clientcmdapi.ExecConfig{
			APIVersion:      "client.authentication.k8s.io/v1",
			Command:         binary,
			Args:            []string{"credential"},
			InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
		}}}
	} else {
		users = []cluster.KubeconfigUser{
			{Name: "alice", Token: cluster.AliceToken},
			{Name: "bob", Token: cluster.BobToken},
			{Name: "carol", Token: cluster.CarolToken},
			{Name: "dave", Token: cluster.DaveToken},
			loginUser(binary, githubURL, cfg.GitHubCAFile, work),
		}
	}
	if err := c.APIServer.WriteKubeconfig(kubeconfig, "demo-admin", users); err != nil {
		return err
	}
	defer func() {
		os.Remove(kubeconfig)
		os.Remove(dir) // only when empty: a -dir the user keeps other files in stays
	}()

	if actions != nil {
		actionsKubeconfig := filepath.Join(dir, "actions.kubeconfig")
		if err := actions.writeKubeconfig(ctx, binary, c.APIServer.URL, c.APIServer.CAFile, actionsKubeconfig); err != nil {
			return err
		}
		defer os.Remove(actionsKubeconfig)
	}

	// binDir (bin/k8s or OCTOGATE_K8S_BIN) has kubectl; bin has octogate, for `octogate
	// namespaces`, `octogate doctor` and the kubeconfigs' exec credential.
	path := binDir + ":" + filepath.Join(root, "bin")
	printTour(kubeconfig, path, work, realGitHub, doctor)
	if !realGitHub {
		printHardeningTour(binary, work)
	}
	if actions != nil {
		actions.printTour(path)
	}
	if standin != nil {
		fmt.Print(demoRevocationTour(standin, c.Octogate.URL(), filepath.Join(c.CertsDir, "ca.crt"), cfg.GitHubCAFile))
	}
	printRateLimitTour(c.Octogate.Addr, filepath.Join(c.CertsDir, "ca.crt"))
	printCertsTour(binary, c.CertsDir, c.Octogate.URL())
	select {
	case <-ctx.Done():
		fmt.Println()
		return nil
	case <-c.ControllerManager.Done():
		return errors.New("kube-controller-manager exited; see " + c.ControllerManager.LogPath)
	}
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

// demoClientID is the stand-in GitHub App the "login" context logs in with.
const demoClientID = "Iv23.octogate-demo"

// loginUser is the kubeconfig user of the "login" context: `octogate credential` against the
// stand-in's GitHub App, with a token cache in the demo's work directory (removed on exit) and
// no GITHUB_TOKEN from the caller's shell.
func loginUser(binary, githubURL, caFile, work string) cluster.KubeconfigUser {
	return cluster.KubeconfigUser{Name: "login", Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         binary,
		Args:            []string{"credential", "--client-id", demoClientID, "--github-url", githubURL, "--github-ca-file", caFile, "--device"},
		Env:             []clientcmdapi.ExecEnvVar{{Name: "XDG_CACHE_HOME", Value: filepath.Join(work, "login-cache")}, {Name: "GITHUB_TOKEN", Value: ""}},
		InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
	}}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// policyFor is the demo policy for real GitHub orgs: members of the orgs (any GitHub user for
// "*") may create namespaces; no GitHub user may touch the system namespaces.
func policyFor(orgs []string) string {
	var subjects []string
	for _, o := range orgs {
		if o == "*" {
			subjects = append(subjects, `  - {kind: User, name: "github:*"}`)
			continue
		}
		subjects = append(subjects, fmt.Sprintf(`  - {kind: Group, name: "github:%s"}`, strings.ToLower(o)))
	}
	return `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-one-else-in-system-namespaces
  effect: Deny
  subjects: [{kind: User, name: "github:*"}]
  namespaces: ["kube-system", "kube-public", "octogate-system"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
- name: members-create-namespaces
  effect: Allow
  subjects:
` + strings.Join(subjects, "\n") + `
  resourceRules: [{verbs: [create], apiGroups: [""], resources: [namespaces]}]
`
}

// printHardeningTour shows what octogate refuses: the policy CLI deciding as kube-apiserver
// does for a Namespace object, and an oversized token refused before any GitHub call.
func printHardeningTour(octogate, work string) {
	fmt.Printf(`
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

func printTour(kubeconfig, bin, work string, realGitHub bool, doctor string) {
	fmt.Printf(`
octogate is running. In another shell:

  export KUBECONFIG=%s PATH=%s:$PATH
`, kubeconfig, bin)
	if realGitHub {
		fmt.Print(`
  kubectl --context me auth whoami                # your GitHub login, id and org/team groups
  kubectl --context me create namespace my-dev    # allowed for members of the configured orgs
  kubectl get namespace my-dev -o yaml            # octogate.dev/creator annotations (admin context)
  kubectl -n my-dev get rolebinding octogate-owner
  kubectl --context me -n kube-system get pods    # Forbidden by rule no-one-else-in-system-namespaces
`)
	} else {
		fmt.Print(`
  kubectl --context alice auth whoami             # github:alice:1001 (login:id), groups github:acme and github:acme/platform-admins
  kubectl --context bob create namespace bob-dev  # allowed by policy rule members-create-namespaces
  kubectl get namespace bob-dev -o jsonpath='{.metadata.annotations}{"\n"}'   # creator github:bob:1002
  kubectl -n bob-dev get rolebinding octogate-owner -o wide                   # bob is admin of bob-dev
  kubectl --context bob -n bob-dev create configmap hello --from-literal=greeting=hi
  kubectl --context bob -n kube-system get pods   # Forbidden: octogate: rule no-one-else-in-system-namespaces
  kubectl --context bob auth can-i create configmaps -n kube-public   # no
  kubectl --context alice annotate namespace bob-dev octogate.dev/creator=github:alice:1001 --overwrite
                                                  # denied by the validating webhook, even for a platform admin
  kubectl --context carol get namespaces          # error: You must be logged in (carol is not in acme)
  kubectl --context dave get namespaces           # same: dave's invitation to acme is still pending

  kubectl --context login auth whoami             # octogate credential: a device code (the stand-in approves it as
                                                  # alice after ~3 s); the 8-hour GitHub App token is cached and refreshed
  for i in 1 2 3 4 5; do kubectl --context login get ns >/dev/null & done; wait   # no prompt: the cache serves all
  # On a laptop with a browser, real GitHub: octogate credential --browser (see docs/login.md)

  # Self-service namespaces (examples/namespace-templates.yaml, docs/namespaces.md)
  kubectl --context bob create namespace web      # denied: allowed names for you: bob-*, web-*
  kubectl -n bob-dev get resourcequota,limitrange,networkpolicy   # from template "members"
  kubectl --context bob get namespaces -l octogate.dev/creator-uid=1002   # bob lists his own
  octogate namespaces --context bob               # the same, uid found with SelfSubjectReview
  kubectl --context bob get namespaces            # Forbidden without the selector
  kubectl --context bob create namespace bob-2 && kubectl --context bob create namespace bob-3
  kubectl --context bob create namespace bob-4    # denied: github:bob:1002 owns 3 of the 3 namespaces ...
  kubectl --context bob delete namespace bob-3    # owners may delete their own namespaces
  kubectl --context bob annotate namespace bob-2 octogate.dev/owner-teams=acme/web   # team web co-owns it
  kubectl --context bob get namespaces -l octogate.dev/owner-team.acme.web           # listed by the team's label
  kubectl --context bob label namespace bob-dev istio-injection=enabled   # allowed: template "members" lists label istio-injection
  kubectl --context bob label namespace bob-2 pod-security.kubernetes.io/enforce=privileged   # denied: owners change only owner-teams and istio-injection
`)
		fmt.Printf("  %s\n                                                  # why carol is refused: [not_member], what it means, what to do\n", doctor)
	}
	fmt.Printf(`
The current context is the cluster admin (system:masters, never sent to octogate).
Logs: %s/{octogate,kube-apiserver,kube-controller-manager}.log
Ctrl-C stops everything and removes this state.
`, work)
}

// printRateLimitTour shows the conditional requests that spare the users' GitHub rate limit
// (docs/performance.md, "GitHub rate limit").
func printRateLimitTour(addr, caFile string) {
	fmt.Printf(`
After a minute or two of kubectl calls, octogate revalidates identities with conditional
requests; GitHub's 304 answers cost the user no rate limit:

  curl -s --cacert %s https://%s/metrics | grep octogate_github_requests_total   # code="304"
`, caFile, addr)
}

// printCertsTour shows certificate renewal (docs/install.md, "Certificates").
func printCertsTour(binary, certsDir, octogateURL string) {
	fmt.Printf(`
Certificates (docs/install.md):

  %[1]s certs renew --dir %[2]s            # nothing is due yet
  %[1]s certs renew --dir %[2]s --force    # a new serving certificate; octogate serves it within seconds
  curl -s --cacert %[2]s/ca.crt %[3]s/metrics | grep octogate_certificate_expiry
`, binary, certsDir, octogateURL)
}
