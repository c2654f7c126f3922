package githubapi

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"
)

// Server is a running (or stopped) GitHub stand-in. Every method is safe for concurrent use.
type Server struct {
	mu sync.Mutex

	// state, guarded by mu
	users      map[string]*user // by lowercased login
	tokens     map[string]*token
	orgs       map[string]*org // by lowercased login
	nextID     int64
	delay      time.Duration
	faults     []*Fault
	rateLimits map[string]rateLimit // by token; "" = every token
	calls      map[string]int       // by route template
	tokenCalls map[string]int       // by token
	rateUsed   map[string]int       // by token: rate-limit units charged (X-RateLimit-Used)
	notMod     map[string]int       // by token: 304 Not Modified answers
	device     *DeviceFlow
	codes      map[string]*deviceCode // by device code
	refreshes  map[string]*refreshToken
	authCodes  map[string]*authCode // web application flow codes
	grants     map[string]int       // token endpoint requests by grant_type
	lockouts   map[string]time.Time // by lowercased login: failed login limit until

	// lifecycle, guarded by mu
	hts      *httptest.Server
	client   *http.Client // trusts cert; kept across restarts
	cert     []byte       // PEM of the serving certificate (TLS only)
	addr     string
	tls      bool
	stopping chan struct{} // closed while stopping, to cut injected delays short
}

type user struct {
	login       string
	id          int64
	name        string
	memberships map[string]Membership // by lowercased org
	teams       []Team
}

type token struct {
	login   string
	sso     map[string]bool // lowercased orgs whose SAML SSO authorized this token
	expires time.Time       // zero: never (OAuth app tokens, fixture tokens)
	// scopes of a classic or OAuth token; nil means read:org, read:user.
	scopes []string
	// a fine-grained PAT: it reaches only owner's resources, with perms.
	fineGrained bool
	owner       string
	perms       map[string]string
}

type org struct {
	login string
	id    int64
	sso   bool
}

type rateLimit struct {
	reset      time.Time     // primary: 403 with X-RateLimit-Remaining: 0 until reset
	retryAfter time.Duration // secondary: 429 with Retry-After
	until      time.Time
}

// Fault makes matching API requests fail until cleared (or Count times).
type Fault struct {
	// Endpoint is a route template such as "/user", "/user/teams" or
	// "/user/memberships/orgs/{org}"; empty matches every REST route.
	Endpoint string
	// Status is the HTTP status answered, e.g. 500, 502, 503 or 401.
	Status int
	// Message is the JSON "message"; empty means the status text.
	Message string
	// Header is added to the answer (Retry-After, X-GitHub-SSO, X-RateLimit-Remaining...).
	Header http.Header
	// Count limits the fault to this many requests; zero means until ClearFaults.
	Count int
}

// New starts a stand-in over plain HTTP on 127.0.0.1 with no users.
func New() *Server { return start(false) }

// NewTLS starts a stand-in over HTTPS on 127.0.0.1 with httptest's certificate for
// 127.0.0.1 and example.com; see Client, CertPEM and WriteCAFile.
func NewTLS() *Server { return start(true) }

func newServer() *Server {
	return &Server{
		users:      map[string]*user{},
		tokens:     map[string]*token{},
		orgs:       map[string]*org{},
		nextID:     1000,
		rateLimits: map[string]rateLimit{},
		calls:      map[string]int{},
		tokenCalls: map[string]int{},
		rateUsed:   map[string]int{},
		notMod:     map[string]int{},
		codes:      map[string]*deviceCode{},
		refreshes:  map[string]*refreshToken{},
		authCodes:  map[string]*authCode{},
		grants:     map[string]int{},
		lockouts:   map[string]time.Time{},
		stopping:   make(chan struct{}),
	}
}

func start(tls bool) *Server {
	s := newServer()
	s.tls = tls
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.startLocked("127.0.0.1:0"); err != nil {
		panic(fmt.Sprintf("githubapi: %v", err))
	}
	return s
}

