package revocation

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Revocation is one GitHub user, one team's members, one user's sessions for one cluster, or
// a confirmed org leaver, whose access must end. Exactly one kind is set (Kind):
//
//   - UserID alone: every cached identity and every session of the user (org webhook,
//     logout of every cluster);
//   - Team: every cached member of "org/slug" and every session that carries its group;
//   - UserID and Cluster: the user's sessions for that cluster only (logout --cluster);
//   - UserID and LeftOrg: the user left LeftOrg, as the issuer confirmed; clusters that run
//     the ownership controller orphan the user's namespaces.
//
// The ConfigMap keys are "user.<id>", "team.<org>.<slug>" (both read by every octogate
// version), "sessions.<id>.<cluster>" and "left.<org>.<id>" (ignored by versions before the
// fleet's feed), each mapping to the revocation time (RFC 3339).
type Revocation struct {
	// UserID is the GitHub numeric account id, e.g. "1002".
	UserID string
	// Team is "org/slug", lowercased, e.g. "acme/platform-admins".
	Team string
	// Cluster limits a user's revocation to the sessions of one cluster (an audience).
	Cluster string
	// LeftOrg marks a leaver of this organization (its login, lowercased).
	LeftOrg string
	// At is when the revocation happened (the delivery's arrival, the logout): sessions
	// issued at or before it are refused.
	At time.Time
}

// Kind is the kind of a Revocation.
type Kind int

// The kinds of Revocation.
const (
	KindInvalid Kind = iota
	KindUser
	KindTeam
	KindSessions
	KindLeaver
)

// Kind says which kind r is; KindInvalid when its fields do not make one.
func (r Revocation) Kind() Kind {
	switch {
	case r.Team != "" && r.UserID == "" && r.Cluster == "" && r.LeftOrg == "":
		return KindTeam
	case r.UserID == "" || r.Team != "" || r.Cluster != "" && r.LeftOrg != "":
		return KindInvalid
	case r.Cluster != "":
		return KindSessions
	case r.LeftOrg != "":
		return KindLeaver
	}
	return KindUser
}

// valid reports whether r is of one kind and its fields can be a ConfigMap key: a numeric
// user id, a team "org/slug", a cluster name of lowercase letters, digits, '-' and '.'.
func (r Revocation) valid() bool {
	k := r.Kind()
	if k == KindInvalid || r.UserID != "" && !numeric(r.UserID) {
		return false
	}
	ok := true
	switch k {
	case KindTeam:
		org, slug, cut := strings.Cut(r.Team, "/")
		ok = cut && keyPart(org) && keyPart(slug) && !strings.Contains(org, ".")
	case KindSessions:
		ok = keyPart(r.Cluster)
	case KindLeaver:
		ok = keyPart(r.LeftOrg) && !strings.Contains(r.LeftOrg, ".")
	}
	return ok && len(r.key()) <= maxKeyBytes
}

// maxKeyBytes is Kubernetes' limit on a ConfigMap key.
const maxKeyBytes = 253

func numeric(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// keyPart reports whether s may be part of a ConfigMap key ([-._a-zA-Z0-9], RFC 1123 spirit)
// and fits in one.
func keyPart(s string) bool {
	if s == "" || len(s) > maxKeyBytes-20 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (r Revocation) key() string {
	switch r.Kind() {
	case KindTeam:
		return "team." + strings.Replace(r.Team, "/", ".", 1)
	case KindSessions:
		return "sessions." + r.UserID + "." + r.Cluster
	case KindLeaver:
		return "left." + r.LeftOrg + "." + r.UserID
	}
	return "user." + r.UserID
}

func parseKey(k string) (Revocation, bool) {
	var r Revocation
	switch kind, rest, _ := strings.Cut(k, "."); kind {
	case "user":
		r = Revocation{UserID: rest}
	case "team":
		org, slug, ok := strings.Cut(rest, ".")
		if !ok {
			return Revocation{}, false
		}
		r = Revocation{Team: org + "/" + slug}
	case "sessions":
		uid, cluster, _ := strings.Cut(rest, ".")
		if cluster == "" {
			return Revocation{}, false
		}
		r = Revocation{UserID: uid, Cluster: cluster}
	case "left":
		org, uid, _ := strings.Cut(rest, ".")
		if org == "" {
			return Revocation{}, false
		}
		r = Revocation{UserID: uid, LeftOrg: org}
	default:
		return Revocation{}, false
	}
	if kind, _, _ := strings.Cut(k, "."); kind == "user" && !numeric(r.UserID) {
		// Keys written before ids were checked are still honoured as user revocations.
		return r, r.UserID != "" && !strings.Contains(r.UserID, ".")
	}
	return r, r.valid()
}

// ID is the revocation's event id (the jti of its Security Event Token): the first 16 bytes
// of SHA-256 over its key and its time in Unix seconds, base64url. Every replica derives the
// same id from the same ConfigMap entry, so that a receiver polling several replicas applies
// it once.
func (r Revocation) ID() string {
	sum := sha256.Sum256([]byte(r.key() + "@" + strconv.FormatInt(r.At.Unix(), 10)))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// SessionRevoker revokes a person's sessions (logout). Shared and Local implement it.
type SessionRevoker interface {
	// RevokeSessions refuses, on every verifier of the fleet, the sessions of the GitHub user
	// uid (numeric id) issued at or before at, for clusters (audiences; empty: every cluster).
	// Errors name an invalid uid or cluster; the valid ones are revoked anyway.
	RevokeSessions(ctx context.Context, uid string, clusters []string, at time.Time) error
}

// LeaverMarker records a confirmed org leaver for the fleet (the org-member-removed event).
type LeaverMarker interface {
	// Left records that the GitHub user uid left org at at, as the issuer confirmed.
	Left(ctx context.Context, org, uid string, at time.Time) error
}

// sessionRevocations are the revocations of RevokeSessions: one user revocation when clusters
// is empty, else one per cluster (duplicates once).
func sessionRevocations(uid string, clusters []string, at time.Time) ([]Revocation, error) {
	if !numeric(uid) {
		return nil, fmt.Errorf("revocation: uid %q: want a numeric GitHub id", uid)
	}
	if len(clusters) == 0 {
		return []Revocation{{UserID: uid, At: at}}, nil
	}
	var rs []Revocation
	var errs []error
	seen := map[string]bool{}
	for _, c := range clusters {
		r := Revocation{UserID: uid, Cluster: c, At: at}
		switch {
		case seen[c]:
		case !r.valid():
			errs = append(errs, fmt.Errorf("revocation: cluster %q: want lowercase letters, digits, '-' and '.'", c))
		default:
			seen[c] = true
			rs = append(rs, r)
		}
	}
	return rs, errors.Join(errs...)
}
