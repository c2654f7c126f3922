package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/policyfixture"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks"
	"github.com/octogate/octogate/webhooks/door"
)

// Route names, in the order of the RESULT lines.
const (
	routeBaseline    = "baseline"
	routeAuthorize   = "authorize"
	routeAuthnCached = "authenticate-cached"
	routeAuthnNew    = "authenticate-uncached"
	routeMutate      = "mutate-namespaces"
	routeRawTLS      = "raw-tls"
)

var allRoutes = []string{routeBaseline, routeAuthorize, routeAuthnCached, routeAuthnNew, routeMutate, routeRawTLS, routeActionsCached, routeActionsNew}

// targets are the minimum ratios to the baseline.
var targets = map[string]float64{routeAuthorize: 0.7, routeAuthnCached: 0.7, routeMutate: 0.5}

type options struct {
	duration, warmup time.Duration
	workers, rounds  int
	routes           []string
	githubLatency    time.Duration
	burstTokens      int
	burstConcurrency int
	rssIdentities    int
	rateLimitScale   int
	octogate         string
	rssEnv           string
	cpuprofile       string
	logFormat        string
	bareDuration     time.Duration
	bareRounds       int
	bareRoutes       []string
	bareLoad         string
	stormPeople      int
	stormConcurrency int
	stormTimeout     time.Duration
	stormOnly        bool
	stormKeepAlive   bool
}