func (s *Server) startLocked(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hts := httptest.NewUnstartedServer(s.Handler())
	_ = hts.Listener.Close()
	hts.Listener = l
	// Handshakes cut by Stop or refused by untrusting clients are expected in tests.
	hts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if s.tls {
		hts.StartTLS()
	} else {
		hts.Start()
	}
	s.hts = hts
	s.addr = l.Addr().String()
	if s.client == nil {
		s.client = hts.Client()
		if c := hts.Certificate(); c != nil {
			s.cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
	}
	s.stopping = make(chan struct{})
	return nil
}

// URL is the REST base URL as for api.github.com, e.g. "http://127.0.0.1:41234/". It stays
// the same across Stop and Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.addr + "/"
}

// EnterpriseURL is the REST base URL as for GitHub Enterprise Server: URL() + "api/v3/".
func (s *Server) EnterpriseURL() string { return s.URL() + "api/v3/" }

// Client is an *http.Client that trusts the server's certificate (NewTLS) and does not share
// connections with other clients.
func (s *Server) Client() *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// CertPEM is the PEM-encoded serving certificate (self-signed, so also its CA) of a NewTLS
// server; nil for plain HTTP.
func (s *Server) CertPEM() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert
}

// CertPool is a pool holding CertPEM.
func (s *Server) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(s.CertPEM())
	return p
}

// WriteCAFile writes CertPEM to path (mode 0600), for a client's CA bundle option.
func (s *Server) WriteCAFile(path string) error {
	b := s.CertPEM()
	if b == nil {
		return errors.New("githubapi: not a TLS server")
	}
	return os.WriteFile(path, b, 0o600)
}

// Stop closes the listener and every connection, as if GitHub were unreachable; requests
// waiting on an injected delay end at once. State (users, counters) is kept. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	hts := s.hts
	s.hts = nil
	if hts != nil {
		close(s.stopping)
	}
	s.mu.Unlock()
	if hts != nil {
		hts.CloseClientConnections()
		hts.Close()
	}
}

// Start listens again on the address of the first start. It fails if that port was taken in
// between. Starting a running server does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hts != nil {
		return nil
	}
	var err error
	for range 50 { // the old socket may linger for a moment after Close
		if err = s.startLocked(s.addr); err == nil {
			return nil
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		s.mu.Lock()
	}
	return fmt.Errorf("githubapi: restart on %s: %w", s.addr, err)
}

// Close stops the server for good.
func (s *Server) Close() { s.Stop() }

// Serve runs a stand-in loaded with fixture on l until ctx is done, then shuts it down
// (waiting up to 5 s for requests in flight). It returns nil after a shutdown caused by ctx,
// and the fixture's or the listener's error otherwise. This is what the demo runs.
func Serve(ctx context.Context, l net.Listener, fixture Fixture) error {
	s := newServer()
	if err := s.Load(fixture); err != nil {
		return err
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc //nolint:errcheck // Serve's error once Shutdown has begun is http.ErrServerClosed
	return err
}

// Load adds the fixture's users, tokens, SSO orgs and device flow to the server.
func (s *Server) Load(f Fixture) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("githubapi fixture: %w", err)
	}
	for _, u := range f.Users {
		s.AddUser(u)
		for _, o := range u.SSOAuthorized {
			for _, t := range u.Tokens {
				s.AuthorizeSSO(t, o)
			}
		}
	}
	for _, o := range f.Orgs {
		s.AddOrg(o.Login, o.ID)
	}
	for _, o := range f.SSOOrgs {
		s.EnforceSSO(o)
	}
	if f.Device != nil {
		s.SetDeviceFlow(*f.Device)
	}
	return nil
}

