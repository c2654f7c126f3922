package chart

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

const (
	release   = "octogate"
	namespace = "octogate-system"
	fullname  = "octogate"
	svcHost   = "octogate.octogate-system.svc"
)

// env is what a chart test needs: helm, a private helm home and the chart.
type env struct {
	helm, home, chart string
}

// setup finds bin/k8s/helm (or the helm named by $OCTOGATE_HELM). Without it the test fails
// in CI (CI=true) and is skipped elsewhere.
func setup(t *testing.T) env {
	t.Helper()
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	helm, err := HelmPath(root)
	if p := os.Getenv("OCTOGATE_HELM"); p != "" {
		helm, err = p, nil
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: CI needs it", err)
		}
		t.Skipf("%v", err)
	}
	return env{helm: helm, home: t.TempDir(), chart: ChartDir(root)}
}

func (e env) render(t *testing.T, args ...string) objects {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := Template(ctx, e.helm, e.home, e.chart, release, namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objects(objs)
}

func (e env) renderErr(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Template(ctx, e.helm, e.home, e.chart, release, namespace, args...)
	return err
}

const orgs = "github.orgs={acme}"

type objects []*unstructured.Unstructured

func (o objects) find(kind, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func (o objects) kinds() map[string][]string {
	m := map[string][]string{}
	for _, u := range o {
		m[u.GetKind()] = append(m[u.GetKind()], u.GetName())
	}
	return m
}

// get decodes the object kind/name into T, refusing fields T does not have: a misspelled
// field in a template fails here rather than being silently dropped by the API server.
func get[T any](t *testing.T, o objects, kind, name string) *T {
	t.Helper()
	u := o.find(kind, name)
	if u == nil {
		t.Fatalf("no %s %q rendered; have %v", kind, name, o.kinds())
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return out
}

func envMap(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func TestLint(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{name: "defaults with github.orgs", args: []string{"--set", orgs}},
		{name: "custom values", args: []string{"-f", "testdata/custom-values.yaml"}},
		{name: "cert-manager, ServiceMonitor and NetworkPolicy", args: []string{"--set", orgs, "--set", "certManager.enabled=true",
			"--set", "serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=true"}},
		{name: "the impersonating proxy, with cert-manager", args: append(slices.Clone(proxyArgs), "--set", "certManager.enabled=true")},
		{name: "the impersonating proxy", args: proxyArgs},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", "--kube-version", KubeVersion, e.chart}, tt.args...)
			if out, err := Helm(ctx, e.helm, e.home, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs)

	t.Run("renders exactly the expected objects", func(t *testing.T) {
		got := o.kinds()
		want := map[string][]string{
			"ServiceAccount":                 {fullname, fullname + "-certs-renew"},
			"ClusterRole":                    {fullname},
			"ClusterRoleBinding":             {fullname},
			"Role":                           {fullname + "-leader-election", fullname + "-certs-renew"},
			"RoleBinding":                    {fullname + "-leader-election", fullname + "-certs-renew"},
			"ConfigMap":                      {fullname + "-kube-apiserver"},
			"Secret":                         {fullname + "-ca", fullname + "-client-ca", fullname + "-tls", fullname + "-kube-apiserver"},
			"CronJob":                        {fullname + "-certs-renew"},
			"Service":                        {fullname},
			"Deployment":                     {fullname},
			"PodDisruptionBudget":            {fullname},
			"MutatingWebhookConfiguration":   {fullname},
			"ValidatingWebhookConfiguration": {fullname},
			"CustomResourceDefinition":       {"accessrequests.octogate.dev"},
		}
		for kind, names := range want {
			g := slices.Clone(got[kind])
			slices.Sort(g)
			slices.Sort(names)
			if !slices.Equal(g, names) {
				t.Errorf("%s: got %v, want %v", kind, g, names)
			}
		}
		for kind := range got {
			if _, ok := want[kind]; !ok {
				t.Errorf("unexpected %s %v", kind, got[kind])
			}
		}
	})

	t.Run("every namespaced object is in the release namespace", func(t *testing.T) {
		cluster := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true,
			"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true, "CustomResourceDefinition": true}
		for _, u := range o {
			if ns := u.GetNamespace(); cluster[u.GetKind()] != (ns == "") || (ns != "" && ns != namespace) {
				t.Errorf("%s %s has namespace %q", u.GetKind(), u.GetName(), ns)
			}
		}
	})

	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	t.Run("deployment is highly available and hardened", func(t *testing.T) {
		if *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
		}
		if len(pod.TopologySpreadConstraints) == 0 || pod.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("topologySpreadConstraints = %+v, want a spread over nodes", pod.TopologySpreadConstraints)
		}
		if pod.PriorityClassName != "" {
			t.Errorf("priorityClassName = %q, want none by default", pod.PriorityClassName)
		}
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod securityContext = %+v", psc)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext = %+v", sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("resources = %+v, want requests and a memory limit", c.Resources)
		}
		if !slices.Equal(c.Args, []string{"serve"}) || c.Image != "ghcr.io/octogate/octogate:0.1.0" {
			t.Errorf("image %q args %v", c.Image, c.Args)
		}
	})

	t.Run("probes are HTTPS on 8443", func(t *testing.T) {
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8443 || c.Ports[0].Name != "https" {
			t.Fatalf("ports = %+v", c.Ports)
		}
		for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.String() != "https" {
				t.Errorf("probe %s = %+v", name, p)
			}
		}
	})

	t.Run("environment has every DESIGN.md default", func(t *testing.T) {
		want := map[string]string{
			"OCTOGATE_LISTEN":                   ":8443",
			"OCTOGATE_TLS_CERT_FILE":            "/etc/octogate/tls/tls.crt",
			"OCTOGATE_TLS_KEY_FILE":             "/etc/octogate/tls/tls.key",
			"OCTOGATE_CLIENT_CA_FILE":           "/etc/octogate/tls/client-ca.crt",
			"OCTOGATE_GITHUB_API_URL":           "https://api.github.com/",
			"OCTOGATE_GITHUB_ORGS":              "acme",
			"OCTOGATE_GITHUB_TIMEOUT":           "5s",
			"OCTOGATE_GITHUB_TOKEN_TYPES":       "classic,fine-grained,oauth,app-user,legacy",
			"OCTOGATE_USERNAME_PREFIX":          "github:",
			"OCTOGATE_USERNAME_FORMAT":          "login:id",
			"OCTOGATE_TOKEN_CACHE_TTL":          "60s",
			"OCTOGATE_TOKEN_CACHE_NEGATIVE_TTL": "10s",
			"OCTOGATE_TOKEN_CACHE_SIZE":         "10000",
			"OCTOGATE_ADMIN_GROUPS":             "",
			"OCTOGATE_OWNER_CLUSTERROLE":        "admin",
			"OCTOGATE_CONTROLLER":               "true",
			"OCTOGATE_LEADER_ELECT":             "true",
			"OCTOGATE_KUBE_API_QPS":             "50",
			"OCTOGATE_KUBE_API_BURST":           "100",
			"OCTOGATE_LOG_FORMAT":               "text",
			"OCTOGATE_SHUTDOWN_DELAY":           "5s",
			"GOMEMLIMIT":                        "241591910", // 90% of the 256Mi memory limit
		}
		got := envMap(c)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %q (set: %v), want %q", k, g, ok, v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s=%q", k, got[k])
			}
		}
	})

	t.Run("certificates are mounted as a directory so renewals reach the process", func(t *testing.T) {
		var found bool
		for _, m := range c.VolumeMounts {
			if m.SubPath != "" {
				t.Errorf("mount %s uses subPath, which never updates", m.Name)
			}
			found = found || (m.Name == "tls" && m.MountPath == "/etc/octogate/tls")
		}
		vi := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "tls" })
		if !found || vi < 0 || pod.Volumes[vi].Projected == nil || len(pod.Volumes[vi].Projected.Sources) == 0 ||
			pod.Volumes[vi].Projected.Sources[0].Secret == nil || pod.Volumes[vi].Projected.Sources[0].Secret.Name != fullname+"-tls" {
			t.Errorf("tls volume = %+v", pod.Volumes)
		}
	})

	t.Run("RBAC is least privilege", func(t *testing.T) {
		cr := get[rbacv1.ClusterRole](t, o, "ClusterRole", fullname)
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"admin"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"octogate.dev"}, Resources: []string{"accessrequests"}, Verbs: []string{"get", "list", "watch"}},
		}
		if len(cr.Rules) != len(want) {
			t.Fatalf("rules = %+v", cr.Rules)
		}
		for i := range want {
			g := cr.Rules[i]
			if !slices.Equal(g.APIGroups, want[i].APIGroups) || !slices.Equal(g.Resources, want[i].Resources) ||
				!slices.Equal(g.Verbs, want[i].Verbs) || !slices.Equal(g.ResourceNames, want[i].ResourceNames) {
				t.Errorf("rule %d = %+v, want %+v", i, g, want[i])
			}
		}
		role := get[rbacv1.Role](t, o, "Role", fullname+"-leader-election")
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"leases"}) || !slices.Equal(role.Rules[0].APIGroups, []string{"coordination.k8s.io"}) {
			t.Errorf("leader election role = %+v", role.Rules)
		}
		crb := get[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", fullname)
		if crb.RoleRef.Name != fullname || len(crb.Subjects) != 1 || crb.Subjects[0].Name != fullname || crb.Subjects[0].Namespace != namespace {
			t.Errorf("binding = %+v", crb)
		}
	})

	t.Run("PodDisruptionBudget keeps one pod", func(t *testing.T) {
		pdb := get[policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", fullname)
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
			t.Errorf("minAvailable = %v", pdb.Spec.MinAvailable)
		}
	})

	mw := get[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", fullname)
	vw := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, o, "ValidatingWebhookConfiguration", fullname)

	t.Run("webhook configurations", func(t *testing.T) {
		type hook struct {
			name        string
			cc          admissionregistrationv1.WebhookClientConfig
			rules       []admissionregistrationv1.RuleWithOperations
			side        *admissionregistrationv1.SideEffectClass
			versions    []string
			timeout     *int32
			failure     *admissionregistrationv1.FailurePolicyType
			conditions  []admissionregistrationv1.MatchCondition
			wantOps     []admissionregistrationv1.OperationType
			wantPath    string
			wantFailure admissionregistrationv1.FailurePolicyType
		}
		if len(mw.Webhooks) != 2 || len(vw.Webhooks) != 2 {
			t.Fatalf("webhooks: %d mutating, %d validating", len(mw.Webhooks), len(vw.Webhooks))
		}
		// The AccessRequest webhooks (docs/elevation.md) fail closed.
		for _, h := range []struct {
			name       string
			cc         admissionregistrationv1.WebhookClientConfig
			rules      []admissionregistrationv1.RuleWithOperations
			failure    *admissionregistrationv1.FailurePolicyType
			path       string
			conditions []admissionregistrationv1.MatchCondition
		}{
			{mw.Webhooks[1].Name, mw.Webhooks[1].ClientConfig, mw.Webhooks[1].Rules, mw.Webhooks[1].FailurePolicy, "/mutate/accessrequests", mw.Webhooks[1].MatchConditions},
			{vw.Webhooks[1].Name, vw.Webhooks[1].ClientConfig, vw.Webhooks[1].Rules, vw.Webhooks[1].FailurePolicy, "/validate/accessrequests", vw.Webhooks[1].MatchConditions},
		} {
			if len(h.conditions) != 0 {
				t.Errorf("%s: matchConditions %+v: system:masters must not skip the AccessRequest webhooks", h.name, h.conditions)
			}
			if len(h.rules) != 1 || !slices.Equal(h.rules[0].Resources, []string{"accessrequests"}) || !slices.Equal(h.rules[0].APIGroups, []string{"octogate.dev"}) ||
				h.failure == nil || *h.failure != admissionregistrationv1.Fail || h.cc.Service == nil || *h.cc.Service.Path != h.path {
				t.Errorf("%s: rules %+v failurePolicy %v service %+v", h.name, h.rules, h.failure, h.cc.Service)
			}
		}
		m, v := mw.Webhooks[0], vw.Webhooks[0]
		for _, h := range []hook{
			{m.Name, m.ClientConfig, m.Rules, m.SideEffects, m.AdmissionReviewVersions, m.TimeoutSeconds, m.FailurePolicy, m.MatchConditions,
				[]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, "/mutate/namespaces", admissionregistrationv1.Fail},
			{v.Name, v.ClientConfig, v.Rules, v.SideEffects, v.AdmissionReviewVersions, v.TimeoutSeconds, v.FailurePolicy, v.MatchConditions,
				// CREATE: template names and limits; UPDATE: ownership stays immutable.
				[]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, "/validate/namespaces", admissionregistrationv1.Ignore},
		} {
			if len(h.rules) != 1 || !slices.Equal(h.rules[0].Operations, h.wantOps) ||
				!slices.Equal(h.rules[0].Resources, []string{"namespaces"}) || !slices.Equal(h.rules[0].APIGroups, []string{""}) {
				t.Errorf("%s rules = %+v, want %v namespaces only", h.name, h.rules, h.wantOps)
			}
			if h.side == nil || *h.side != admissionregistrationv1.SideEffectClassNone || !slices.Equal(h.versions, []string{"v1"}) {
				t.Errorf("%s sideEffects %v reviewVersions %v", h.name, h.side, h.versions)
			}
			if h.timeout == nil || *h.timeout != 5 || h.failure == nil || *h.failure != h.wantFailure {
				t.Errorf("%s timeout %v failurePolicy %v, want 5 and %s", h.name, h.timeout, h.failure, h.wantFailure)
			}
			if len(h.conditions) != 1 || h.conditions[0].Expression != "!('system:masters' in request.userInfo.groups)" {
				t.Errorf("%s matchConditions = %+v", h.name, h.conditions)
			}
			if s := h.cc.Service; s == nil || s.Name != fullname || s.Namespace != namespace || s.Path == nil || *s.Path != h.wantPath || *s.Port != 443 {
				t.Errorf("%s service = %+v", h.name, h.cc.Service)
			}
			if len(h.cc.CABundle) == 0 {
				t.Errorf("%s has no caBundle", h.name)
			}
		}
	})

	t.Run("certificates chain to the caBundle", func(t *testing.T) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(mw.Webhooks[0].ClientConfig.CABundle) {
			t.Fatal("caBundle is not PEM")
		}
		tls := get[corev1.Secret](t, o, "Secret", fullname+"-tls")
		if tls.Type != corev1.SecretTypeTLS || string(tls.Data["ca.crt"]) != string(mw.Webhooks[0].ClientConfig.CABundle) {
			t.Errorf("tls Secret type %s, ca.crt differs from caBundle", tls.Type)
		}
		serving := parseCert(t, tls.Data["tls.crt"])
		for _, name := range []string{fullname, svcHost, svcHost + ".cluster.local"} {
			if _, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
				t.Errorf("serving certificate for %s: %v", name, err)
			}
		}
		// The client certificate chains to the client CA instead: see TestTwoCAs.
		if v := vw.Webhooks[0].ClientConfig.CABundle; string(v) != string(mw.Webhooks[0].ClientConfig.CABundle) {
			t.Error("the two webhook configurations have different CAs")
		}
	})

	t.Run("kube-apiserver files", func(t *testing.T) {
		api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		for kind, path := range map[string]string{"authn": "/authenticate", "authz": "/authorize"} {
			cfg, err := clientcmd.Load(api.Data[kind+".kubeconfig"])
			if err != nil {
				t.Fatalf("%s.kubeconfig: %v", kind, err)
			}
			cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
			if cl.Server != "https://"+svcHost+":443"+path || string(cl.CertificateAuthorityData) != string(api.Data["ca.crt"]) {
				t.Errorf("%s cluster = %s", kind, cl.Server)
			}
			u := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
			if string(u.ClientCertificateData) != string(api.Data["client.crt"]) || string(u.ClientKeyData) != string(api.Data["client.key"]) {
				t.Errorf("%s user does not present the client certificate", kind)
			}
		}
		adm, err := clientcmd.Load(api.Data["admission.kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		if u := adm.AuthInfos[svcHost+":443"]; u == nil || len(u.ClientCertificateData) == 0 {
			t.Errorf("admission.kubeconfig users = %v, want one named %s:443 (kube-apiserver matches the webhook's host:port)", adm.AuthInfos, svcHost)
		}
		var authz struct {
			APIVersion, Kind string
			Authorizers      []struct {
				Type, Name string
				Webhook    *struct {
					FailurePolicy              string `json:"failurePolicy"`
					SubjectAccessReviewVersion string `json:"subjectAccessReviewVersion"`
					ConnectionInfo             struct {
						Type           string `json:"type"`
						KubeConfigFile string `json:"kubeConfigFile"`
					} `json:"connectionInfo"`
				}
			}
		}
		if err := yaml.Unmarshal(api.Data["authorization-config.yaml"], &authz); err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, a := range authz.Authorizers {
			order = append(order, a.Type)
		}
		if authz.Kind != "AuthorizationConfiguration" || !slices.Equal(order, []string{"Node", "Webhook", "RBAC"}) ||
			authz.Authorizers[1].Webhook.ConnectionInfo.KubeConfigFile != "/etc/kubernetes/octogate/authz.kubeconfig" ||
			authz.Authorizers[1].Webhook.FailurePolicy != "NoOpinion" {
			t.Errorf("authorization-config.yaml = %+v", authz)
		}
		flags := string(api.Data["kube-apiserver-flags"])
		for _, f := range []string{
			"--authentication-token-webhook-config-file=/etc/kubernetes/octogate/authn.kubeconfig",
			"--authorization-config=/etc/kubernetes/octogate/authorization-config.yaml",
			"--admission-control-config-file=/etc/kubernetes/octogate/admission-config.yaml",
		} {
			if !strings.Contains(flags, f) {
				t.Errorf("flags %q lack %s", flags, f)
			}
		}
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		if cm.Data["authorization-config.yaml"] != string(api.Data["authorization-config.yaml"]) {
			t.Error("ConfigMap and Secret disagree on authorization-config.yaml")
		}
	})
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("not PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRequiresGitHubOrgs(t *testing.T) {
	e := setup(t)
	err := e.renderErr()
	if err == nil || !strings.Contains(err.Error(), "github.orgs is required") {
		t.Fatalf("err = %v, want a message naming github.orgs", err)
	}
}

func TestBadValuesFailAtInstall(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name, set, want string
	}{
		{name: "zero replicas", set: "replicaCount=0", want: "replicaCount"},
		{name: "unknown failure policy", set: "admission.mutate.failurePolicy=Maybe", want: "failurePolicy"},
		{name: "timeout beyond 30s", set: "admission.timeoutSeconds=31", want: "timeoutSeconds"},
		{name: "duration without unit", set: "tokenCache.ttl=60", want: "ttl"},
		{name: "misspelled top-level value", set: "replicas=3", want: "replicas"},
		{name: "misspelled nested value", set: "github.org={acme}", want: "org"},
		{name: "policy effect other than Allow or Deny", set: "policy.rules[0].name=x,policy.rules[0].effect=Permit,policy.rules[0].subjects[0].kind=User,policy.rules[0].subjects[0].name=u", want: "effect"},
		{name: "unknown log format", set: "logFormat=xml", want: "logFormat"},
		{name: "http webhook URL", set: "kubeAPIServer.webhookURL=http://10.0.0.10", want: "webhookURL"},
		{name: "org pin that is not a number", set: "github.orgs={acme=two}", want: "orgs"},
		{name: "token type that identifies no user", set: "github.tokenTypes={app-installation}", want: "tokenTypes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := e.renderErr("--set", orgs, "--set", tt.set)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a schema error naming %s", err, tt.want)
			}
		})
	}
}