func main() {
	var o options
	var routes, bareRouteList, serveBareDir string
	var serveBareOpen bool
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per route, split over -rounds")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load per route before the first round")
	flag.IntVar(&o.workers, "workers", 32, "concurrent keep-alive TLS connections, one request in flight each")
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved rounds: each runs every route for -duration/-rounds")
	flag.StringVar(&routes, "routes", strings.Join(allRoutes, ","), "comma list of routes to run (baseline always runs): "+strings.Join(allRoutes, ", "))
	flag.DurationVar(&o.githubLatency, "github-latency", 50*time.Millisecond, "GitHub stand-in latency per call for authenticate-uncached")
	flag.IntVar(&o.burstTokens, "burst-tokens", 20, "new tokens in the singleflight burst (0: skip)")
	flag.IntVar(&o.burstConcurrency, "burst-concurrency", 50, "concurrent reviews of each burst token")
	flag.IntVar(&o.rssIdentities, "rss-identities", 10000, "identities cached in the octogate serve process whose memory is measured (0: skip)")
	flag.IntVar(&o.rateLimitScale, "ratelimit-scale", 240, "time compression of the rate-limit measurement (an hour of one user's reviews at the default TTL takes 1h/scale; 0: skip)")
	flag.StringVar(&o.rssEnv, "rss-env", "", "extra NAME=value settings (comma list) for the measured octogate serve, e.g. GOMEMLIMIT=48MiB")
	flag.StringVar(&o.octogate, "octogate", "", "octogate binary for the memory measurement and the comparison with the bare handler (default: go build ./cmd/octogate)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "directory for one CPU profile per route and round (ROUTE-rN.pprof); go tool pprof merges several files")
	flag.StringVar(&o.logFormat, "log", "text", "request log of the server under test: text or json (formatted as in production, then discarded), or off")
	flag.DurationVar(&o.bareDuration, "bare-duration", 6*time.Second, "measured time per route of the comparison with a bare TLS handler (separate processes), split over -bare-rounds (0: skip it)")
	flag.IntVar(&o.bareRounds, "bare-rounds", 3, "interleaved rounds of the bare-handler comparison")
	flag.StringVar(&bareRouteList, "bare-routes", strings.Join(bareRoutes, ","), "comma list of the routes compared with the bare handler: "+strings.Join(bareRoutes, ", "))
	flag.StringVar(&o.bareLoad, "bare-load", loadGo, "load generator of the comparison with the bare handler: go (this process, client certificates) or hey (a process of its own, no client certificates: ../shared/bench/hot-routes.sh's method; not for "+routeSessionNew+")")
	flag.IntVar(&o.stormPeople, "login-storm", 1000, "people in the login storm at the session issuer (0: skip it)")
	flag.IntVar(&o.stormConcurrency, "login-storm-concurrency", 20, "people of the login storm logging in at the same time (above the issuer's GitHub lookups at once for its public doors, 24 on 2 cores, some are shed with 503 and sent again after Retry-After)")
	flag.DurationVar(&o.stormTimeout, "login-storm-timeout", 40*time.Second, "bound of the login storm: no person starts after it")
	flag.BoolVar(&o.stormKeepAlive, "login-storm-keepalive", false, "send a person's requests of the login storm on one kept-alive connection instead of a new one each (as each plugin run opens)")
	flag.BoolVar(&o.stormOnly, "login-storm-only", false, "run only the login storm (make bench-login)")
	flag.StringVar(&serveBareDir, "serve-bare", "", "internal: serve the bare handler with the certificates of this directory, print its address, serve until stdin closes")
	flag.BoolVar(&serveBareOpen, "serve-bare-open", false, "internal: with -serve-bare, ask no client certificate and set no header timeout (hot-routes.sh's bare handler)")
	flag.Parse()
	if serveBareDir != "" {
		if err := serveBare(serveBareDir, serveBareOpen); err != nil {
			fmt.Fprintln(os.Stderr, "bench -serve-bare:", err)
			os.Exit(1)
		}
		return
	}
	if o.bareDuration > 0 && o.bareRounds <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -bare-rounds must be positive")
		os.Exit(2)
	}
	o.bareRoutes = pickRoutes("-bare-routes", bareRouteList, bareRoutes, o.bareRoutes)
	if o.bareLoad != loadGo && o.bareLoad != loadHey {
		fmt.Fprintf(os.Stderr, "bench: -bare-load %q: want %s or %s\n", o.bareLoad, loadGo, loadHey)
		os.Exit(2)
	}
	if o.bareLoad == loadHey && o.bareDuration > 0 {
		if _, err := exec.LookPath("hey"); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -bare-load hey needs hey on PATH (apt-get install hey)")
			os.Exit(2)
		}
		if !slices.ContainsFunc(o.bareRoutes, func(r string) bool { return r != routeSessionNew }) {
			fmt.Fprintf(os.Stderr, "bench: -bare-load hey: no route to compare (%s changes its body every request, which hey cannot send)\n", routeSessionNew)
			os.Exit(2)
		}
	}
	if o.stormPeople < 0 || o.stormConcurrency <= 0 || o.stormTimeout <= 0 || (o.stormOnly && o.stormPeople == 0) {
		fmt.Fprintln(os.Stderr, "bench: -login-storm must not be negative (nor 0 with -login-storm-only), -login-storm-concurrency and -login-storm-timeout positive")
		os.Exit(2)
	}
	if o.workers <= 0 || o.rounds <= 0 || o.duration <= 0 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "bench: -workers, -rounds and -duration must be positive, -warmup not negative")
		os.Exit(2)
	}
	o.routes = pickRoutes("-routes", routes, allRoutes, []string{routeBaseline})
	if err := bench(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

// pickRoutes appends to picked the routes of the comma list (of flag), each once, in order;
// a route not in known ends the process with status 2.
func pickRoutes(flag, list string, known, picked []string) []string {
	for r := range strings.SplitSeq(list, ",") {
		r = strings.TrimSpace(r)
		switch {
		case r == "" || slices.Contains(picked, r):
		case !slices.Contains(known, r):
			fmt.Fprintf(os.Stderr, "bench: %s: unknown route %q; want some of %s\n", flag, r, strings.Join(known, ", "))
			os.Exit(2)
		default:
			picked = append(picked, r)
		}
	}
	return picked
}

// env is the server under test and what talks to it.
type env struct {
	dir       string
	clientTLS *tls.Config
	gh        *githubapi.Server
	ghCAFile  string
	server    *webhooks.Server
	rawAddr   string
	registry  *prometheus.Registry
	actions   *actionsBench
}

func bench(o options) error {
	ctrllog.SetLogger(logr.Discard()) // certwatcher logs through controller-runtime
	dir, err := os.MkdirTemp("", "octogate-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	e, stop, err := start(ctx, dir, o)
	if err != nil {
		return err
	}
	defer stop()

	fmt.Printf("octogate load benchmark: %s %s/%s, GOMAXPROCS=%d, %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), cpuModel())
	fmt.Printf("server %s (TLS 1.3, client certificates required, request log %s, metrics on a registry), raw net/http TLS %s\n",
		e.server.Addr(), o.logFormat, e.rawAddr)
	fmt.Printf("load: %d keep-alive TLS connections from this process, %v per route in %d interleaved rounds after %v warm-up\n",
		o.workers, o.duration, o.rounds, o.warmup)

	if o.stormOnly {
		result, problems := loginStorm(ctx, e, o)
		for _, p := range problems {
			fmt.Println("PROBLEM", p)
		}
		if result != "" {
			fmt.Println(result)
		}
		if len(problems) > 0 {
			return fmt.Errorf("%d problem(s), see PROBLEM lines", len(problems))
		}
		return nil
	}
	loads, uncached, err := workloads(e, o)
	if err != nil {
		return err
	}
	var problems []string
	for _, r := range o.routes {
		if s := run(loads[r], o.workers, o.warmup); s.failed() > 0 {
			return fmt.Errorf("%s warm-up: %d failed requests, first: %s", r, s.failed(), s.firstErr)
		}
	}
	uncached.reset()
	ghBefore := e.gh.Calls("/user")

	totals := map[string]*sample{}
	for round := 1; round <= o.rounds; round++ {
		for _, r := range o.routes {
			runtime.GC()
			stopProfile, err := profile(o.cpuprofile, r, round)
			if err != nil {
				return err
			}
			s := run(loads[r], o.workers, o.duration/time.Duration(o.rounds))
			stopProfile()
			fmt.Printf("  round %d %-22s %8.0f req/s  %7d ok  %d failed  %5.0f%% CPU\n", round, r, s.rps(), s.ok, s.failed(),
				100*s.cpu.Seconds()/s.elapsed.Seconds())
			if totals[r] == nil {
				totals[r] = &sample{}
			}
			totals[r].add(s)
		}
	}
	sums := map[string]summary{}
	for _, r := range o.routes {
		sums[r] = summarize(r, *totals[r])
		if sums[r].failed > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d failed requests (%v), first: %s", r, sums[r].failed, totals[r].status, sums[r].firstErr))
		}
	}

	if slices.Contains(o.routes, routeAuthnNew) {
		p := uncached.report(e.gh, e.gh.Calls("/user")-ghBefore)
		problems = append(problems, p...)
	}
	var vsBare bareReport
	if o.bareDuration > 0 && len(o.bareRoutes) > 0 {
		vsBare = versusBare(ctx, e, o)
		problems = append(problems, vsBare.problems...)
	}
	if o.burstTokens > 0 {
		problems = append(problems, burst(e, o)...)
	}
	if o.rateLimitScale > 0 {
		problems = append(problems, rateLimitUnits(o.rateLimitScale)...)
	}
	if o.rssIdentities > 0 {
		problems = append(problems, measureRSS(ctx, e, o)...)
	}
	var stormResult string
	if o.stormPeople > 0 {
		var p []string
		stormResult, p = loginStorm(ctx, e, o)
		problems = append(problems, p...)
	}

	base := sums[routeBaseline].rps
	fmt.Println()
	// CPU per request (server, generator and, for uncached reviews, the GitHub stand-in, all
	// in this process) depends much less than requests/s on how much of the machine other
	// processes took during the run; its ratio to the baseline's is a cross-check.
	baseCPU := sums[routeBaseline].cpuPerOp
	fmt.Printf("%-22s %10s %9s %9s %7s %9s %12s %9s\n", "route", "req/s", "p50 ms", "p99 ms", "ratio", "requests", "cpu us/req", "cpu ratio")
	for _, r := range o.routes {
		s := sums[r]
		fmt.Printf("%-22s %10.0f %9.3f %9.3f %7.3f %9d %12.1f %9.3f\n", r, s.rps, s.p50, s.p99, s.rps/base, s.n,
			float64(s.cpuPerOp)/float64(time.Microsecond), float64(baseCPU)/float64(s.cpuPerOp))
	}
	fmt.Println()
	for _, r := range o.routes {
		if min, ok := targets[r]; ok {
			verdict := "met"
			if sums[r].rps/base < min {
				verdict = "MISSED"
			}
			fmt.Printf("TARGET %s ratio %.3f >= %.1f: %s\n", r, sums[r].rps/base, min, verdict)
		}
	}
	for _, t := range vsBare.targets {
		fmt.Println(t)
	}
	for _, p := range problems {
		fmt.Println("PROBLEM", p)
	}
	for _, r := range o.routes {
		s := sums[r]
		fmt.Printf("RESULT name=%s rps=%.0f p50_ms=%.3f p99_ms=%.3f ratio=%.3f\n", r, s.rps, s.p50, s.p99, s.rps/base)
	}
	for _, r := range vsBare.results {
		fmt.Println(r)
	}
	if stormResult != "" {
		fmt.Println(stormResult)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s), see PROBLEM lines", len(problems))
	}
	return nil
}

// start runs the GitHub stand-in, the webhook server with every route, and the raw TLS server.
func start(ctx context.Context, dir string, o options) (*env, func(), error) {
	set, err := certs.Generate([]string{"127.0.0.1", "localhost"})
	if err != nil {
		return nil, nil, err
	}
	if _, err := set.WriteDir(dir, false); err != nil {
		return nil, nil, err
	}
	e := &env{dir: dir}
	clientPair, err := set.Client.TLSCertificate()
	if err != nil {
		return nil, nil, err
	}
	ca, err := certs.LoadCA(set.CA.CertPEM, set.CA.KeyPEM)
	if err != nil {
		return nil, nil, err
	}
	e.clientTLS = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{clientPair}}

	e.gh = githubapi.NewTLS()
	e.ghCAFile = filepath.Join(dir, "github-ca.crt")
	if err := e.gh.WriteCAFile(e.ghCAFile); err != nil {
		return nil, nil, err
	}

	var logger *slog.Logger
	switch o.logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	case "json":
		logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	case "off":
		logger = slog.New(slog.DiscardHandler)
	default:
		return nil, nil, fmt.Errorf("-log %q: want text, json or off", o.logFormat)
	}

	// As in `octogate serve`: one registry with the Go and process collectors that
	// controller-runtime adds, and every octogate metric.
	e.registry = prometheus.NewRegistry()
	e.registry.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)))
	e.server, err = webhooks.New(webhooks.Config{
		Listen:       "127.0.0.1:0",
		TLSCertFile:  filepath.Join(dir, certs.ServingCertFile),
		TLSKeyFile:   filepath.Join(dir, certs.ServingKeyFile),
		ClientCAFile: filepath.Join(dir, certs.ClientCACertFile),
		Logger:       logger,
		Registerer:   e.registry,
		Gatherer:     e.registry,
	})
	if err != nil {
		return nil, nil, err
	}
	if e.actions, err = startActions(logger); err != nil {
		return nil, nil, err
	}
	authn, err := tokenreview.New(tokenreview.Config{
		GitHubAPIURL: e.gh.URL(),
		GitHubCAFile: e.ghCAFile,
		Orgs:         []string{org},
		JWTLookup:    e.actions.cached,
		// New tokens as fast as the load generator sends them: the flood bound is not measured.
		NewTokenRate: 1e6,
		Logger:       logger,
		Registerer:   e.registry,
	})
	if err != nil {
		return nil, nil, err
	}
	policyYAML := policyfixture.Large(policyRules)
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policyYAML), 0o600); err != nil {
		return nil, nil, err
	}
	authz, err := subjectaccessreview.New(subjectaccessreview.Config{PolicyFile: policyFile, Logger: logger, Registerer: e.registry})
	if err != nil {
		return nil, nil, err
	}
	mutator, err := admission.NewMutator(admission.Config{Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	baseline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		door.Record(r.Context(), door.Outcome{Decision: "allow", User: "github:octocat", Reason: "octogate: rule bench"})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fixedSubjectAccessReviewAnswer)
	})
	e.server.Handle("/baseline", "baseline", baseline)
	e.server.Handle("/authorize", "authorize", authz)
	e.server.Handle("/authenticate", "authenticate", authn)
	e.server.Handle(pathActionsNew, "authenticate-actions-uncached", e.actions.uncached)
	e.server.Handle("/mutate/namespaces", "mutate-namespaces", mutator)
	e.server.AddReadyCheck("policy", authz.Ready)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Goroutines inherit profiler labels: side=server marks every connection goroutine of
	// the server under test in CPU profiles (go tool pprof -tagfocus side=server).
	wg.Go(func() {
		pprof.Do(ctx, pprof.Labels("side", "server"), func(ctx context.Context) {
			if err := e.server.Run(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "bench: server:", err)
			}
		})
	})
	wg.Go(func() { _ = authz.Run(ctx) })

	// The raw net/http TLS server: same certificate and TLS versions, HTTP/1.1, no pipeline.
	pair, err := set.Serving.TLSCertificate()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	rawLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return nil, nil, err
	}
	e.rawAddr = rawLn.Addr().String()
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	raw := &http.Server{
		Handler:           bareHandler,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}},
		Protocols:         protocols,
		ReadHeaderTimeout: 5 * time.Second,
	}
	wg.Go(func() {
		pprof.Do(ctx, pprof.Labels("side", "server"), func(context.Context) { _ = raw.ServeTLS(rawLn, "", "") })
	})

	select {
	case <-e.server.Ready():
	case <-time.After(10 * time.Second):
		cancel()
		return nil, nil, errors.New("webhook server not listening after 10s")
	}
	stop := func() {
		cancel()
		_ = raw.Close()
		wg.Wait()
		e.gh.Close()
		e.actions.issuer.Close()
	}
	return e, stop, nil
}

