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
	abs, err := filepath.Abs(binary)
	if err != nil {
		return nil, err
	}
	args := []string{"kubeconfig", "user", "--server", server, "--ca", caFile, "--command", abs}
	if clientID != "" {
		args = append(args, "--client-id", clientID)
	}
	if githubURL != "" {
		args = append(args, "--github-url", githubURL)
	}
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
