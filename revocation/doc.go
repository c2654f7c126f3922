// Package revocation carries revocations to every octogate replica, and from a session issuer
// to every cluster that trusts it.
//
// What a revocation is (Revocation, Kind): a GitHub user, a team's members, one user's
// sessions for one cluster (a logout), or a confirmed org leaver.
//
// Between the replicas of one octogate: GitHub delivers an org webhook to one pod behind the
// Service; that replica evicts at once and records the revocation in a ConfigMap
// (DefaultName, in octogate's own namespace) that every replica watches through the
// Kubernetes API and evicts on (Shared). Entries are kept for the longest time an identity or
// a session they refuse can be served, so a replica that starts or reconnects later still
// honours them. Without Kubernetes access, Local evicts in the one process. The ConfigMap's
// keys are "user.<id>", "team.<org>.<slug>", "sessions.<id>.<cluster>" and "left.<org>.<id>",
// each mapping to the revocation time (RFC 3339). Writes use optimistic concurrency
// (resourceVersion) and are coalesced: a burst of revocations costs a few writes, not one each.
//
// From the issuer to the fleet: every revocation the issuer knows (Log) is served as a
// Security Event Token (RFC 8417, https://www.rfc-editor.org/rfc/rfc8417) on a broadcast
// stream of the Shared Signals Framework 1.0
// (https://openid.net/specs/openid-sharedsignals-framework-1_0.html) with poll delivery (RFC
// 8936, https://www.rfc-editor.org/rfc/rfc8936): Feed serves <issuer>/.well-known/ssf-configuration,
// <issuer>/ssf/stream and POST <issuer>/ssf/poll, signed with the issuer's session keys. The
// events are CAEP session-revoked (users, teams, one user's sessions for some clusters) and
// octogate's org-member-removed (a leaver). Receiver, in every octogate that verifies sessions
// of another process's issuer, finds the feed from the issuer's SSF configuration, long-polls
// it, verifies each SET with the issuer's published keys and applies it here; past
// ReceiverConfig.MaxStaleness without a successful poll, sessions are refused
// (session_feed_stale).
package revocation
