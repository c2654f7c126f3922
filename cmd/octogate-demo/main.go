// Command octogate-demo runs octogate on a laptop: etcd, kube-apiserver and
// kube-controller-manager on loopback wired to octogate, GitHub answered by the stand-in
// (internal/githubapi) with users alice, bob, carol and dave, and demo/kubeconfig with a
// context per user. Beside it runs a second cluster set up like a managed one (RBAC only, no
// octogate webhook) behind octogate's impersonating proxy, for the contexts proxy-alice,
// proxy-bob and proxy-admin. It prints a short tour and runs until Ctrl-C, then stops
// everything and removes its temporary state.
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
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/tour"
)

func main() {
	// A FlagSet of its own: controller-runtime registers -kubeconfig on flag.CommandLine.
	flags := flag.NewFlagSet("octogate-demo", flag.ExitOnError)
	dir := flags.String("dir", "demo", "directory for the kubeconfig, relative to the repository root")
	port := flags.Int("port", 0, "octogate's port on 127.0.0.1 (0 = a free one)")
	keep := flags.Bool("keep", false, "keep the temporary state (logs, certificates) after Ctrl-C")
	octogate := flags.String("octogate", "", "use this octogate binary instead of building ./cmd/octogate")
	_ = flags.Parse(os.Args[1:])

	// SIGHUP too: a closed terminal stops the demo and what it started. SIGPIPE is ignored so
	// that a reader of its output that went away (make demo | tee, Ctrl-C) turns writes into
	// errors instead of killing the demo before it stops its clusters.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, *dir, *port, *keep, *octogate, nil); err != nil {
		fmt.Fprintln(os.Stderr, "octogate-demo:", err)
		os.Exit(1)
	}
}

// demoReady is what the demo runs with once its tour is printed: its kubeconfig, the octogate
// binary its kubeconfigs run, PATH (kubectl and octogate, colon-separated), and the inputs of
// the fleet and GitHub Actions tours (with the stand-ins only).
type demoReady struct {
	kubeconfig, binary, path string
	fleet                    *tour.FleetTour
	actions                  *tour.Actions
}