// uncachedTokens hands out a token GitHub knows and octogate has never seen, per request.
type uncachedTokens struct {
	gh     *githubapi.Server
	users  []string
	n      atomic.Int64
	mu     sync.Mutex
	issued []string
}

func (u *uncachedTokens) next() string {
	i := u.n.Add(1)
	tok := ghtoken.Mint(fmt.Sprintf("gho_uncached_%012d", i))
	if err := u.gh.AddToken(u.users[int(i)%len(u.users)], tok); err != nil {
		panic(err)
	}
	u.mu.Lock()
	u.issued = append(u.issued, tok)
	u.mu.Unlock()
	return tok
}

func (u *uncachedTokens) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.issued = nil
}

// report prints the GitHub calls the measured uncached reviews cost, per token.
func (u *uncachedTokens) report(gh *githubapi.Server, userCalls int) []string {
	u.mu.Lock()
	tokens := slices.Clone(u.issued)
	u.mu.Unlock()
	if len(tokens) == 0 {
		return []string{"authenticate-uncached: no token was reviewed"}
	}
	minCalls, maxCalls, total := int(^uint(0)>>1), 0, 0
	for _, t := range tokens {
		c := gh.TokenCalls(t)
		total += c
		minCalls, maxCalls = min(minCalls, c), max(maxCalls, c)
	}
	fmt.Printf("\nauthenticate-uncached: %d unique tokens, GitHub calls per token min %d max %d mean %.2f (a set is %d: GET /user, GET /user/memberships/orgs/%s, GET /user/teams); GET /user per token %.3f\n",
		len(tokens), minCalls, maxCalls, float64(total)/float64(len(tokens)), callSet, org, float64(userCalls)/float64(len(tokens)))
	if minCalls != callSet || maxCalls != callSet {
		return []string{fmt.Sprintf("authenticate-uncached: GitHub calls per token between %d and %d, want exactly %d", minCalls, maxCalls, callSet)}
	}
	return nil
}