func TestCertManager(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs, "--set", "certManager.enabled=true")
	for _, name := range []string{fullname + "-ca", fullname + "-client-ca", fullname + "-tls", fullname + "-kube-apiserver"} {
		if o.find("Secret", name) != nil {
			t.Errorf("Secret %s rendered although cert-manager issues the certificates", name)
		}
	}
	for _, kn := range [][2]string{
		{"Issuer", fullname + "-selfsigned"}, {"Issuer", fullname + "-ca"}, {"Issuer", fullname + "-client-ca"},
		{"Certificate", fullname + "-ca"}, {"Certificate", fullname + "-serving"},
		{"Certificate", fullname + "-client-ca"}, {"Certificate", fullname + "-kube-apiserver-client"},
	} {
		if o.find(kn[0], kn[1]) == nil {
			t.Errorf("no %s %s", kn[0], kn[1])
		}
	}
	serving := o.find("Certificate", fullname+"-serving")
	if s, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName"); s != fullname+"-tls" {
		t.Errorf("serving certificate secretName = %q, want the Secret the pods mount", s)
	}
	dns, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	if !slices.Contains(dns, svcHost) {
		t.Errorf("dnsNames = %v", dns)
	}
	mw := get[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", fullname)
	vw := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, o, "ValidatingWebhookConfiguration", fullname)
	for name, meta := range map[string]map[string]string{"mutating": mw.Annotations, "validating": vw.Annotations} {
		if meta["cert-manager.io/inject-ca-from"] != namespace+"/"+fullname+"-serving" {
			t.Errorf("%s annotations = %v", name, meta)
		}
	}
	if len(mw.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Error("caBundle set although cainjector owns it")
	}
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	if envMap(d.Spec.Template.Spec.Containers[0])["OCTOGATE_CLIENT_CA_FILE"] != "/etc/octogate/tls/client-ca.crt" {
		t.Error("client CA not configured with cert-manager")
	}
}

