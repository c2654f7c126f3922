package chart

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/internal/cluster"
)

// ErrNoHelm is returned by HelmPath when bin/k8s/helm has not been built (run `make tools`).
var ErrNoHelm = errors.New("helm is not built in bin/k8s (run make tools)")

// RepoRoot walks up from dir to the directory that holds charts/octogate and go.mod.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "charts", "octogate", "Chart.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no charts/octogate/Chart.yaml above " + dir)
		}
		dir = parent
	}
}

// ChartDir is charts/octogate in the repository at root.
func ChartDir(root string) string { return filepath.Join(root, "charts", "octogate") }

// HelmPath is the helm in root/bin/k8s (or $OCTOGATE_K8S_BIN) once tools/build.sh has
// finished (.stamp exists), else ErrNoHelm.
func HelmPath(root string) (string, error) {
	dir := cluster.BinDir(root)
	if _, err := os.Stat(filepath.Join(dir, ".stamp")); err != nil {
		return "", ErrNoHelm
	}
	p := filepath.Join(dir, "helm")
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		return "", ErrNoHelm
	}
	return p, nil
}

// Helm runs one helm command with its config, cache and data directories under home (so that
// a run reads no user settings and writes nothing outside home). It returns stdout; on failure
// the error holds helm's stderr.
func Helm(ctx context.Context, helm, home string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// KubeVersion is the Kubernetes version the chart is rendered and linted for: the version
// tools/ pins. helm template cannot ask a cluster, and a helm built without Helm's own
// ldflags assumes v1.20.0, below the chart's kubeVersion (>=1.32: apiserver.config.k8s.io/v1 AuthorizationConfiguration).
const KubeVersion = "v1.37.2"

// TemplateArgs are the helm arguments that render the chart at chartDir as release in
// namespace; extra are further flags such as --set github.orgs={acme} or -f values.yaml.
// The exact command line is
// `helm template RELEASE CHART --namespace NS --kube-version v1.37.2 --include-crds EXTRA...`.
func TemplateArgs(chartDir, release, namespace string, extra ...string) []string {
	return append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", KubeVersion, "--include-crds"}, extra...)
}

// Template renders the chart with `helm template` (see TemplateArgs) and decodes the objects
// in the order helm printed them.
func Template(ctx context.Context, helm, home, chartDir, release, namespace string, extra ...string) ([]*unstructured.Unstructured, error) {
	out, err := Helm(ctx, helm, home, TemplateArgs(chartDir, release, namespace, extra...)...)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Decode splits a multi-document YAML stream into objects, skipping empty documents. Every
// document must have apiVersion, kind and metadata.name.
func Decode(stream []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(objs)+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(objs)+1, err)
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("document %d (%s): no metadata.name", len(objs)+1, u.GetKind())
		}
		objs = append(objs, u)
	}
}