// callSet is the GitHub calls of one lookup of a member of one org with one page of teams.
const callSet = 3

// workloads builds each route's requests and checks each route answers as expected.
func workloads(e *env, o options) (map[string]workload, *uncachedTokens, error) {
	addr := e.server.Addr().String()
	// The cached token's user, and the users new tokens belong to.
	e.gh.AddUser(githubUser("Octocat", "gho_cached_octocat00SlZl", 5))
	uncached := &uncachedTokens{gh: e.gh}
	for i := range 50 {
		login := fmt.Sprintf("member-%02d", i)
		e.gh.AddUser(githubUser(login, ghtoken.Mint("gho_seed_"+login), 5))
		uncached.users = append(uncached.users, login)
	}
	e.gh.SetDelay(o.githubLatency)

	fixed := func(path string, body []byte, expect string) workload {
		req := httpRequest(addr, path, body)
		return workload{addr: addr, tls: e.clientTLS, next: func() []byte { return req }, expect: []byte(expect)}
	}
	rule := policyfixture.DecidingRule(policyRules)
	loads := map[string]workload{
		routeBaseline:    fixed("/baseline", subjectAccessReview(policyRules), `"allowed":true`),
		routeAuthorize:   fixed("/authorize", subjectAccessReview(policyRules), `"reason":"octogate: rule `+rule+`"`),
		routeAuthnCached: fixed("/authenticate", tokenReview("gho_cached_octocat00SlZl"), `"username":"github:octocat:`),
		routeMutate:      fixed("/mutate/namespaces", namespaceCreate(), `"patchType":"JSONPatch"`),
		routeAuthnNew: {addr: addr, tls: e.clientTLS, expect: []byte(`"authenticated":true`),
			next: func() []byte { return httpRequest(addr, "/authenticate", tokenReview(uncached.next())) }},
		routeRawTLS: {addr: e.rawAddr, tls: e.clientTLS, expect: []byte(`"allowed":true`)},
	}
	maps.Copy(loads, e.actions.workloads(addr, e))
	rawReq := httpRequest(e.rawAddr, "/authorize", subjectAccessReview(policyRules))
	loads[routeRawTLS] = workload{addr: e.rawAddr, tls: e.clientTLS, expect: []byte(`"allowed":true`), next: func() []byte { return rawReq }}

	// One request each, so that a wrong answer stops the benchmark with the body in view.
	for _, r := range o.routes {
		w := loads[r]
		c := newClient(w.addr, w.tls)
		status, body, _, err := c.do(w.next())
		c.close()
		if err != nil || status != http.StatusOK || !bytes.Contains(body, w.expect) {
			return nil, nil, fmt.Errorf("%s: first request: %w HTTP %d %s (want %s)", r, err, status, body, w.expect)
		}
	}
	return loads, uncached, nil
}

