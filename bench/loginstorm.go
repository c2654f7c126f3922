package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/session"
)

// The login storm's fleet: four clusters, prod limited to the sre team (docs/sessions.md's
// walk). Servers are never contacted: only the issuer is.
const (
	stormIssuer   = "https://issuer.octogate.bench.invalid"
	stormSRETeam  = "SRE" // slug sre
	stormSREEvery = 10    // one person in stormSREEvery is in the sre team
	stormAttempts = 10    // sends of one request the issuer sheds
	// stormRequestTimeout bounds one request, handshake included.
	stormRequestTimeout = 10 * time.Second
)

var stormClustersFile = `apiVersion: octogate.dev/v1alpha1
kind: SessionClusters
clusters:
- name: prod
  server: https://prod.bench.invalid:6443
  accepts: webhook
  labels: {env: prod}
  subjects:
  - {kind: Group, name: "github:` + org + `/sre"}
- name: staging
  server: https://staging.bench.invalid:6443
  accepts: webhook
  labels: {env: staging}
- name: dev
  server: https://dev.bench.invalid:6443
  accepts: apiserver
  labels: {env: dev}
- name: managed
  server: https://managed-proxy.bench.invalid
  accepts: proxy
  labels: {env: prod}
`

// stormPerson is one person of the storm: a GitHub account with one token, and the address
// its requests come from (X-Forwarded-For through a trusted proxy).
type stormPerson struct {
	token, addr string
	sre         bool
}

// stormFigures is what the storm measured.
type stormFigures struct {
	exchanges, listed             int
	exchangeLat, listLat, login   []time.Duration
	failed                        int
	statuses                      map[int]int
	shed                          map[int]int // answers sent again after Retry-After, by status
	firstErr                      string
	elapsed                       time.Duration
	issuerCPU                     time.Duration
	callsMin, callsMax, callsSum  int
	userCalls                     int
	auditIssued, auditOtherEvents int
}

