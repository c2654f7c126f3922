package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

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

// verifierValues make a verifier-only cluster: this release issues no session but its
// /authenticate accepts staging's sessions of the remote issuer prod.
var verifierValues = []string{"--set", orgs, "--set", "session.trust.issuer=https://octogate.prod.example.com",
	"--set", "session.audience=staging"}

// TestVerifierOnly renders a cluster that trusts another octogate's issuer (mode (a)), with that
// issuer's CA inline, from a Secret or from a ConfigMap, and checks the pod verifies with it and
// issues nothing.
func TestVerifierOnly(t *testing.T) {
	e := setup(t)
	ca := testCA(t)
	inline := filepath.Join(t.TempDir(), "trust-ca.yaml")
	if err := os.WriteFile(inline, []byte("session:\n  trust:\n    certificateAuthority: |\n      "+strings.ReplaceAll(strings.TrimSpace(ca), "\n", "\n      ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		extra []string
		// the volume's source: "ConfigMap NAME KEY" or "Secret NAME KEY"; "" for no CA.
		source string
	}{
		{"the system roots", nil, ""},
		{"an inline CA in a ConfigMap of the chart", []string{"-f", inline}, "ConfigMap " + fullname + "-session-trust-ca ca.crt"},
		{"a CA from a Secret", []string{"--set", "session.trust.certificateAuthorityFrom.secretName=prod-issuer-ca"}, "Secret prod-issuer-ca ca.crt"},
		{"a CA from a ConfigMap key", []string{"--set", "session.trust.certificateAuthorityFrom.configMapName=kube-root-ca.crt",
			"--set", "session.trust.certificateAuthorityFrom.key=ca-bundle.pem"}, "ConfigMap kube-root-ca.crt ca-bundle.pem"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := e.render(t, append(slices.Clone(verifierValues), tt.extra...)...)
			pod := get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec
			c := pod.Containers[0]
			env := envMap(c)
			want := map[string]string{
				"OCTOGATE_SESSION_TRUST_ISSUER": "https://octogate.prod.example.com",
				"OCTOGATE_SESSION_AUDIENCE":     "staging",
			}
			if tt.source != "" {
				want["OCTOGATE_SESSION_TRUST_CA_FILE"] = "/etc/octogate/session-trust/ca.crt"
			}
			for name, v := range env {
				if strings.HasPrefix(name, "OCTOGATE_SESSION_") && want[name] != v {
					t.Errorf("%s = %q, want %q", name, v, want[name])
				}
			}
			for name, v := range want {
				if env[name] != v {
					t.Errorf("%s = %q, want %q", name, env[name], v)
				}
			}
			for _, kind := range []string{"Secret", "CronJob", "ConfigMap"} {
				for _, name := range []string{sessionKeysName, rotateName, sessionClustersName} {
					if o.find(kind, name) != nil {
						t.Errorf("a verifier-only release renders %s %s", kind, name)
					}
				}
			}
			i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/octogate/session-trust" })
			if tt.source == "" {
				if i >= 0 {
					t.Errorf("a CA mounted without one: %+v", c.VolumeMounts[i])
				}
				return
			}
			if i < 0 || !c.VolumeMounts[i].ReadOnly {
				t.Fatalf("mounts %+v: want /etc/octogate/session-trust read-only", c.VolumeMounts)
			}
			j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
			if j < 0 {
				t.Fatalf("no volume %s", c.VolumeMounts[i].Name)
			}
			v := pod.Volumes[j]
			var got string
			switch {
			case v.Secret != nil && len(v.Secret.Items) == 1 && v.Secret.Items[0].Path == "ca.crt":
				got = "Secret " + v.Secret.SecretName + " " + v.Secret.Items[0].Key
			case v.ConfigMap != nil && len(v.ConfigMap.Items) == 1 && v.ConfigMap.Items[0].Path == "ca.crt":
				got = "ConfigMap " + v.ConfigMap.Name + " " + v.ConfigMap.Items[0].Key
			}
			if got != tt.source {
				t.Errorf("volume %+v is %q, want %q", v, got, tt.source)
			}
			if strings.Contains(tt.source, fullname+"-session-trust-ca") {
				cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-session-trust-ca")
				if strings.TrimSpace(cm.Data["ca.crt"]) != strings.TrimSpace(ca) {
					t.Errorf("ca.crt = %q, want the values' PEM", cm.Data["ca.crt"])
				}
			}
		})
	}
}

func TestVerifierOnlyValuesFailAtInstall(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{"no audience", []string{"session.trust.issuer=https://prod.example.com"}, "session.audience is required with session.trust.issuer"},
		{"an issuer that also trusts another", []string{"session.enabled=true", "session.issuer=https://staging.example.com", "session.audiences={staging}",
			"session.audience=staging", "session.trust.issuer=https://prod.example.com"}, "session.enabled=false"},
		{"two CA sources", []string{"session.trust.issuer=https://prod.example.com", "session.audience=staging",
			"session.trust.certificateAuthorityFrom.secretName=a", "session.trust.certificateAuthorityFrom.configMapName=b"}, "one CA bundle source"},
		{"a CA without the issuer", []string{"session.audience=staging", "session.trust.certificateAuthorityFrom.secretName=a"}, "without session.trust.issuer"},
		{"http issuer", []string{"session.trust.issuer=http://prod.example.com", "session.audience=staging"}, "issuer"},
		{"not a PEM CA", []string{"session.trust.certificateAuthority=abc"}, "certificateAuthority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--set", orgs}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			if err := e.renderErr(args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestVerifierAuthenticationConfig is mode (b) on a cluster whose release is not the issuer: the
// discovery document and keys come from the issuer itself, verified by the issuer's CA, never by
// this release's Service and serving CA, which serve no issuer.
func TestVerifierAuthenticationConfig(t *testing.T) {
	e := setup(t)
	bin := octogateCLI(t)
	ca := testCA(t)
	b, err := yaml.Marshal(map[string]any{"session": map[string]any{"trust": map[string]any{"certificateAuthority": ca}}})
	if err != nil {
		t.Fatal(err)
	}
	trustCA := filepath.Join(t.TempDir(), "trust-ca.yaml")
	if err := os.WriteFile(trustCA, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// helm splits -f at commas, which subtest names (and so their TempDirs) have.
	givenCA := caValues(t, ca)
	modeB := []string{"--set", orgs, "--set", "session.authenticationConfig.enabled=true",
		"--set", "session.authenticationConfig.issuer=https://octogate.prod.example.com", "--set", "session.authenticationConfig.audience=dev"}

	t.Run("no discovery URL, the given CA", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(modeB), "-f", givenCA)...)
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		sameYAML(t, []byte(cm.Data[authnConfigFile]), cliAuthnConfig(t, bin, ca, "--issuer", "https://octogate.prod.example.com", "--audience", "dev"))
	})
	t.Run("the CA of session.trust for the same issuer", func(t *testing.T) {
		o := e.render(t, "--set", orgs, "--set", "session.authenticationConfig.enabled=true",
			"--set", "session.trust.issuer=https://octogate.prod.example.com", "--set", "session.audience=dev", "-f", trustCA)
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		sameYAML(t, []byte(cm.Data[authnConfigFile]), cliAuthnConfig(t, bin, ca, "--issuer", "https://octogate.prod.example.com", "--audience", "dev"))
	})
	t.Run("publicly trusted", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(modeB), "--set", "session.authenticationConfig.publiclyTrusted=true")...)
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		sameYAML(t, []byte(cm.Data[authnConfigFile]), cliAuthnConfig(t, bin, "", "--issuer", "https://octogate.prod.example.com", "--audience", "dev"))
	})
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{"no CA: this release's serving CA does not verify another issuer", nil, "session.authenticationConfig.certificateAuthority (the PEM CA bundle that verifies https://octogate.prod.example.com) or publiclyTrusted=true is required"},
		{"the discovery URL is this release's Service", []string{"session.authenticationConfig.publiclyTrusted=true",
			"session.authenticationConfig.discoveryURL=https://" + svcHost + ":443"}, "is this release's own URL, which serves no discovery document"},
		{"the discovery URL is this release's webhook URL", []string{"session.authenticationConfig.publiclyTrusted=true",
			"kubeAPIServer.webhookURL=https://10.0.0.9:8443", "session.authenticationConfig.discoveryURL=https://10.0.0.9:8443/"}, "is this release's own URL"},
		{"the discovery URL is this release's Service while it issues for another issuer", []string{"session.enabled=true",
			"session.issuer=https://octogate.staging.example.com", "session.audiences={staging}", "session.authenticationConfig.publiclyTrusted=true",
			"session.authenticationConfig.discoveryURL=https://" + fullname + "." + namespace + ".svc.cluster.local/"}, "is this release's own URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := slices.Clone(modeB)
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			if err := e.renderErr(args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestVerifierOnlyNotes(t *testing.T) {
	e := setup(t)
	notes := e.notes(t, append(slices.Clone(verifierValues), "--set", "session.trust.certificateAuthorityFrom.secretName=prod-issuer-ca")...)
	for _, want := range []string{
		"this release issues none",
		"/authenticate accepts sessions for staging of https://octogate.prod.example.com",
		"trusting the CA of session.trust",
		"octogate login --issuer https://octogate.prod.example.com",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "Sessions are off") {
		t.Errorf("NOTES of a verifier say sessions are off:\n%s", notes)
	}
	modeB := e.notes(t, "--set", orgs, "--set", "session.authenticationConfig.enabled=true", "--set", "session.authenticationConfig.publiclyTrusted=true",
		"--set", "session.authenticationConfig.issuer=https://octogate.prod.example.com", "--set", "session.audience=dev")
	for _, want := range []string{
		"kube-apiserver verifies sessions for dev of https://octogate.prod.example.com itself (mode (b))",
		"octogate login --issuer https://octogate.prod.example.com",
	} {
		if !strings.Contains(modeB, want) {
			t.Errorf("NOTES of mode (b) lack %q:\n%s", want, modeB)
		}
	}
}
