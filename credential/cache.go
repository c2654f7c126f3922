package credential

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
}

// cachePath is dir/<hex SHA-256 of "githubURL\nclientID">.json: one file per GitHub and OAuth
// app, with a name that reveals neither.
func cachePath(dir, githubURL, clientID string) string {
	sum := sha256.Sum256([]byte(githubURL + "\n" + clientID))
	return filepath.Join(dir, hex.EncodeToString(sum[:])+".json")
}

// readCache returns the cached token, nil when there is none, or an error wrapping
// ErrCorruptCache that ends with forget, the command that deletes the file. Errors never
// quote the file's content.
func readCache(path, forget string) (*cacheFile, error) {
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

func (c *cacheFile) token(now time.Time, src Source) Token {
	return Token{Value: c.AccessToken, Expiry: expiryOr(c.Expiry, now), Source: src}
}

// writeCache writes c to path with mode 0600 (directory 0700), atomically: a reader sees the
// old file or the new one, never a partial one.
func writeCache(path string, c cacheFile) error {
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
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