// AddUser adds or replaces a user with its tokens, memberships and teams.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(u.Login)
	if old := s.users[key]; old != nil && u.ID == 0 {
		u.ID = old.id
	}
	if u.ID == 0 {
		s.nextID++
		u.ID = s.nextID
	}
	nu := &user{login: u.Login, id: u.ID, name: u.Name, memberships: map[string]Membership{}}
	for _, m := range u.Memberships {
		s.orgLocked(m.Org)
		nu.memberships[strings.ToLower(m.Org)] = m
	}
	for _, t := range u.Teams {
		s.orgLocked(t.Org)
		if t.Slug == "" {
			t.Slug = Slug(t.Name)
		}
		if t.ID == 0 {
			s.nextID++
			t.ID = s.nextID
		}
		nu.teams = append(nu.teams, t)
	}
	s.users[key] = nu
	for _, t := range u.Tokens {
		s.tokens[t] = &token{login: u.Login, sso: map[string]bool{}}
	}
}

// RemoveUser deletes a user; its tokens answer 401 from now on.
func (s *Server) RemoveUser(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.users, strings.ToLower(login))
	for v, t := range s.tokens {
		if strings.EqualFold(t.login, login) {
			delete(s.tokens, v)
		}
	}
}

// AddToken lets tok authenticate as login (which must exist).
func (s *Server) AddToken(login, tok string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users[strings.ToLower(login)] == nil {
		return fmt.Errorf("githubapi: no user %q", login)
	}
	s.tokens[tok] = &token{login: login, sso: map[string]bool{}}
	return nil
}

// RevokeToken makes tok answer 401 Bad credentials from now on.
func (s *Server) RevokeToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
}

// SetMembership sets login's membership of org; state "" removes it (404 from now on).
func (s *Server) SetMembership(login, org, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[strings.ToLower(login)]
	if u == nil {
		return fmt.Errorf("githubapi: no user %q", login)
	}
	if state == "" {
		delete(u.memberships, strings.ToLower(org))
		return nil
	}
	s.orgLocked(org)
	u.memberships[strings.ToLower(org)] = Membership{Org: org, State: state}
	return nil
}

// EnforceSSO makes org require SAML SSO authorization of each token.
func (s *Server) EnforceSSO(orgLogin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orgLocked(orgLogin).sso = true
}

// AuthorizeSSO authorizes tok for org's SAML SSO.
func (s *Server) AuthorizeSSO(tok, orgLogin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tokens[tok]; t != nil {
		t.sso[strings.ToLower(orgLogin)] = true
	}
}

// SetDelay delays every REST and device flow response by d (0 = none).
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// InjectFault adds a failure; see Fault.
func (s *Server) InjectFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every injected failure and rate limit.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.rateLimits = map[string]rateLimit{}
}

// RateLimit answers requests with tok ("" = every token) with GitHub's primary rate limit
// error until reset: 403, X-RateLimit-Remaining: 0, X-RateLimit-Reset: reset (Unix seconds).
func (s *Server) RateLimit(tok string, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimits[tok] = rateLimit{reset: reset, until: reset}
}

// SecondaryRateLimit answers requests with tok ("" = every token) with 429 and
// Retry-After: retryAfter (whole seconds) for retryAfter from now.
func (s *Server) SecondaryRateLimit(tok string, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimits[tok] = rateLimit{retryAfter: retryAfter, until: time.Now().Add(retryAfter)}
}

// Calls is the number of requests received on a route template, e.g. "/user",
// "/user/teams", "/user/memberships/orgs/{org}", "/login/device/code",
// "/login/oauth/access_token" (both the root and the /api/v3/ forms).
func (s *Server) Calls(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[endpoint]
}

// TokenCalls is the number of REST requests received with tok.
func (s *Server) TokenCalls(tok string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenCalls[tok]
}

// ResetCalls sets every counter to zero.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[string]int{}
	s.tokenCalls = map[string]int{}
	s.grants = map[string]int{}
	s.rateUsed = map[string]int{}
	s.notMod = map[string]int{}
}

func (s *Server) orgLocked(login string) *org {
	key := strings.ToLower(login)
	o := s.orgs[key]
	if o == nil {
		s.nextID++
		o = &org{login: login, id: s.nextID}
		s.orgs[key] = o
	}
	return o
}
