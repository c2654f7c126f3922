package main

import (
	"net"
	"path/filepath"
	"strconv"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/cluster"
)

// sessionAudience is the demo cluster's name for sessions (docs/sessions.md).
const sessionAudience = "demo"

// sessionIssuer is the issuer URL of the demo's octogate: its own address, so the one octogate
// is issuer and verifier (docs/sessions.md, "One cluster").
func sessionIssuer(port int) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// sessionEnv makes the demo's octogate issue sessions for cluster demo and accept them at
// /authenticate; caFile is the CA of its serving certificate.
func sessionEnv(issuer, caFile string) []string {
	return []string{
		"OCTOGATE_SESSION_ISSUER=" + issuer,
		"OCTOGATE_SESSION_AUDIENCES=" + sessionAudience,
		"OCTOGATE_SESSION_TRUST_ISSUER=" + issuer,
		"OCTOGATE_SESSION_TRUST_CA_FILE=" + caFile,
		"OCTOGATE_SESSION_AUDIENCE=" + sessionAudience,
	}
}

// sessionUser is the kubeconfig user of the "session" context: `octogate credential
// --session-issuer ... --audience demo` with alice's GitHub token in its exec env, exchanged
// for a session that kubectl sends instead. The session cache is in the demo's work directory
// (removed on exit).
func sessionUser(binary, issuer, caFile, work string) cluster.KubeconfigUser {
	return cluster.KubeconfigUser{Name: "session", Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1",
		Command:    binary,
		Args:       []string{"credential", "--session-issuer", issuer, "--audience", sessionAudience, "--session-ca-file", caFile},
		Env: []clientcmdapi.ExecEnvVar{
			{Name: "GITHUB_TOKEN", Value: cluster.AliceToken},
			{Name: "XDG_CACHE_HOME", Value: filepath.Join(work, "session-cache")},
		},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
}
