package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/policyfixture"
	"github.com/octogate/octogate/session"
)

// Routes measured only against the bare handler (they need `octogate serve` as session issuer
// and verifier).
const (
	routeSessionCached = "authenticate-session-cached"
	routeSessionNew    = "authenticate-session-uncached"
	routeExchange      = "token-exchange"
)

// bareRoutes are the routes of the bare-handler comparison, in the order of its RESULT lines.
var bareRoutes = []string{routeAuthorize, routeAuthnCached, routeActionsCached, routeSessionCached, routeSessionNew, routeExchange, routeMutate}

// bareGoals are issue 24's (and, for sessions, issue 22's) least CPU ratios bare/octogate;
// routes without one get a figure only.
var bareGoals = map[string]float64{
	routeAuthorize: 0.8, routeAuthnCached: 0.8, routeActionsCached: 0.8, routeSessionCached: 0.8, routeMutate: 0.6,
}

// bareP99Slack is issue 24's bound on a goal route's p99 over bare's at the same load.
const bareP99Slack = 1.0 // ms

const (
	// benchSessionIssuer is the iss of the sessions `octogate serve` mints and verifies in the
	// same process (with its own keys: the URL is never fetched).
	benchSessionIssuer = "https://sessions.octogate.bench.invalid"
	benchCluster       = "bench-cluster"
	// uncachedSessions is the pool of distinct sessions of routeSessionNew. It is larger than
	// the verifier's cache of verified sessions (session.VerifierConfig.CacheSize, 10,000 by
	// default), so that, taken in turn, each session has left the cache before it comes round
	// again and every review checks an ES256 signature.
	uncachedSessions = 12_000
)

// bareHandler is the handler that costs nothing: it drains the body and writes a fixed
// SubjectAccessReview as long as /authorize's answer.
var bareHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(fixedSubjectAccessReviewAnswer)
})

// serveBare is `bench -serve-bare DIR`: a stdlib net/http TLS server of bareHandler with the
// serving certificate of DIR, HTTP/1.1 as octogate's webhook port, and either client
// certificates required (DIR's client CA) and a 5 s header timeout, as octogate serves, or,
// when open (-serve-bare-open, the hey load), neither: ../shared/bench/hot-routes.sh's bare
// handler (an httptest server) sets no timeout, and the header timeout's per-request read
// deadlines cost the bare handler about 0.4–0.6 µs of its 17–20. It prints its host:port on
// stdout and serves until stdin closes (the bench ended) or SIGTERM.
func serveBare(dir string, open bool) error {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.ServingCertFile), filepath.Join(dir, certs.ServingKeyFile))
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, certs.ClientCACertFile))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s: no certificate", certs.ClientCACertFile)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:   bareHandler,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}},
		Protocols: protocols,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	if !open {
		srv.ReadHeaderTimeout = 5 * time.Second
		srv.TLSConfig.ClientAuth, srv.TLSConfig.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	fmt.Println(ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// startBare runs this binary with -serve-bare as a process of its own; open: asking no client
// certificate and setting no header timeout (-serve-bare-open).
func startBare(ctx context.Context, dir string, open bool) (*serveProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-serve-bare", dir, "-serve-bare-open="+strconv.FormatBool(open))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the bare server: %w", err)
	}
	stop := func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	addrc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addrc <- strings.TrimSpace(line)
	}()
	select {
	case addr := <-addrc:
		if addr == "" {
			stop()
			return nil, errors.New("the bare server exited before printing its address")
		}
		return &serveProcess{addr: addr, pid: cmd.Process.Pid, stop: stop}, nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		stop()
		return nil, errors.New("the bare server printed no address within 10s")
	}
}

// bareReport is what the comparison prints at the end of the bench.
type bareReport struct {
	targets, results, problems []string
}