// burst sends burstConcurrency simultaneous reviews of each of burstTokens new tokens (one
// token at a time, within the in-flight limit) and checks each token cost one set of calls.
func burst(e *env, o options) []string {
	addr := e.server.Addr().String()
	clients := make([]*client, o.burstConcurrency)
	for i := range clients {
		clients[i] = newClient(addr, e.clientTLS)
		if err := clients[i].dial(); err != nil {
			return []string{"burst: dial: " + err.Error()}
		}
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	userCalls := e.gh.Calls("/user")
	var problems []string
	var failed atomic.Int64
	minCalls, maxCalls := int(^uint(0)>>1), 0
	start := time.Now()
	for i := range o.burstTokens {
		tok := ghtoken.Mint(fmt.Sprintf("gho_burst_%04d", i))
		if err := e.gh.AddToken("Octocat", tok); err != nil {
			return []string{err.Error()}
		}
		req := httpRequest(addr, "/authenticate", tokenReview(tok))
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				<-gate
				status, body, _, err := c.do(req)
				if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte(`"authenticated":true`)) {
					failed.Add(1)
				}
			})
		}
		close(gate)
		wg.Wait()
		c := e.gh.TokenCalls(tok)
		minCalls, maxCalls = min(minCalls, c), max(maxCalls, c)
	}
	userCalls = e.gh.Calls("/user") - userCalls
	fmt.Printf("burst: %d new tokens x %d concurrent reviews each (GitHub latency %v): GitHub calls per token min %d max %d (set %d), GET /user per token %.3f, %d failed, %v\n",
		o.burstTokens, o.burstConcurrency, o.githubLatency, minCalls, maxCalls, callSet,
		float64(userCalls)/float64(o.burstTokens), failed.Load(), time.Since(start).Round(time.Millisecond))
	if minCalls != callSet || maxCalls != callSet {
		problems = append(problems, fmt.Sprintf("burst: GitHub calls per token between %d and %d, want exactly %d", minCalls, maxCalls, callSet))
	}
	if n := failed.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("burst: %d reviews failed", n))
	}
	return problems
}

// profile starts a CPU profile of one route's round when dir is set.
func profile(dir, route string, round int) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-r%d.pprof", route, round)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "cpu unknown"
}