// loginStorm runs o.stormPeople people against a real `octogate serve` issuing sessions for
// four clusters (prod only for the sre team), o.stormConcurrency of them at a time, with the
// GitHub stand-in answering each call after o.githubLatency. Each person does what
// `octogate login` and then kubectl's credential plugin send: GET <issuer>/clusters with the
// GitHub token (the one lookup), then one token exchange per cluster listed, each request on a
// connection of its own (every plugin run is a process of its own), from an address of its own.
// It prints the figures and returns its RESULT line and its problems: a request that did not
// answer 200, more than one GitHub lookup for a person, an audit event missing.
func loginStorm(ctx context.Context, e *env, o options) (result string, problems []string) {
	fail := func(err error) (string, []string) { return "", []string{"login-storm: " + err.Error()} }
	bin, err := octogateBinary(ctx, e, o)
	if err != nil {
		return fail(err)
	}
	clustersFile := filepath.Join(e.dir, "storm-clusters.yaml")
	auditFile := filepath.Join(e.dir, "storm-audit.jsonl")
	if err := os.WriteFile(clustersFile, []byte(stormClustersFile), 0o600); err != nil {
		return fail(err)
	}
	people := make([]stormPerson, o.stormPeople)
	for i := range people {
		login := fmt.Sprintf("storm-%04d", i)
		u := githubUser(login, ghtoken.Mint(fmt.Sprintf("gho_storm_%06d", i)), 3)
		p := stormPerson{token: u.Tokens[0], addr: fmt.Sprintf("10.%d.%d.%d", 1+i>>16, i>>8&255, i&255), sre: i%stormSREEvery == 0}
		if p.sre {
			u.Teams = append(u.Teams, githubapi.Team{Org: org, Name: stormSRETeam})
		}
		e.gh.AddUser(u)
		people[i] = p
	}
	serve, err := startServe(ctx, e, bin, []string{
		"OCTOGATE_SESSION_ISSUER=" + stormIssuer,
		"OCTOGATE_SESSION_CLUSTERS_FILE=" + clustersFile,
		"OCTOGATE_AUDIT_FILE=" + auditFile,
		// Every person comes from an address of its own through the proxy in front of the
		// issuer; each causes one lookup, within the default rate per client address.
		"OCTOGATE_TRUSTED_PROXIES=127.0.0.1/32",
	})
	if err != nil {
		return fail(err)
	}
	defer serve.stop()
	e.gh.SetDelay(o.githubLatency)

	// The plugin presents no client certificate: the issuer's doors are public.
	clientTLS := &tls.Config{RootCAs: e.clientTLS.RootCAs, ServerName: e.clientTLS.ServerName}
	_, _, tokenPath := session.Routes(stormIssuer)
	clustersPath := session.ClustersRoute(stormIssuer)
	calls0 := map[string]int{}
	for _, p := range people {
		calls0[p.token] = e.gh.TokenCalls(p.token)
	}
	users0 := e.gh.Calls("/user")

	var f stormFigures
	f.statuses, f.shed = map[int]int{}, map[int]int{}
	var start, deadline time.Time
	var mu sync.Mutex
	record := func(fn func()) {
		mu.Lock()
		defer mu.Unlock()
		fn()
	}
	// One request, on a new connection unless keep is given (-login-storm-keepalive: a
	// person's requests on one connection); the latency includes the TLS handshake of a new
	// connection, as a plugin run's does. An answer the issuer sheds (503 saturated, 429
	// throttled, with Retry-After) is sent again after Retry-After, as the person would run the
	// command again, at most stormAttempts times; the latency is the last attempt's, the sheds
	// are counted.
	send := func(keep *client, req []byte) (status int, body []byte, lat time.Duration, err error) {
		for attempt := 1; ; attempt++ {
			c := keep
			if c == nil {
				c = newClient(serve.addr, clientTLS)
			}
			t0 := time.Now()
			var h http.Header
			if c.conn == nil {
				if err = c.dial(); err != nil {
					return 0, nil, 0, err
				}
			}
			_ = c.conn.SetDeadline(t0.Add(stormRequestTimeout))
			status, body, h, err = c.do(req)
			lat = time.Since(t0)
			body = bytes.Clone(body)
			if keep == nil {
				c.close()
			}
			retry, perr := strconv.Atoi(h.Get("Retry-After"))
			if err != nil || (status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests) || perr != nil ||
				attempt == stormAttempts || time.Now().After(deadline) {
				return status, body, lat, err
			}
			record(func() { f.shed[status]++ })
			time.Sleep(time.Duration(min(max(retry, 1), 5)) * time.Second)
		}
	}
	failed := func(what string, status int, body []byte, err error) {
		record(func() {
			f.failed++
			if status != 0 {
				f.statuses[status]++
			}
			if f.firstErr == "" {
				if err != nil {
					f.firstErr = what + ": " + err.Error()
				} else {
					f.firstErr = fmt.Sprintf("%s: HTTP %d %.300s", what, status, body)
				}
			}
		})
	}
	person := func(p stormPerson) {
		var keep *client
		if o.stormKeepAlive {
			keep = newClient(serve.addr, clientTLS)
			defer keep.close()
		}
		t0 := time.Now()
		status, body, lat, err := send(keep, getRequest(serve.addr, clustersPath, p.token, p.addr, o.stormKeepAlive))
		var list session.ClusterList
		if err == nil && status == http.StatusOK {
			err = json.Unmarshal(body, &list)
		}
		if err != nil || status != http.StatusOK {
			failed("GET /clusters", status, body, err)
			return
		}
		want := 3
		if p.sre {
			want = 4
		}
		if len(list.Clusters) != want {
			failed("GET /clusters", status, body, fmt.Errorf("%d clusters listed, want %d", len(list.Clusters), want))
			return
		}
		record(func() { f.listed++; f.listLat = append(f.listLat, lat) })
		for _, c := range list.Clusters {
			if time.Now().After(deadline) {
				return // counted as not logged in: -login-storm-timeout bounds the storm
			}
			form := url.Values{
				"grant_type":         {session.GrantTypeTokenExchange},
				"subject_token":      {p.token},
				"subject_token_type": {session.TokenTypeAccessToken},
				"audience":           {c.Name},
			}
			status, body, lat, err := send(keep, formRequest(serve.addr, tokenPath, form, p.addr, o.stormKeepAlive))
			if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte(`"access_token":"`)) {
				failed("exchange for "+c.Name, status, body, err)
				return
			}
			record(func() { f.exchanges++; f.exchangeLat = append(f.exchangeLat, lat) })
		}
		record(func() { f.login = append(f.login, time.Since(t0)) })
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := pidCPU(serve.pid)
	start = time.Now()
	deadline = start.Add(o.stormTimeout)
	for range min(o.stormConcurrency, len(people)) {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= len(people) {
					return
				}
				person(people[i])
			}
		})
	}
	wg.Wait()
	f.elapsed = time.Since(start)
	f.issuerCPU = pidCPU(serve.pid) - cpu0
	f.userCalls = e.gh.Calls("/user") - users0
	f.callsMin = int(^uint(0) >> 1)
	for _, p := range people {
		c := e.gh.TokenCalls(p.token) - calls0[p.token]
		f.callsSum += c
		f.callsMin, f.callsMax = min(f.callsMin, c), max(f.callsMax, c)
	}
	serve.stop() // flushes the audit file
	f.auditIssued, f.auditOtherEvents = countAudit(auditFile)
	return f.report(o)
}

