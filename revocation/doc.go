// Package revocation carries revocations (a GitHub user or team whose cached identities must
// go now) to every octogate replica. GitHub delivers an org webhook to one pod behind the
// Service; that replica evicts at once and records the revocation in a ConfigMap
// (DefaultName, in octogate's own namespace) that every replica watches through the
// Kubernetes API and evicts on. Entries are kept for the longest time an identity can be
// served from a cache, so a replica that starts or reconnects later still honours them.
// Without Kubernetes access, Local evicts in the one process.
//
// The ConfigMap's data maps "user.<GitHub user id>" and "team.<org>.<team slug>" to the
// revocation time (RFC 3339). Writes use optimistic concurrency (resourceVersion) and are
// coalesced: a burst of revocations costs a few writes, not one each.
package revocation
