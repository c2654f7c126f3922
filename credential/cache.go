package credential

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrCorruptCache is wrapped when the token cache file exists but cannot be used. The plugin
// writes the file atomically (temporary file + rename), so a corrupt file was changed by
// something else; rather than overwrite what it does not understand, the plugin stops and
// names the file and the exact `octogate credential --forget ...` command (with the same
// --client-id and --github-url) that deletes it.
var ErrCorruptCache = errors.New("token cache is corrupt")

// earlyRefresh is how long before a known expiry a cached token stops being handed out, so
// that kubectl does not send a token that expires in flight.
const earlyRefresh = time.Minute

// cacheFile is the JSON document in the cache file.
type cacheFile struct {
	GitHubURL   string    `json:"githubURL"`
	ClientID    string    `json:"clientID"`
	AccessToken string    `json:"accessToken"`
	TokenType   string    `json:"tokenType,omitempty"`
	Expiry      time.Time `json:"expiry,omitzero"`
	// RefreshToken and RefreshExpiry come with a GitHub App's expiring user access tokens.
	RefreshToken  string    `json:"refreshToken,omitempty"`
	RefreshExpiry time.Time `json:"refreshExpiry,omitzero"`
	// CheckedAt is when GitHub last accepted AccessToken (issued it, or answered GET /user).
	CheckedAt time.Time `json:"checkedAt,omitzero"`
	// Grant is the subjectKey of the token the login issued, kept through every refresh:
	// what the sessions exchanged for this grant's tokens are cached under (subject).
	Grant string `json:"grant,omitempty"`
}

// subject is whose sessions c's token gets: Grant, or, in a cache written before Grant was,
// the subjectKey of its token.
func (c *cacheFile) subject() string {
	if c.Grant != "" {
		return c.Grant
	}
	return subjectKey(c.AccessToken)
}

// cachePath is dir/<hex SHA-256 of "githubURL\nclientID">.json: one file per GitHub and OAuth
// app, with a name that reveals neither.
func cachePath(dir, githubURL, clientID string) string {
	sum := sha256.Sum256([]byte(githubURL + "\n" + clientID))
	return filepath.Join(dir, hex.EncodeToString(sum[:])+".json")
}

// lockPath is the lock file beside a cache file: the same name with .lock for .json. The
// cache directory is per user, the name per GitHub host and client id.
func lockPath(cache string) string {
	return strings.TrimSuffix(cache, ".json") + ".lock"
}

// readCache returns the cached token, nil when there is none, or an error wrapping
// ErrCorruptCache that ends with forget, the command that deletes the file. Errors never
// quote the file's content.
func readCache(path, forget string, uid int) (*cacheFile, error) {
	if err := checkPrivate(path, uid); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read token cache: %w", err)
	}
	var c cacheFile
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON; to log in again, delete it or run: %s", ErrCorruptCache, path, forget)
	}
	if c.AccessToken == "" {
		return nil, fmt.Errorf("%w: %s has no accessToken; to log in again, delete it or run: %s", ErrCorruptCache, path, forget)
	}
	return &c, nil
}

func (c *cacheFile) usable(now time.Time) bool {
	return c.Expiry.IsZero() || c.Expiry.After(now.Add(earlyRefresh))
}

// refreshable reports whether the refresh token may still work.
func (c *cacheFile) refreshable(now time.Time) bool {
	return c.RefreshToken != "" && (c.RefreshExpiry.IsZero() || c.RefreshExpiry.After(now))
}

// recheckDue reports whether GitHub last accepted the token longer than every ago; every <= 0
// never rechecks.
func (c *cacheFile) recheckDue(now time.Time, every time.Duration) bool {
	return every > 0 && !c.CheckedAt.After(now.Add(-every))
}

func (c *cacheFile) token(now time.Time, src Source) Token {
	return Token{Value: c.AccessToken, Expiry: expiryOr(c.Expiry, now), Source: src}
}

// writeCache writes c (a cacheFile or a sessionCache) as JSON to path with mode 0600 (directory 0700), atomically: a reader sees the
// old file or the new one, never a partial one.
func writeCache(path string, c any) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".token-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		return errors.Join(err, f.Close())
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
