package githubwebhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Removals records the member_removed payloads that were acted on, so that one is acted on
// once, whatever X-GitHub-Delivery it comes with: the signature covers the body and not that
// header, so an old signed body can be sent again under a new delivery id.
type Removals interface {
	// Claim records digest (PayloadDigest) and reports whether it was new; false means the
	// payload was acted on before. An error means it is unknown (act on nothing).
	Claim(ctx context.Context, digest string) (bool, error)
	// Release forgets digest, after acting on it failed, so a redelivery can act.
	Release(ctx context.Context, digest string) error
}

// PayloadDigest is the hex SHA-256 of a delivery's JSON payload (in a form-encoded delivery,
// its payload field), 64 characters: a payload signed once has one digest whichever content
// type carried it.
func PayloadDigest(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// DefaultRemovalsName is the ConfigMap that holds the digests of removals acted on.
const DefaultRemovalsName = "octogate-github-removals"

// MaxRemovals bounds the digests kept (about 100 bytes each in the ConfigMap, far below the
// 1 MiB object limit); beyond it the oldest are dropped first. An organization removes far
// fewer members than that between two replays worth stopping.
const MaxRemovals = 4096

// claimBackoff spaces the retries of a ConfigMap write that lost a race to another replica's:
// up to 10 tries over about 1 s, well within the time GitHub waits for an answer, for the
// bursts of a mass offboarding delivered to several replicas at once.
var claimBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

// memoryRemovals is Removals in one process: the last MaxRemovals digests.
type memoryRemovals struct {
	mu   sync.Mutex
	seen map[string]time.Time
	now  func() time.Time
}

// NewMemoryRemovals returns Removals held in this process only: enough for one replica;
// several replicas each act on a replayed payload once (ConfigMapRemovals shares them).
func NewMemoryRemovals() Removals {
	return &memoryRemovals{seen: map[string]time.Time{}, now: time.Now}
}

func (m *memoryRemovals) Claim(_ context.Context, digest string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[digest]; ok {
		return false, nil
	}
	m.seen[digest] = m.now()
	prune(m.seen)
	return true, nil
}

func (m *memoryRemovals) Release(_ context.Context, digest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, digest)
	return nil
}

// prune drops the oldest entries of seen beyond MaxRemovals.
func prune(seen map[string]time.Time) {
	if len(seen) <= MaxRemovals {
		return
	}
	keys := slices.Collect(maps.Keys(seen))
	slices.SortFunc(keys, func(a, b string) int { return seen[a].Compare(seen[b]) })
	for _, k := range keys[:len(keys)-MaxRemovals] {
		delete(seen, k)
	}
}

// ConfigMapRemovals keeps the digests in a ConfigMap that every replica reads and writes
// (data: digest -> RFC 3339 time it was acted on), so a payload acted on by one replica is
// recognised by all, and after restarts. Claim is a compare-and-swap on the ConfigMap's
// resourceVersion: two replicas given the same payload at once see one of them claim it.
type ConfigMapRemovals struct {
	Client kubernetes.Interface
	// Namespace holds the ConfigMap: octogate's own (the pod's, or OCTOGATE_NAMESPACE).
	Namespace string
	// Name of the ConfigMap; empty: DefaultRemovalsName.
	Name string
	now  func() time.Time
}

func (c *ConfigMapRemovals) name() string {
	if c.Name == "" {
		return DefaultRemovalsName
	}
	return c.Name
}

// Claim implements Removals. Errors are the Kubernetes API's.
func (c *ConfigMapRemovals) Claim(ctx context.Context, digest string) (bool, error) {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	first := false
	err := c.update(ctx, func(seen map[string]time.Time) bool {
		if _, ok := seen[digest]; ok {
			first = false
			return false
		}
		first = true
		seen[digest] = now()
		prune(seen)
		return true
	})
	return first, err
}

// Release implements Removals. Errors are the Kubernetes API's.
func (c *ConfigMapRemovals) Release(ctx context.Context, digest string) error {
	return c.update(ctx, func(seen map[string]time.Time) bool {
		if _, ok := seen[digest]; !ok {
			return false
		}
		delete(seen, digest)
		return true
	})
}

// update reads the ConfigMap (creating it when missing), lets change edit its entries and
// writes them back when change returns true, retrying on conflicts.
func (c *ConfigMapRemovals) update(ctx context.Context, change func(map[string]time.Time) bool) error {
	if c.Client == nil || c.Namespace == "" {
		return errors.New("githubwebhook: ConfigMapRemovals needs a Client and a Namespace")
	}
	cms := c.Client.CoreV1().ConfigMaps(c.Namespace)
	return retry.RetryOnConflict(claimBackoff, func() error {
		cm, err := cms.Get(ctx, c.name(), metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return err
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name(), Namespace: c.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "octogate"}}}
		}
		seen := make(map[string]time.Time, len(cm.Data)+1)
		for k, v := range cm.Data {
			if at, err := time.Parse(time.RFC3339, v); err == nil {
				seen[k] = at
			}
		}
		if !change(seen) {
			return nil
		}
		cm.Data = make(map[string]string, len(seen))
		for k, at := range seen {
			cm.Data[k] = at.UTC().Format(time.RFC3339)
		}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), c.name(), err)
			}
			return err
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
