package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/namespacetemplate"
)

// TestNamespaceTemplatesValue renders the example templates through value namespaceTemplates
// and checks octogate would load what the chart mounts.
func TestNamespaceTemplatesValue(t *testing.T) {
	e := setup(t)
	example, err := namespacetemplate.LoadFile(filepath.Join("..", "..", "examples", "namespace-templates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "namespace-templates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	values, err := yaml.Marshal(map[string]any{"namespaceTemplates": doc["templates"]})
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		t.Fatal(err)
	}
	objs := e.render(t, "--set", orgs, "-f", valuesFile)
	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", release+"-namespace-templates")
	loaded, err := namespacetemplate.Parse([]byte(cm.Data["namespace-templates.yaml"]))
	if err != nil {
		t.Fatalf("rendered templates do not load: %v\n%s", err, cm.Data["namespace-templates.yaml"])
	}
	if len(loaded.List()) != len(example.List()) {
		t.Errorf("%d templates rendered, want %d", len(loaded.List()), len(example.List()))
	}
	if members, ok := loaded.Get("members"); !ok || !members.AllowsLabel("istio-injection") {
		t.Errorf("rendered template members does not let owners set label istio-injection")
	}
	dep := get[appsv1.Deployment](t, objs, "Deployment", release)
	c := dep.Spec.Template.Spec.Containers[0]
	if got := envMap(c)["OCTOGATE_NAMESPACE_TEMPLATES_FILE"]; got != "/etc/octogate/namespace-templates/namespace-templates.yaml" {
		t.Errorf("OCTOGATE_NAMESPACE_TEMPLATES_FILE = %q", got)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "namespace-templates" && m.MountPath == "/etc/octogate/namespace-templates" && m.SubPath == "")
	}
	if !mounted {
		t.Errorf("templates ConfigMap not mounted as a directory: %+v", c.VolumeMounts)
	}

	// Without the value: no ConfigMap, no variable.
	plain := e.render(t, "--set", orgs)
	if plain.find("ConfigMap", release+"-namespace-templates") != nil {
		t.Error("namespace templates ConfigMap rendered without namespaceTemplates")
	}
}

func TestNamespaceTemplatesSchema(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct{ name, set, want string }{
		{"misspelled template field", "namespaceTemplates[0].name=a,namespaceTemplates[0].maxNamespacesPerUsr=1", "maxNamespacesPerUsr"},
		{"object kind not allowed", "namespaceTemplates[0].name=a,namespaceTemplates[0].objects[0].apiVersion=v1,namespaceTemplates[0].objects[0].kind=Secret,namespaceTemplates[0].objects[0].metadata.name=s", "kind"},
		{"negative limit", "namespaceTemplates[0].name=a,namespaceTemplates[0].maxNamespaces=-1", "maxNamespaces"},
		{"allowed labels not a list", "namespaceTemplates[0].name=a,namespaceTemplates[0].allowedLabels=istio-injection", "allowedLabels"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := e.renderErr("--set", orgs, "--set", tt.set)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a schema error naming %s", err, tt.want)
			}
		})
	}
}
