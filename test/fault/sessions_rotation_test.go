package fault

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/session"
)

// TestSessionKeyRotationUnderLoad: while workers exchange sessions and review them (new and
// old ones) at the issuer, which verifies in process, and at a second server that verifies
// with the issuer's JWKS, `octogate session keys rotate` runs twice on the issuer's key
// file. Every review of every session succeeds, and the sessions are signed by the new key
// within seconds of each rotation, without a restart.
func TestSessionKeyRotationUnderLoad(t *testing.T) {
	gh := newGitHub(t)
	certs := certsInit(t)
	addr := freeAddr(t)
	issuer := "https://" + addr
	keyFile := filepath.Join(t.TempDir(), "session-keys.pem")
	// A file whose pending key has been published for PublishFor already.
	writeKeys(t, keyFile, nil, time.Now().Add(-session.DefaultPublishFor))
	a := startOctogate(t, gh, certs,
		"OCTOGATE_LISTEN="+addr,
		"OCTOGATE_SESSION_ISSUER="+issuer,
		"OCTOGATE_SESSION_AUDIENCES=cluster-a,cluster-b",
		"OCTOGATE_SESSION_KEY_FILE="+keyFile,
		"OCTOGATE_SESSION_TRUST_ISSUER="+issuer,
		"OCTOGATE_SESSION_AUDIENCE=cluster-a",
	)
	b := startOctogate(t, gh, certs,
		"OCTOGATE_SESSION_TRUST_ISSUER="+issuer,
		"OCTOGATE_SESSION_TRUST_CA_FILE="+filepath.Join(certs, "ca.crt"),
		"OCTOGATE_SESSION_AUDIENCE=cluster-b",
	)
	public := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.caPool}}}
	defer public.CloseIdleConnections()
	exchange := func(audience string) (string, error) {
		form := url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {aliceToken},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"audience":           {audience},
		}
		res, err := public.Post(issuer+"/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		if err != nil {
			return "", err
		}
		defer func() { _ = res.Body.Close() }()
		var m struct {
			AccessToken string `json:"access_token"`
		}
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			return "", fmt.Errorf("exchange for %s: HTTP %d: %w", audience, res.StatusCode, err)
		}
		if res.StatusCode != 200 || m.AccessToken == "" {
			return "", fmt.Errorf("exchange for %s: HTTP %d without a session", audience, res.StatusCode)
		}
		return m.AccessToken, nil
	}

	var (
		mu       sync.Mutex
		old      = map[string][2]string{} // kid -> a session for cluster-a and one for cluster-b
		lastKid  atomic.Value
		reviews  atomic.Int64
		failures []string
	)
	lastKid.Store("")
	fail := func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(f, args...))
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Whatever way this test ends, the workers stop and are waited for before the servers
	// and the temporary directories they use are removed.
	defer func() { stop(); wg.Wait() }()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				sa, err := exchange("cluster-a")
				if err != nil {
					fail("worker %d: %v", w, err)
					continue
				}
				sb, err := exchange("cluster-b")
				if err != nil {
					fail("worker %d: %v", w, err)
					continue
				}
				kid := sessionKid(t, sa)
				lastKid.Store(kid)
				mu.Lock()
				if _, ok := old[kid]; !ok {
					old[kid] = [2]string{sa, sb}
				}
				tokens := [][2]string{{sa, sb}}
				for _, s := range old {
					tokens = append(tokens, s)
				}
				mu.Unlock()
				for _, s := range tokens {
					for j, o := range []*octogate{a, b} {
						r, err := o.review(o.client, s[j])
						reviews.Add(1)
						if err != nil || r.code != 200 || !r.Status.Authenticated {
							fail("worker %d: review at cluster-%c of a session of key %s: %v %v", w, 'a'+j, sessionKid(t, s[j]), r, err)
						}
					}
				}
			}
		}()
	}
	waitReviews := func(n int64) {
		t.Helper()
		target := reviews.Load() + n
		eventually(t, 60*time.Second, fmt.Sprintf("%d more reviews", n), func() bool { return reviews.Load() >= target })
	}
	rotate := func() string {
		t.Helper()
		out, err := exec.Command(octogateBin, "session", "keys", "rotate", "--file", keyFile).CombinedOutput()
		if err != nil {
			t.Fatalf("octogate session keys rotate: %v\n%s", err, out)
		}
		t.Logf("rotate: %s", strings.TrimSpace(string(out)))
		k, err := session.LoadKeys(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return k.KeyID()
	}

	waitReviews(100)
	first := lastKid.Load().(string)
	signer := rotate()
	if signer == first {
		t.Fatalf("the rotation did not promote the pending key: still %s", signer)
	}
	rotated := time.Now()
	eventually(t, 15*time.Second, "sessions signed by the new key", func() bool { return lastKid.Load() == signer })
	t.Logf("MEASURED: sessions signed by the new key %v after the rotation", time.Since(rotated).Round(time.Millisecond))
	waitReviews(100)

	// As if PublishFor had passed: the key the rotation added is published; the verifiers
	// here fetch the JWKS on an unknown key at most every 10 s, well within PublishFor.
	entries, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, keyFile, entries, time.Now().Add(-session.DefaultPublishFor))
	time.Sleep(session.MinRefreshInterval) // the second server's least interval between two fetches
	second := rotate()
	if second == signer {
		t.Fatalf("the second rotation did not promote the pending key: still %s", second)
	}
	eventually(t, 15*time.Second, "sessions signed by the second new key", func() bool { return lastKid.Load() == second })
	waitReviews(200)
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(old) < 3 {
		t.Errorf("sessions of %d keys were reviewed, want 3", len(old))
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d reviews failed across two rotations, first ones:\n%s", len(failures), reviews.Load(), strings.Join(failures, "\n"))
	}
	t.Logf("MEASURED: %d reviews of sessions of %d keys across two rotations, none failed", reviews.Load(), len(old))
}

// writeKeys writes the key file of pemBytes (nil: a new file) with its pending keys created
// at created, by rename as a Secret volume or `session keys rotate` replaces it.
func writeKeys(t *testing.T, path string, pemBytes []byte, created time.Time) {
	t.Helper()
	entries, err := session.ParseKeyFile(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		if entries, _, err = session.Rotate(nil, session.RotateOptions{Now: created}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range entries[1:] {
		if entries[i+1].Retired.IsZero() {
			entries[i+1].Created = created
		}
	}
	b, err := session.EncodeKeyFile(entries)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// sessionKid is the kid of a session's JWS header.
func sessionKid(t *testing.T, token string) string {
	head, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Error(err)
		return ""
	}
	var h struct {
		Kid string `json:"kid"`
	}
	_ = json.Unmarshal(b, &h)
	return h.Kid
}