func TestServiceMonitorAndNetworkPolicy(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom",
		"--set", "networkPolicy.enabled=true")
	sm := o.find("ServiceMonitor", fullname)
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("labels = %v", sm.GetLabels())
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("endpoints = %v", eps)
	}
	ep := eps[0].(map[string]any)
	ca, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
	if ep["scheme"] != "https" || ep["path"] != "/metrics" || ep["port"] != "https" || ca != fullname+"-tls" {
		t.Errorf("endpoint = %v", ep)
	}
	np := o.find("NetworkPolicy", fullname)
	if np == nil {
		t.Fatal("no NetworkPolicy")
	}
	types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
	if !slices.Equal(types, []string{"Ingress", "Egress"}) {
		t.Errorf("policyTypes = %v", types)
	}
}

func TestCustomValues(t *testing.T) {
	e := setup(t)
	o := e.render(t, "-f", "testdata/custom-values.yaml")
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := envMap(c)

	t.Run("values reach the environment", func(t *testing.T) {
		want := map[string]string{
			"OCTOGATE_GITHUB_ORGS":              "acme,acme-labs",
			"OCTOGATE_GITHUB_API_URL":           "https://ghe.example.com/api/v3/",
			"OCTOGATE_GITHUB_CA_FILE":           "/etc/octogate/config/github-ca.crt",
			"OCTOGATE_GITHUB_TIMEOUT":           "3s",
			"OCTOGATE_USERNAME_PREFIX":          "gh:",
			"OCTOGATE_USERNAME_FORMAT":          "id",
			"OCTOGATE_TOKEN_CACHE_TTL":          "30s",
			"OCTOGATE_TOKEN_CACHE_NEGATIVE_TTL": "5s",
			"OCTOGATE_TOKEN_CACHE_SIZE":         "500",
			"OCTOGATE_POLICY_FILE":              "/etc/octogate/policy/policy.yaml",
			"OCTOGATE_ADMIN_GROUPS":             "gh:acme/platform-admins,gh:acme/sre",
			"OCTOGATE_OWNER_CLUSTERROLE":        "edit",
			"OCTOGATE_DEFAULT_QUOTA_FILE":       "/etc/octogate/config/default-quota.yaml",
			"OCTOGATE_LOG_FORMAT":               "json",
			"OCTOGATE_MAX_INFLIGHT":             "64",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s = %q, want %q", k, env[k], v)
			}
		}
	})

	t.Run("policy is a ConfigMap mounted as a directory", func(t *testing.T) {
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-policy")
		var p struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Rules      []struct {
				Name, Effect string
			} `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["policy.yaml"]), &p); err != nil {
			t.Fatal(err)
		}
		if p.APIVersion != "octogate.dev/v1alpha1" || p.Kind != "AuthorizationPolicy" || len(p.Rules) != 2 || p.Rules[0].Name != "platform-admins-everything" {
			t.Errorf("policy.yaml = %s", cm.Data["policy.yaml"])
		}
		var mounted bool
		for _, m := range c.VolumeMounts {
			mounted = mounted || (m.Name == "policy" && m.MountPath == "/etc/octogate/policy" && m.SubPath == "")
		}
		if !mounted {
			t.Errorf("policy mounts = %+v", c.VolumeMounts)
		}
		if _, ok := d.Spec.Template.Annotations["checksum/config"]; !ok {
			t.Error("no checksum/config annotation: quota or GitHub CA changes would not roll the pods")
		}
	})

	t.Run("config ConfigMap holds the quota and the GitHub CA", func(t *testing.T) {
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-config")
		var q corev1.ResourceQuotaSpec
		if err := yaml.UnmarshalStrict([]byte(cm.Data["default-quota.yaml"]), &q); err != nil {
			t.Fatal(err)
		}
		if q.Hard.Pods().String() != "50" {
			t.Errorf("quota = %+v", q)
		}
		if !strings.Contains(cm.Data["github-ca.crt"], "BEGIN CERTIFICATE") {
			t.Error("no GitHub CA")
		}
	})

	t.Run("scheduling values", func(t *testing.T) {
		if *d.Spec.Replicas != 3 || pod.PriorityClassName != "system-cluster-critical" || pod.NodeSelector["kubernetes.io/os"] != "linux" ||
			len(pod.Tolerations) != 1 || pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
			t.Errorf("pod spec = replicas %d, %+v", *d.Spec.Replicas, pod)
		}
		if len(pod.TopologySpreadConstraints) != 0 {
			t.Error("default topology spread added although affinity is set")
		}
		if c.Resources.Limits.Memory().String() != "512Mi" {
			t.Errorf("resources = %+v", c.Resources)
		}
	})

	t.Run("webhook failure policies and timeout", func(t *testing.T) {
		mw := get[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", fullname)
		vw := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, o, "ValidatingWebhookConfiguration", fullname)
		if *mw.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore || *vw.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail ||
			*mw.Webhooks[0].TimeoutSeconds != 10 {
			t.Errorf("mutate %v validate %v timeout %v", *mw.Webhooks[0].FailurePolicy, *vw.Webhooks[0].FailurePolicy, *mw.Webhooks[0].TimeoutSeconds)
		}
	})

	t.Run("owner ClusterRole is the only one bindable", func(t *testing.T) {
		cr := get[rbacv1.ClusterRole](t, o, "ClusterRole", fullname)
		for _, r := range cr.Rules {
			if slices.Contains(r.Verbs, "bind") && !slices.Equal(r.ResourceNames, []string{"edit"}) {
				t.Errorf("bind on %v", r.ResourceNames)
			}
		}
	})

	t.Run("a fixed ClusterIP is what kube-apiserver uses and the certificate names", func(t *testing.T) {
		api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		cfg, err := clientcmd.Load(api.Data["authn.kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		if s := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server; s != "https://10.96.0.50:443/authenticate" {
			t.Errorf("server = %s", s)
		}
		tls := get[corev1.Secret](t, o, "Secret", fullname+"-tls")
		serving := parseCert(t, tls.Data["tls.crt"])
		if err := serving.VerifyHostname("10.96.0.50"); err != nil {
			t.Error(err)
		}
		if !strings.Contains(string(api.Data["authorization-config.yaml"]), "/etc/kubernetes/webhooks/authz.kubeconfig") {
			t.Error("configDir not used")
		}
	})
}

func TestOwnershipDisabledHasNoKubernetesAccess(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs, "--set", "ownership.enabled=false", "--set", "replicaCount=1")
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PodDisruptionBudget"} {
		// The certs-renew CronJob's Role is bound to its own ServiceAccount (TestCertsRenewCronJob).
		names := slices.DeleteFunc(o.kinds()[kind], func(n string) bool { return n == fullname+"-certs-renew" })
		if len(names) > 0 {
			t.Errorf("%s %v rendered", kind, names)
		}
	}
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	if at := d.Spec.Template.Spec.AutomountServiceAccountToken; at == nil || *at {
		t.Error("service account token mounted although the controller is off")
	}
	if envMap(d.Spec.Template.Spec.Containers[0])["OCTOGATE_CONTROLLER"] != "false" {
		t.Error("OCTOGATE_CONTROLLER not false")
	}
}

func TestDecode(t *testing.T) {
	objs, err := Decode([]byte("---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n"))
	if err != nil || len(objs) != 1 || objs[0].GetName() != "a" {
		t.Fatalf("Decode = %v, %v", objs, err)
	}
	if _, err := Decode([]byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil {
		t.Error("an object without a name was accepted")
	}
}

func TestHelmPathWithoutBuild(t *testing.T) {
	if _, err := HelmPath(t.TempDir()); !errors.Is(err, ErrNoHelm) {
		t.Errorf("err = %v, want ErrNoHelm", err)
	}
}
