package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/octogate/octogate/fleet"
)

const sessionClustersName = fullname + "-session-clusters"

func TestSessionClusters(t *testing.T) {
	e := setup(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`session:
  clusters:
  - name: prod
    server: https://prod.example.com:6443
    accepts: webhook
    labels: {env: prod}
    subjects: [{kind: Group, name: "github:acme/sre"}]
  - name: staging
    server: https://staging.example.com:6443
    accepts: apiserver
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := e.render(t, "--set", orgs, "--set", "session.enabled=true", "--set", "session.issuer=https://octogate.example.com", "-f", values)

	cm := get[corev1.ConfigMap](t, o, "ConfigMap", sessionClustersName)
	doc, err := fleet.Parse([]byte(cm.Data["clusters.yaml"]))
	if err != nil {
		t.Fatalf("the rendered clusters file does not load in octogate serve: %v\n%s", err, cm.Data["clusters.yaml"])
	}
	if len(doc.Clusters) != 2 || doc.Clusters[0].Name != "prod" || doc.Clusters[0].Labels["env"] != "prod" ||
		len(doc.Clusters[0].Subjects) != 1 || doc.Clusters[1].Subjects != nil {
		t.Errorf("clusters %+v", doc.Clusters)
	}

	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := envMap(c)
	if env["OCTOGATE_SESSION_CLUSTERS_FILE"] != "/etc/octogate/session-clusters/clusters.yaml" {
		t.Errorf("OCTOGATE_SESSION_CLUSTERS_FILE = %q", env["OCTOGATE_SESSION_CLUSTERS_FILE"])
	}
	if _, ok := env["OCTOGATE_SESSION_AUDIENCES"]; ok {
		t.Errorf("OCTOGATE_SESSION_AUDIENCES set without session.audiences")
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/octogate/session-clusters" })
	if i < 0 || !c.VolumeMounts[i].ReadOnly || c.VolumeMounts[i].SubPath != "" {
		t.Fatalf("mounts %+v: want /etc/octogate/session-clusters read-only, whole directory (a subPath mount is never updated)", c.VolumeMounts)
	}
	j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if j < 0 || pod.Volumes[j].ConfigMap == nil || pod.Volumes[j].ConfigMap.Name != sessionClustersName {
		t.Fatalf("volumes %+v, want ConfigMap %s", pod.Volumes, sessionClustersName)
	}
}

func TestSessionsNeedAudiencesOrClusters(t *testing.T) {
	e := setup(t)
	err := e.renderErr("--set", orgs, "--set", "session.enabled=true", "--set", "session.issuer=https://octogate.example.com")
	if err == nil || !strings.Contains(err.Error(), "session.audiences or session.clusters") {
		t.Errorf("render without clusters: %v", err)
	}
	err = e.renderErr("--set", orgs, "--set", "session.enabled=true", "--set", "session.issuer=https://octogate.example.com",
		"--set", "session.clusters[0].name=Prod", "--set", "session.clusters[0].server=https://p", "--set", "session.clusters[0].accepts=webhook")
	if err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("a cluster name octogate refuses: %v", err)
	}
}
