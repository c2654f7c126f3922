package tokenreview

import (
	"crypto/sha256"

	lru "github.com/hashicorp/golang-lru/v2"
)

// IdentityPool hands out one shared copy of equal identities: the same status.user (username,
// uid, groups and extra, as encoded by Identity.Encoded), with that answer encoded once. A
// verifier that caches many credentials of few users (package session: a user who logs in
// again and again has a session cached for each login) keeps one set of groups, extra and
// encoded answer per user, not one per credential. It remembers at most size identities,
// dropping the least recently used. What it returns is shared: read-only, as every cached
// Identity already is. Safe for concurrent use.
type IdentityPool struct {
	ids *lru.Cache[[sha256.Size]byte, Identity]
}

// NewIdentityPool makes a pool of at most size identities; size must be positive.
func NewIdentityPool(size int) (*IdentityPool, error) {
	ids, err := lru.New[[sha256.Size]byte, Identity](size)
	if err != nil {
		return nil, err
	}
	return &IdentityPool{ids: ids}, nil
}

// Encoded is id.Encoded(), or the identity the pool returned before for the same status.user.
// It hashes the encoded answer (SHA-256): meant for identities verified at a cost that dwarfs
// that, not for every review.
func (p *IdentityPool) Encoded(id Identity) Identity {
	id = id.Encoded()
	key := sha256.Sum256(id.userJSON)
	if shared, ok := p.ids.Get(key); ok {
		return shared
	}
	p.ids.Add(key, id)
	return id
}