// run runs the demo until ctx is done; ready, when not nil, is called once everything runs and
// the tour is printed.
func run(ctx context.Context, dir string, port int, keep bool, binary string, ready func(demoReady)) error {
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
	// The port is chosen here: the session issuer's URL is octogate's own address.
	if cfg.Port == 0 {
		if cfg.Port, err = cluster.FreePort(); err != nil {
			return err
		}
	}
	issuer := sessionIssuer(cfg.Port)
	octogateCA := filepath.Join(work, "certs", "ca.crt") // written by cluster.Start before octogate starts
	var githubURL string                                 // the stand-in's web URL, for the "login", "carol" and "dave" contexts
	var clustersFile string                              // the issuer's OCTOGATE_SESSION_CLUSTERS_FILE, with the stand-in
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
		cfg.Policy = []byte(demoPolicy)
		// The elevation tour's AccessRequests, watched by octogate from its start.
		cfg.AccessRequestCRD = filepath.Join(root, cluster.AccessRequestCRD)
		// A GitHub App with expiring tokens for the "login" context; the stand-in approves
		// its device codes as alice after a few polls, as a person would.
		gh.SetDeviceFlow(githubapi.DeviceFlow{ClientID: demoClientID, ApproveAs: "alice", PendingPolls: 3, GitHubApp: true})
		githubURL = strings.TrimSuffix(gh.URL(), "/")
		cfg.OctogateEnv = append(cfg.OctogateEnv, revocationEnv...)
		standin = gh
		cfg.OctogateEnv = append(cfg.OctogateEnv, sessionEnv(issuer, octogateCA)...)
		// The issuer's clusters: this one and the managed-like one, whose addresses are
		// written in once both run.
		clustersFile = filepath.Join(work, "fleet", "clusters.yaml")
		if err := os.MkdirAll(filepath.Dir(clustersFile), 0o700); err != nil {
			return err
		}
		if err := writeFleetClusters(clustersFile, unknownServer, unknownServer); err != nil {
			return err
		}
		cfg.OctogateEnv = append(cfg.OctogateEnv, "OCTOGATE_SESSION_CLUSTERS_FILE="+clustersFile)
		step("GitHub stand-in at " + gh.URL() + " (alice, bob, carol, dave)")
		actions = newActionsDemo(cfg.GitHubCAFile)
		defer actions.issuer.Close()
		cfg.OctogateEnv = append(cfg.OctogateEnv, actions.octogateEnv()...)
		step("GitHub Actions OIDC issuer stand-in at " + actions.issuer.URL())
	}

	step("starting etcd, kube-apiserver, kube-controller-manager and octogate")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	// With the stand-in, a second cluster set up like a managed one comes up beside the first
	// (at once: each waits on its own processes) for the proxy-* contexts.
	managedDone := make(chan struct{})
	var managed *cluster.Managed
	var managedErr error
	if standin != nil {
		step("starting a second, managed-like cluster (RBAC only, no octogate authentication or authorization webhook) behind octogate's proxy")
		go func() {
			defer close(managedDone)
			// Its octogate verifies the issuer's sessions with the issuer's CA, which
			// cluster.Start writes first thing.
			if managedErr = waitCA(startCtx, octogateCA); managedErr != nil {
				return
			}
			managed, managedErr = startManaged(startCtx, cfg, filepath.Join(work, "managed"), managedVerifierEnv(issuer, octogateCA))
		}()
	} else {
		close(managedDone)
	}
	c, err := cluster.Start(startCtx, cfg)
	<-managedDone
	cancel()
	defer func() {
		step("stopping")
		for _, stop := range []func() error{managed.Stop, c.Stop} {
			if err := stop(); err != nil {
				fmt.Fprintln(os.Stderr, "octogate-demo: stop:", err)
			}
		}
	}()
	if err != nil {
		return err
	}
	if managedErr != nil {
		return fmt.Errorf("the managed-like cluster: %w", managedErr)
	}
	// With the stand-in, the elevation tour's namespace, while the fleet settles.
	elevationDone := make(chan error, 1)
	if standin != nil {
		go func() { elevationDone <- prepareElevation(ctx, c.APIServer.Admin) }()
	} else {
		elevationDone <- nil
	}
	if managed != nil {
		if err := writeFleetClusters(clustersFile, fleetServer{c.APIServer.URL, c.APIServer.CAFile},
			fleetServer{managed.ProxyURL, filepath.Join(managed.CertsDir, "ca.crt")}); err != nil {
			return err
		}
		if err := waitFleet(ctx, issuer, octogateCA, managed.ProxyURL); err != nil {
			return err
		}
	}
	if err := <-elevationDone; err != nil {
		return fmt.Errorf("the elevation tour's AccessRequests: %w", err)
	}

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
			tokenUser("carol", cluster.CarolToken, binary, githubURL, cfg.GitHubCAFile, cfg.Orgs[0]),
			tokenUser("dave", cluster.DaveToken, binary, githubURL, cfg.GitHubCAFile, cfg.Orgs[0]),
			loginUser(binary, githubURL, cfg.GitHubCAFile, work),
			sessionUser(binary, issuer, octogateCA, work),
		}
	}
	if err := c.APIServer.WriteKubeconfig(kubeconfig, "demo-admin", users); err != nil {
		return err
	}
	if managed != nil {
		if err := addProxyContexts(kubeconfig, managed); err != nil {
			return err
		}
	}
	defer func() {
		_ = os.Remove(kubeconfig)
		_ = os.Remove(dir) // only when empty: a -dir the user keeps other files in stays
	}()

	if actions != nil {
		actionsKubeconfig := filepath.Join(dir, "actions.kubeconfig")
		if err := actions.writeKubeconfig(ctx, binary, c.APIServer.URL, c.APIServer.CAFile, actionsKubeconfig); err != nil {
			return err
		}
		defer func() { _ = os.Remove(actionsKubeconfig) }()
	}

	// binDir (bin/k8s or OCTOGATE_K8S_BIN) has kubectl; the binary's directory (bin, with
	// make demo) has octogate, for `octogate namespaces`, `octogate doctor` and the
	// kubeconfigs' exec credential.
	path := binDir + ":" + filepath.Dir(binary)
	fmt.Print(tour.Start(kubeconfig, path))
	if realGitHub {
		fmt.Print(tour.RealGitHub())
	} else {
		fmt.Print(tour.Standin())
	}
	fmt.Print(tour.End(work))
	if !realGitHub {
		fmt.Print(tour.Hardening(binary, work))
	}
	var actionsTour *tour.Actions
	if actions != nil {
		in := actions.tour(kubeconfig, path)
		actionsTour = &in
		fmt.Print(tour.ActionsDeploy(in))
	}
	fleetKubeconfig := filepath.Join(dir, "fleet.kubeconfig")
	defer func() { _ = os.Remove(fleetKubeconfig) }()
	var fleetTour *tour.FleetTour
	if standin != nil {
		// Before the revocation tour: that one removes bob from the org.
		fmt.Print(tour.Proxy())
		f := demoFleetTour(issuer, octogateCA, fleetKubeconfig, work)
		fleetTour = &f
		fmt.Print(tour.Fleet(f))
		fmt.Print(tour.Elevation())
	}
	if standin != nil {
		fmt.Print(demoRevocationTour(standin, c.Octogate.URL(), filepath.Join(c.CertsDir, "ca.crt"), cfg.GitHubCAFile))
	}
	if standin != nil {
		fmt.Print(tour.Sessions(c.Octogate.Addr, filepath.Join(c.CertsDir, "ca.crt")))
	}
	fmt.Print(tour.RateLimit(c.Octogate.Addr, filepath.Join(c.CertsDir, "ca.crt")))
	fmt.Print(tour.Certs(binary, c.CertsDir, c.Octogate.URL()))
	if ready != nil {
		ready(demoReady{kubeconfig: kubeconfig, binary: binary, path: path, fleet: fleetTour, actions: actionsTour})
	}
	select {
	case <-ctx.Done():
		fmt.Println()
		return nil
	case <-c.ControllerManager.Done():
		return errors.New("kube-controller-manager exited; see " + c.ControllerManager.LogPath)
	case <-managedControllerManagerDone(managed):
		return errors.New("the managed-like cluster's kube-controller-manager exited; see " + managed.ControllerManager.LogPath)
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

// tokenUser is a kubeconfig user whose `octogate credential` sends a fixed token (its exec
// env's GITHUB_TOKEN) and carries the server's orgs and the stand-in's URL, so that
// `octogate doctor --context NAME` checks that token with the server's rules and no flags.
func tokenUser(name, token, binary, githubURL, caFile, orgs string) cluster.KubeconfigUser {
	return cluster.KubeconfigUser{Name: name, Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1",
		Command:    binary,
		Args:       []string{"credential", "--github-url", githubURL, "--github-ca-file", caFile},
		Env: []clientcmdapi.ExecEnvVar{
			{Name: "GITHUB_TOKEN", Value: token},
			{Name: "OCTOGATE_GITHUB_ORGS", Value: orgs},
		},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
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

// startManaged starts the cluster of the proxy-* contexts in work: set up like a managed one
// (kube-apiserver with the Node and RBAC authorizers only, no octogate authentication or authorization webhook), with cfg's
// GitHub, orgs, policy and namespace templates, octogate's proxy in front, and the proxy's RBAC
// on (OCTOGATE_PROXY_RBAC): what a request through the proxy may do there is what RBAC grants
// the user and the octogate:rule group the proxy adds. It returns once every rule's group is
// bound, so proxy-alice works from the tour's first line.
func startManaged(ctx context.Context, cfg cluster.Config, work string, env []string) (*cluster.Managed, error) {
	m, err := cluster.StartManaged(ctx, cluster.ManagedConfig{
		BinDir: cfg.BinDir, OctogateBinary: cfg.OctogateBinary, WorkDir: work,
		GitHubAPIURL: cfg.GitHubAPIURL, GitHubCAFile: cfg.GitHubCAFile, Orgs: cfg.Orgs, Policy: cfg.Policy,
		TokenCacheTTL: cfg.TokenCacheTTL,
		OctogateEnv: append([]string{
			"OCTOGATE_PROXY_RBAC=true",
			"OCTOGATE_NAMESPACE=default",
			"OCTOGATE_NAMESPACE_TEMPLATES_FILE=" + templatesFile(cfg.OctogateEnv),
		}, env...),
	})
	if err != nil {
		return nil, err
	}
	if err := m.WaitProxyRBAC(ctx, cfg.Policy); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// templatesFile is the OCTOGATE_NAMESPACE_TEMPLATES_FILE of env.
func templatesFile(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "OCTOGATE_NAMESPACE_TEMPLATES_FILE="); ok {
			return v
		}
	}
	return ""
}

// managedControllerManagerDone is closed when m's kube-controller-manager exits; never
// without m.
func managedControllerManagerDone(m *cluster.Managed) <-chan struct{} {
	if m == nil {
		return nil
	}
	return m.ControllerManager.Done()
}

// addProxyContexts adds to the kubeconfig at path the contexts of the managed-like cluster m:
// proxy-alice and proxy-bob, whose server is octogate's proxy (verified with octogate's CA),
// and proxy-admin, that cluster's kube-apiserver as system:masters.
func addProxyContexts(path string, m *cluster.Managed) error {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(m.CertsDir, "ca.crt"))
	if err != nil {
		return err
	}
	admin, err := clientcmd.LoadFromFile(m.AdminKubeconfig)
	if err != nil {
		return err
	}
	adminCtx, ok := admin.Contexts[admin.CurrentContext]
	if !ok || admin.Clusters[adminCtx.Cluster] == nil || admin.AuthInfos[adminCtx.AuthInfo] == nil {
		return fmt.Errorf("%s: no current context with a cluster and a user", m.AdminKubeconfig)
	}
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: m.ProxyURL, CertificateAuthorityData: ca}
	for name, token := range map[string]string{"proxy-alice": cluster.AliceToken, "proxy-bob": cluster.BobToken} {
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: name}
	}
	kc.Clusters["managed"] = admin.Clusters[adminCtx.Cluster]
	kc.AuthInfos["proxy-admin"] = admin.AuthInfos[adminCtx.AuthInfo]
	kc.Contexts["proxy-admin"] = &clientcmdapi.Context{Cluster: "managed", AuthInfo: "proxy-admin"}
	return clientcmd.WriteToFile(*kc, path)
}