// report prints the storm's figures and returns its RESULT line and problems.
func (f *stormFigures) report(o options) (string, []string) {
	n := o.stormPeople
	slices.Sort(f.exchangeLat)
	slices.Sort(f.listLat)
	slices.Sort(f.login)
	rate := float64(f.exchanges) / f.elapsed.Seconds()
	cpuPer := 0.0
	if f.exchanges+f.listed > 0 {
		cpuPer = float64(f.issuerCPU) / float64(f.exchanges+f.listed) / float64(time.Microsecond)
	}
	calls := float64(f.callsSum) / float64(n)
	lookups := float64(f.userCalls) / float64(n)
	conns := "a new TLS connection per request"
	if o.stormKeepAlive {
		conns = "one kept-alive TLS connection per person"
	}
	fmt.Printf("\nlogin storm: %d people (one in %d in the sre team: 4 clusters, else 3), %d at a time, GitHub latency %v, each: GET /clusters then one exchange per cluster, %s\n",
		n, stormSREEvery, o.stormConcurrency, o.githubLatency, conns)
	fmt.Printf("login storm: %d exchanges in %v = %.0f exchanges/s; exchange p50 %.1f ms p99 %.1f ms; GET /clusters p50 %.1f ms p99 %.1f ms; whole login p99 %.1f ms (with the waits of %d shed answers %v sent again after Retry-After); issuer CPU %.0f us per request\n",
		f.exchanges, f.elapsed.Round(time.Millisecond), rate, percentile(f.exchangeLat, 0.5), percentile(f.exchangeLat, 0.99),
		percentile(f.listLat, 0.5), percentile(f.listLat, 0.99), percentile(f.login, 0.99), sum(f.shed), f.shed, cpuPer)
	fmt.Printf("login storm: GitHub calls per person min %d max %d mean %.2f (one lookup is %d calls: GET /user, GET /user/memberships/orgs/%s, GET /user/teams); GET /user per person %.3f; audit: %d session.issued, %d other events; %d failed %v\n",
		f.callsMin, f.callsMax, calls, callSet, org, lookups, f.auditIssued, f.auditOtherEvents, f.failed, f.statuses)
	result := fmt.Sprintf("RESULT name=login-storm people=%d concurrency=%d keepalive=%t github_latency_ms=%d exchanges=%d exchanges_per_s=%.0f p50_ms=%.1f p99_ms=%.1f clusters_p99_ms=%.1f login_p99_ms=%.1f github_calls_per_person=%.2f github_lookups_per_person=%.2f issuer_cpu_us=%.0f shed=%d failed=%d",
		n, o.stormConcurrency, o.stormKeepAlive, o.githubLatency.Milliseconds(), f.exchanges, rate, percentile(f.exchangeLat, 0.5), percentile(f.exchangeLat, 0.99),
		percentile(f.listLat, 0.99), percentile(f.login, 0.99), calls, lookups, cpuPer, sum(f.shed), f.failed)
	var problems []string
	if f.failed > 0 {
		problems = append(problems, fmt.Sprintf("login-storm: %d failed requests (%v), first: %s", f.failed, f.statuses, f.firstErr))
	}
	if len(f.login) < n {
		problems = append(problems, fmt.Sprintf("login-storm: %d of %d people logged in within %v", len(f.login), n, o.stormTimeout))
	}
	if f.callsMax > callSet || f.userCalls > n {
		problems = append(problems, fmt.Sprintf("login-storm: GitHub calls per person up to %d (want at most one lookup, %d calls), GET /user %d for %d people",
			f.callsMax, callSet, f.userCalls, n))
	}
	if f.auditIssued != f.exchanges {
		problems = append(problems, fmt.Sprintf("login-storm: %d session.issued audit events for %d exchanges", f.auditIssued, f.exchanges))
	}
	return result, problems
}

// countAudit counts the session.issued events of an audit file and the other events.
func countAudit(path string) (issued, other int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Event string `json:"event"`
		}
		switch {
		case line == "":
		case json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "session.issued":
			issued++
		default:
			other++
		}
	}
	return issued, other
}

// getRequest encodes GET path with the token as a bearer token, from client (X-Forwarded-For),
// asking the server to close the connection unless keep.
func getRequest(host, path, token, client string, keep bool) []byte {
	return fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: octogate\r\nAccept: application/json\r\n"+
		"Authorization: Bearer %s\r\nX-Forwarded-For: %s\r\n%s\r\n", path, host, token, client, closeHeader(keep))
}

// formRequest encodes a form POST as the credential plugin sends it, from client.
func formRequest(host, path string, form url.Values, client string, keep bool) []byte {
	body := form.Encode()
	return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: octogate\r\nContent-Type: %s\r\nContent-Length: %d\r\n"+
		"X-Forwarded-For: %s\r\n%s\r\n%s", path, host, session.FormMediaType, len(body), client, closeHeader(keep), body)
}

func closeHeader(keep bool) string {
	if keep {
		return ""
	}
	return "Connection: close\r\n"
}

func sum(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
