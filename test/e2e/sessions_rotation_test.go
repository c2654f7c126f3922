package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/session"
)

// rotateUnderLoad: while kubectl loops run on both clusters (alice with her session
// kubeconfig, whose plugin exchanges again once 4/5 of a session's minute has passed, and
// with a session minted before the rotations as a bearer token), `octogate session keys
// rotate` promotes the issuer's pending key twice. No kubectl run fails on either cluster;
// sessions minted after each rotation carry the new kid and work on both; a session signed by
// a key never published gets bad_signature at cluster-a's octogate and 401 on cluster-b.
//
// The pending key's Octogate-Created header is moved back by DefaultPublishFor before each
// rotation, as if it had been published that long; what makes that true for the verifiers
// here: cluster-a's octogate is the issuer and verifies with the file in process, and
// cluster-b's kube-apiserver (go-oidc v2's RemoteKeySet, JWKS max-age=60) fetches the set
// again on an unknown kid once its last fetch is more than 30 s old. Its last fetch is its
// first session of the first key (subtest 1), more than a session TTL before this subtest:
// the first key holds its cache; the second, added by the first rotation, is fetched on its
// first session. The forged tokens, whose unknown kid would make it fetch, come last.
func (s *sessionsEnv) rotateUnderLoad(t *testing.T) {
	const (
		margin   = 8 * time.Second // a kubectl run on a loaded machine
		maxCalls = 400             // per loop
	)
	var loops []struct {
		name string
		k    cluster.Kubectl
	}
	add := func(name string, k cluster.Kubectl) {
		loops = append(loops, struct {
			name string
			k    cluster.Kubectl
		}{name, k})
	}
	freshA := s.sessionKubectl(t, "rot-alice-a", cluster.AliceToken, s.a.APIServer, "cluster-a")
	freshB := s.sessionKubectl(t, "rot-alice-b", cluster.AliceToken, s.b, "cluster-b")
	oldA, expA := s.liveSession(t, freshA)
	oldB, expB := s.liveSession(t, freshB)
	first := sessionKid(t, oldA)
	add("cluster-a fresh sessions", freshA)
	add("cluster-b fresh sessions", freshB)
	add("cluster-a session of the first key", s.tokenKubectl(t, "rot-old-a", oldA, s.a.APIServer))
	add("cluster-b session of the first key", s.tokenKubectl(t, "rot-old-b", oldB, s.b))

	var (
		mu       sync.Mutex
		failures []string
		calls    = make([]atomic.Int64, len(loops))
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	exp := expA
	if expB.Before(exp) {
		exp = expB
	}
	deadline := exp.Add(-margin)
	// The loops' kubectl runs write into s.work (the plugin's session cache): whatever way
	// this test ends, they stop and are waited for before it returns and s.work is removed.
	stopLoops := sync.OnceFunc(func() { close(stop) })
	defer func() { stopLoops(); wg.Wait() }()
	for i, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// cluster-b grants alice nothing: /version is every authenticated user's
			// (system:public-info-viewer), so a failure there is authentication's.
			args := [][]string{{"get", "--raw", "/version"}, {"auth", "whoami"}}
			if strings.HasPrefix(l.name, "cluster-a") {
				args[0] = []string{"get", "namespaces"}
			}
			for n := 0; n < maxCalls && time.Now().Before(deadline); n++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := l.k.Run(context.Background(), nil, args[n%2]...)
				calls[i].Add(1)
				if err != nil || res.ExitCode != 0 {
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("%s: %v\n%s", l.name, err, res))
					}
					mu.Unlock()
				}
			}
		}()
	}
	total := func() int64 {
		var n int64
		for i := range calls {
			n += calls[i].Load()
		}
		return n
	}
	waitCalls := func(n int64) {
		t.Helper()
		target := total() + n
		waitFor(t, 60*time.Second, fmt.Sprintf("%d more kubectl runs", n), func() (bool, error) {
			if total() < target {
				return false, errNotYet
			}
			return true, nil
		})
	}
	rotate := func() (string, time.Duration) {
		t.Helper()
		backdatePending(t, s.keyFile)
		start := time.Now()
		out, err := exec.Command(s.e.cluster.Config.OctogateBinary, "session", "keys", "rotate", "--file", s.keyFile).CombinedOutput()
		if err != nil {
			t.Fatalf("octogate session keys rotate: %v\n%s", err, out)
		}
		t.Logf("rotate: %s", strings.TrimSpace(string(out)))
		k, err := session.LoadKeys(s.keyFile)
		if err != nil {
			t.Fatal(err)
		}
		// Sessions minted after the rotation carry the new kid and work on both clusters.
		for _, k2 := range []struct {
			plugin cluster.Kubectl
			server *cluster.APIServer
			name   string
		}{{freshA, s.a.APIServer, "a"}, {freshB, s.b, "b"}} {
			tok := waitFor(t, 15*time.Second, "a session of the new key "+k.KeyID(), func() (string, error) {
				s.forgetSessions(t, k2.plugin) // the plugin reuses a session for 4/5 of its TTL
				tok, _ := s.liveSession(t, k2.plugin)
				if kid := sessionKid(t, tok); kid != k.KeyID() {
					return "", fmt.Errorf("kid %s", kid)
				}
				return tok, nil
			})
			if u := mustWhoami(t, s.tokenKubectl(t, "rot-new-"+k2.name+"-"+k.KeyID()[:8], tok, k2.server)).Status.UserInfo; u.Username != cluster.AliceUser {
				t.Errorf("a session of the new key on cluster-%s: %+v", k2.name, u)
			}
		}
		return k.KeyID(), time.Since(start)
	}

	waitCalls(8)
	second, took1 := rotate()
	if second == first {
		t.Fatalf("the first rotation did not promote the pending key: still %s", first)
	}
	waitCalls(8)
	third, took2 := rotate()
	if third == second || third == first {
		t.Fatalf("the second rotation did not promote a new key: %s", third)
	}
	waitCalls(8)
	stopLoops()
	wg.Wait()

	// Sessions of the first key, now retired, still work until their exp.
	for _, k := range []cluster.Kubectl{loops[2].k, loops[3].k} {
		mustWhoami(t, k)
	}
	t.Logf("the first key's sessions worked on both clusters after both rotations, %s before their exp", time.Until(exp).Round(time.Second))

	// A session signed by a key never published, with claims the issuer would sign.
	for _, c := range []struct {
		old    string
		server *cluster.APIServer
		name   string
	}{{oldA, s.a.APIServer, "a"}, {oldB, s.b, "b"}} {
		for _, kid := range []string{"", third} {
			forged := forgeSession(t, c.old, kid)
			if c.name == "a" {
				if msg := s.reviewError(t, forged); !strings.HasPrefix(msg, "[bad_signature] ") {
					t.Errorf("cluster-a's octogate on a session of an unpublished key (kid %q): %q, want [bad_signature]", kid, msg)
				}
			}
			notLoggedInWith(t, s.tokenKubectl(t, "rot-forged-"+c.name+kid[:min(8, len(kid))], forged, c.server), "a session of an unpublished key on cluster-"+c.name)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("%d kubectl runs failed during the rotations, first ones:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	var counts []string
	for i, l := range loops {
		counts = append(counts, fmt.Sprintf("%s %d", l.name, calls[i].Load()))
	}
	t.Logf("MEASURED: kubectl runs during two key rotations: %s; failed: %d; rotation 1 -> sessions of the new key on both clusters %s, rotation 2 %s",
		strings.Join(counts, ", "), len(failures), took1.Round(time.Millisecond), took2.Round(time.Millisecond))
}

// backdatePending moves the Octogate-Created header of the key file's pending keys back by
// session.DefaultPublishFor, replacing the file by rename.
func backdatePending(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := session.ParseKeyFile(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries[1:] {
		if entries[i+1].Retired.IsZero() {
			entries[i+1].Created = entries[i+1].Created.Add(-session.DefaultPublishFor)
		}
	}
	out, err := session.EncodeKeyFile(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// sessionKid is the kid of a session's JWS header.
func sessionKid(t *testing.T, token string) string {
	t.Helper()
	head, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h.Kid
}

// forgeSession signs the claims of session with a new P-256 key, never published, under kid
// (empty: the new key's own RFC 7638 thumbprint).
func forgeSession(t *testing.T, session, kid string) string {
	t.Helper()
	parts := strings.Split(session, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if kid == "" {
		tp, err := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		kid = base64.RawURLEncoding.EncodeToString(tp)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
