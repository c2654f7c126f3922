// Package fleet owns the session issuer's clusters: the SessionClusters file
// (OCTOGATE_SESSION_CLUSTERS_FILE, apiVersion octogate.dev/v1alpha1) that names every cluster
// sessions are minted for (its name is the session audience), how each is reached (server,
// certificateAuthorityData), how it accepts sessions (accepts: webhook, apiserver or proxy),
// its labels, and who may use it (subjects, in the authorization policy's rbac/v1 Subject
// shape).
//
// Store holds the clusters in force, reloads the file when it changes (internal/filewatch, as
// the policy does) and answers the one access question every door asks (Allows): may this
// person have a session for this cluster. The token exchange (session.Exchanger) calls it
// before it mints; a later door listing a person's clusters calls the same function.
package fleet