// versusBare measures the hot routes of a real `octogate serve` against the bare handler, each
// a process of its own, loaded alike from this process: the figure is the server process's own
// CPU time per answered request (as ../shared/bench/hot-routes.sh measures with hey), and the
// ratio bare/octogate per round (1.0: as cheap as the bare handler). Rounds interleave the
// bare handler and every route, so that a change in the machine's load affects all alike.
func versusBare(ctx context.Context, e *env, o options) bareReport {
	var rep bareReport
	fail := func(err error) bareReport {
		rep.problems = append(rep.problems, "vs-bare: "+err.Error())
		return rep
	}
	bin, err := octogateBinary(ctx, e, o)
	if err != nil {
		return fail(err)
	}
	// A lookup of the cached GitHub token at the start or at an expiry costs no wait.
	e.gh.SetDelay(0)
	defer e.gh.SetDelay(o.githubLatency)

	useHey := o.bareLoad == loadHey
	var heyEnv []string
	if useHey {
		if slices.Contains(o.bareRoutes, routeSessionNew) {
			fmt.Printf("\nvs-bare: %s skipped: hey sends one fixed body, and the route needs a new session each review\n", routeSessionNew)
			o.bareRoutes = slices.DeleteFunc(slices.Clone(o.bareRoutes), func(r string) bool { return r == routeSessionNew })
		}
		// As hot-routes.sh runs it: no client CA (hey presents no certificate), the default
		// text log.
		heyEnv = []string{"OCTOGATE_CLIENT_CA_FILE=", "OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT=true", "OCTOGATE_LOG_FORMAT=text"}
	}
	bare, err := startBare(ctx, e.dir, useHey)
	if err != nil {
		return fail(err)
	}
	defer bare.stop()
	serve, err := startServe(ctx, e, bin, append(heyEnv,
		"OCTOGATE_POLICY_FILE="+filepath.Join(e.dir, "policy.yaml"),
		"OCTOGATE_TOKEN_CACHE_TTL=2m",
		"OCTOGATE_ACTIONS_ISSUER="+e.actions.issuer.URL(),
		"OCTOGATE_ACTIONS_AUDIENCE="+benchAudience,
		"OCTOGATE_SESSION_ISSUER="+benchSessionIssuer,
		"OCTOGATE_SESSION_AUDIENCES="+benchCluster,
		"OCTOGATE_SESSION_TTL=1h",
		"OCTOGATE_SESSION_TRUST_ISSUER="+benchSessionIssuer,
		"OCTOGATE_SESSION_AUDIENCE="+benchCluster,
	))
	if err != nil {
		return fail(err)
	}
	defer serve.stop()

	loads, err := bareWorkloads(e, o, serve, bare)
	if err != nil {
		return fail(err)
	}
	routes := slices.DeleteFunc(slices.Clone(bareRoutes), func(r string) bool { return !slices.Contains(o.bareRoutes, r) })
	runLoad := func(_ string, w workload, d time.Duration) sample { return run(w, o.workers, d) }
	generator := fmt.Sprintf("%d keep-alive TLS connections from this process", o.workers)
	if useHey {
		runLoad = func(r string, w workload, d time.Duration) sample {
			s := runHey(ctx, w, o.workers, d)
			// hey counts HTTP statuses only, and a refused review is a 200: one answer after
			// the phase, checked as the Go client checks every answer, catches a route that
			// stopped answering as it should (an expired token, say).
			if err := checkOnce(r, w); err != nil {
				s.errors++
				s.firstErr = cmp.Or(s.firstErr, "after the phase: "+err.Error())
			}
			return s
		}
		generator = fmt.Sprintf("hey, %d keep-alive connections, no client certificates, the text log (as ../shared/bench/hot-routes.sh)", o.workers)
	}
	phase := o.bareDuration / time.Duration(o.bareRounds)
	fmt.Printf("\nhot routes against a bare TLS handler: `octogate serve` (pid %d: request log, metrics, policy of %d rules, sessions issued and verified, Actions tokens) and a stdlib handler that drains the body and writes a fixed answer (pid %d), separate processes with the same certificates; load: %s, %v per route in %d interleaved rounds; figure: the server process's own CPU per answered request (/proc/PID/stat)\n",
		serve.pid, policyRules, bare.pid, generator, phase, o.bareRounds)

	all := append([]string{"bare"}, routes...)
	warm := min(o.warmup, phase)
	for _, r := range all {
		if s := runLoad(r, loads[r], warm); s.failed() > 0 {
			return fail(fmt.Errorf("%s warm-up: %d failed requests, first: %s", r, s.failed(), s.firstErr))
		}
	}
	rounds := map[string][]sample{}
	for round := 1; round <= o.bareRounds; round++ {
		for _, r := range all {
			s := runLoad(r, loads[r], phase)
			fmt.Printf("  round %d %-30s %8.0f req/s  %7d ok  %d failed  %7.1f us CPU/req\n", round, r, s.rps(), s.ok, s.failed(), perRequest(s))
			rounds[r] = append(rounds[r], s)
		}
	}

	bareSum := bareSummary(rounds["bare"], nil)
	fmt.Printf("\n%-30s %10s %10s %10s %11s %10s %8s %8s %11s %5s\n", "route", "cpu us/req", "bare us", "cpu ratio", "range", "req/s ratio", "p50 ms", "p99 ms", "bare p99 ms", "goal")
	for _, r := range routes {
		s := bareSummary(rounds[r], rounds["bare"])
		goal, hasGoal := bareGoals[r]
		goalText := "-"
		if hasGoal {
			goalText = fmt.Sprintf("%.1f", goal)
		}
		fmt.Printf("%-30s %10.1f %10.1f %10.2f %5.2f-%5.2f %10.2f %8.3f %8.3f %11.3f %5s\n", r, s.cpu, bareSum.cpu, s.ratio, s.ratioMin, s.ratioMax,
			s.throughput, s.p50, s.p99, bareSum.p99, goalText)
		if s.failed > 0 {
			rep.problems = append(rep.problems, fmt.Sprintf("vs-bare %s: %d failed requests, first: %s", r, s.failed, s.firstErr))
		}
		result := fmt.Sprintf("RESULT route=%s cpu_us=%.1f bare_cpu_us=%.1f cpu_ratio_median=%.2f cpu_ratio_range=%.2f-%.2f throughput_ratio_median=%.2f p50_ms=%.3f p99_ms=%.3f bare_p99_ms=%.3f non200=%d",
			r, s.cpu, bareSum.cpu, s.ratio, s.ratioMin, s.ratioMax, s.throughput, s.p50, s.p99, bareSum.p99, s.failed)
		if hasGoal {
			result += fmt.Sprintf(" goal_cpu_ratio=%.1f", goal)
			rep.targets = append(rep.targets,
				// Judged on the ratio as the RESULT line prints it (two decimals, as
				// hot-routes.sh prints its own), so the verdict never contradicts the figure.
				fmt.Sprintf("TARGET vs-bare %s cpu ratio %.2f >= %.1f: %s", r, s.ratio, goal, verdict(math.Round(s.ratio*100)/100 >= goal)),
				fmt.Sprintf("TARGET vs-bare %s p99 %.3f ms <= bare's %.3f ms + %.0f ms: %s", r, s.p99, bareSum.p99, bareP99Slack, verdict(s.p99 <= bareSum.p99+bareP99Slack)))
		}
		rep.results = append(rep.results, result)
	}
	return rep
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func perRequest(s sample) float64 {
	if s.ok == 0 {
		return 0
	}
	return float64(s.cpu) / float64(s.ok) / float64(time.Microsecond)
}

// bareFigures are one route's figures over the rounds of the comparison.
type bareFigures struct {
	cpu                       float64 // median CPU µs per answered request
	ratio, ratioMin, ratioMax float64 // bare's CPU per request over the route's, same round
	throughput                float64 // median of the route's req/s over bare's, same round
	p50, p99                  float64 // ms, over every round's answers
	failed                    int
	firstErr                  string
}

// bareSummary sums a route's rounds; bare, when given, holds the bare handler's rounds in the
// same order.
func bareSummary(rounds, bare []sample) bareFigures {
	var f bareFigures
	var all sample
	var cpus, ratios, tputs []float64
	for i, s := range rounds {
		all.add(s)
		c := perRequest(s)
		cpus = append(cpus, c)
		if i < len(bare) && c > 0 {
			ratios = append(ratios, perRequest(bare[i])/c)
			if r := bare[i].rps(); r > 0 {
				tputs = append(tputs, s.rps()/r)
			}
		}
	}
	sum := summarize("", all)
	f.cpu, f.p50, f.p99, f.failed, f.firstErr = median(cpus), sum.p50, sum.p99, sum.failed, sum.firstErr
	if len(ratios) > 0 {
		f.ratio, f.ratioMin, f.ratioMax = median(ratios), slices.Min(ratios), slices.Max(ratios)
	}
	f.throughput = median(tputs)
	return f
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// bareWorkloads builds the requests of the comparison, sends one of each (a wrong answer stops
// it with the body in view), and mints the sessions the session routes review.
func bareWorkloads(e *env, o options, serve, bare *serveProcess) (map[string]workload, error) {
	addr := serve.addr
	serveCPU := func() time.Duration { return pidCPU(serve.pid) }
	fixed := func(path, contentType string, body []byte, expect string) workload {
		req := postRequest(addr, path, contentType, body)
		return workload{addr: addr, tls: e.clientTLS, next: func() []byte { return req }, expect: []byte(expect), cpu: serveCPU,
			hey: &heyRequest{path: path, contentType: contentType, body: body}}
	}
	bareReq := httpRequest(bare.addr, "/authorize", subjectAccessReview(policyRules))
	// A token minted now: the pool of the in-process routes may be near its 5 minutes' end.
	actionsToken := e.actions.issuer.Mint(githubapi.Workflow{
		Repository: org + "/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production",
		Actor: "octocat", ActorID: 583231, RunID: 9999, SHA: "0123abc", Audience: benchAudience,
	}.Claims())
	exchange := url.Values{
		"grant_type":         {session.GrantTypeTokenExchange},
		"subject_token":      {"gho_cached_octocat00SlZl"},
		"subject_token_type": {session.TokenTypeAccessToken},
		"audience":           {benchCluster},
	}
	_, _, tokenPath := session.Routes(benchSessionIssuer)
	loads := map[string]workload{
		"bare": {addr: bare.addr, tls: e.clientTLS, next: func() []byte { return bareReq }, expect: []byte(`"allowed":true`), cpu: func() time.Duration { return pidCPU(bare.pid) },
			hey: &heyRequest{path: "/authorize", contentType: "application/json", body: subjectAccessReview(policyRules)}},
		routeAuthorize:     fixed("/authorize", "application/json", subjectAccessReview(policyRules), `"reason":"octogate: rule `+policyfixture.DecidingRule(policyRules)+`"`),
		routeAuthnCached:   fixed("/authenticate", "application/json", tokenReview("gho_cached_octocat00SlZl"), `"username":"github:octocat:`),
		routeActionsCached: fixed("/authenticate", "application/json", tokenReview(actionsToken), `"username":"github-actions:repo:`+org+`/deploy:environment:production"`),
		routeExchange:      fixed(tokenPath, session.FormMediaType, []byte(exchange.Encode()), `"access_token":"`),
		routeMutate:        fixed("/mutate/namespaces", "application/json", namespaceCreate(), `"patchType":"JSONPatch"`),
	}
	for _, r := range append([]string{"bare"}, bareRoutes...) {
		if _, ok := loads[r]; ok {
			if err := checkOnce(r, loads[r]); err != nil {
				return nil, err
			}
		}
	}
	needs := func(r string) bool { return slices.Contains(o.bareRoutes, r) }
	if needs(routeSessionCached) || needs(routeSessionNew) {
		n := 1
		if needs(routeSessionNew) {
			n += uncachedSessions
		}
		start := time.Now()
		sessions, err := mintSessions(addr, e.clientTLS, postRequest(addr, tokenPath, session.FormMediaType, []byte(exchange.Encode())), n, o.workers)
		if err != nil {
			return nil, err
		}
		fmt.Printf("\nvs-bare: %d sessions exchanged in %v\n", n, time.Since(start).Round(time.Millisecond))
		loads[routeSessionCached] = fixed("/authenticate", "application/json", tokenReview(sessions[0]), `"username":"github:octocat:`)
		if needs(routeSessionNew) {
			reqs := make([][]byte, 0, uncachedSessions)
			for _, s := range sessions[1:] {
				reqs = append(reqs, postRequest(addr, "/authenticate", "application/json", tokenReview(s)))
			}
			var next atomic.Uint64
			loads[routeSessionNew] = workload{addr: addr, tls: e.clientTLS, expect: []byte(`"username":"github:octocat:`), cpu: serveCPU,
				next: func() []byte { return reqs[(next.Add(1)-1)%uint64(len(reqs))] }}
		}
		for _, r := range []string{routeSessionCached, routeSessionNew} {
			if _, ok := loads[r]; ok {
				if err := checkOnce(r, loads[r]); err != nil {
					return nil, err
				}
			}
		}
	}
	return loads, nil
}

func checkOnce(route string, w workload) error {
	c := newClient(w.addr, w.tls)
	defer c.close()
	status, body, _, err := c.do(w.next())
	if err != nil {
		return fmt.Errorf("%s: first request: %w", route, err)
	}
	if status != http.StatusOK || !bytes.Contains(body, w.expect) {
		return fmt.Errorf("%s: first request: HTTP %d %.500s (want %s)", route, status, body, w.expect)
	}
	return nil
}

// mintSessions sends n token exchanges of req from workers connections and returns the
// sessions.
func mintSessions(addr string, cfg *tls.Config, req []byte, n, workers int) ([]string, error) {
	out := make([]string, n)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			c := newClient(addr, cfg)
			defer c.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				status, body, _, err := c.do(req)
				var answer struct {
					AccessToken string `json:"access_token"`
				}
				if err == nil && status == http.StatusOK {
					err = json.Unmarshal(body, &answer)
				}
				if err != nil || status != http.StatusOK || answer.AccessToken == "" {
					mu.Lock()
					switch {
					case firstErr != nil:
					case err != nil:
						firstErr = fmt.Errorf("token exchange: %w", err)
					default:
						firstErr = fmt.Errorf("token exchange: HTTP %d %.300s", status, body)
					}
					mu.Unlock()
					next.Store(int64(n)) // stop every worker
					return
				}
				out[i] = answer.AccessToken
			}
		})
	}
	wg.Wait()
	return out, firstErr
}
