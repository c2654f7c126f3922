package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// UserKubeconfig runs `octogate kubeconfig user --server server --ca caFile --command binary
// --client-id clientID --github-url githubURL` and returns the kubeconfig it prints: one whose
// user logs in through the exec plugin `binary credential`. clientID and githubURL are left
// out when empty. The command runs without the caller's OCTOGATE_* variables, so only the
// flags shape the result.
func UserKubeconfig(ctx context.Context, binary, server, caFile, clientID, githubURL string) ([]byte, error) {
	var args []string
	if clientID != "" {
		args = append(args, "--client-id", clientID)
	}
	if githubURL != "" {
		args = append(args, "--github-url", githubURL)
	}
	return userKubeconfig(ctx, binary, server, caFile, args)
}

// SessionUserKubeconfig runs `octogate kubeconfig user --server server --ca caFile --command
// binary --session-issuer issuer --audience audience --session-ca-file issuerCAFile` and
// returns the kubeconfig it prints: its exec plugin exchanges the GitHub token at issuer for
// a session for audience (docs/sessions.md). issuerCAFile is left out when empty.
func SessionUserKubeconfig(ctx context.Context, binary, server, caFile, issuer, audience, issuerCAFile string) ([]byte, error) {
	args := []string{"--session-issuer", issuer, "--audience", audience}
	if issuerCAFile != "" {
		abs, err := filepath.Abs(issuerCAFile)
		if err != nil {
			return nil, err
		}
		args = append(args, "--session-ca-file", abs)
	}
	return userKubeconfig(ctx, binary, server, caFile, args)
}

func userKubeconfig(ctx context.Context, binary, server, caFile string, extra []string) ([]byte, error) {
	abs, err := filepath.Abs(binary)
	if err != nil {
		return nil, err
	}
	args := append([]string{"kubeconfig", "user", "--server", server, "--ca", caFile, "--command", abs}, extra...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OCTOGATE_") {
			env = append(env, kv)
		}
	}
	out, err := run(ctx, env, abs, args...)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("octogate kubeconfig user printed nothing")
	}
	return out, nil
}
