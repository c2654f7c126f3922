package chart

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/octogate/octogate/proxy"
)

const (
	proxyName   = fullname + "-proxy"
	proxySecret = fullname + "-proxy-tls"
	proxySvc    = proxyName + "." + namespace + ".svc"
)

// proxyArgs turn the proxy on as a managed cluster needs it: a name users reach it at, and no
// client certificate (kube-apiserver there cannot present one).
var proxyArgs = []string{"--set", orgs, "--set", "proxy.enabled=true", "--set", "proxy.hosts={kube.example.com,203.0.113.7}",
	"--set", "clientAuth.enabled=false"}

// rulesEqual compares PolicyRules field by field, in order.
func rulesEqual(t *testing.T, what string, got, want []rbacv1.PolicyRule) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: rules = %+v, want %+v", what, got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !slices.Equal(g.APIGroups, w.APIGroups) || !slices.Equal(g.Resources, w.Resources) || !slices.Equal(g.Verbs, w.Verbs) ||
			!slices.Equal(g.ResourceNames, w.ResourceNames) || len(g.NonResourceURLs) != 0 {
			t.Errorf("%s: rule %d = %+v, want %+v", what, i, g, w)
		}
	}
}

func TestProxyOffByDefault(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs)
	for _, kn := range [][2]string{
		{"Service", proxyName}, {"ServiceAccount", proxyName}, {"ClusterRole", proxyName}, {"ClusterRoleBinding", proxyName},
		{"Role", proxyName + "-token"}, {"RoleBinding", proxyName + "-token"}, {"ClusterRole", fullname + "-proxy-rbac"},
		{"ClusterRoleBinding", fullname + "-proxy-rbac"}, {"Secret", proxySecret},
	} {
		if o.find(kn[0], kn[1]) != nil {
			t.Errorf("%s %s rendered with proxy.enabled=false", kn[0], kn[1])
		}
	}
	c := get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec.Containers[0]
	for k := range envMap(c) {
		if strings.HasPrefix(k, "OCTOGATE_PROXY_") {
			t.Errorf("%s set with proxy.enabled=false", k)
		}
	}
	for _, p := range c.Ports {
		if p.Name == "proxy" {
			t.Errorf("container port %+v with proxy.enabled=false", p)
		}
	}
	// The kube-apiserver wiring is rendered as before.
	if o.find("Secret", fullname+"-kube-apiserver") == nil {
		t.Error("no kube-apiserver Secret without the proxy")
	}
}

func TestProxyEnabled(t *testing.T) {
	e := setup(t)
	o := e.render(t, append(slices.Clone(proxyArgs),
		"--set-string", "proxy.service.annotations.service\\.beta\\.kubernetes\\.io/azure-load-balancer-tcp-idle-timeout=30",
		"--set", "proxy.service.loadBalancerSourceRanges={198.51.100.0/24}",
		"--set", "proxy.maxInflight=200", "--set", "proxy.maxInflightPerUser=20", "--set", "proxy.maxWatchesPerUser=50")...)
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	t.Run("Service: a LoadBalancer on 443 to the proxy port of the webhook pods", func(t *testing.T) {
		svc := get[corev1.Service](t, o, "Service", proxyName)
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 ||
			svc.Spec.Ports[0].TargetPort.String() != "proxy" || svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("spec = %+v", svc.Spec)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("selector %v does not select the pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
		if svc.Annotations["service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout"] != "30" {
			t.Errorf("annotations = %v, want proxy.service.annotations", svc.Annotations)
		}
		if !slices.Equal(svc.Spec.LoadBalancerSourceRanges, []string{"198.51.100.0/24"}) {
			t.Errorf("loadBalancerSourceRanges = %v", svc.Spec.LoadBalancerSourceRanges)
		}
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "proxy" })
		if i < 0 || c.Ports[i].ContainerPort != 8444 {
			t.Errorf("container ports = %+v, want proxy 8444", c.Ports)
		}
	})

	t.Run("environment", func(t *testing.T) {
		env := envMap(c)
		for k, v := range map[string]string{
			"OCTOGATE_PROXY_LISTEN":                ":8444",
			"OCTOGATE_PROXY_TLS_CERT_FILE":         "/etc/octogate/proxy-tls/tls.crt",
			"OCTOGATE_PROXY_TLS_KEY_FILE":          "/etc/octogate/proxy-tls/tls.key",
			"OCTOGATE_PROXY_SERVICE_ACCOUNT":       namespace + "/" + proxyName,
			"OCTOGATE_PROXY_RBAC":                  "true",
			"OCTOGATE_PROXY_MAX_INFLIGHT":          "200",
			"OCTOGATE_PROXY_MAX_INFLIGHT_PER_USER": "20",
			"OCTOGATE_PROXY_MAX_WATCHES_PER_USER":  "50",
			// The webhook listener and its own certificate are unchanged.
			"OCTOGATE_LISTEN":        ":8443",
			"OCTOGATE_TLS_CERT_FILE": "/etc/octogate/tls/tls.crt",
		} {
			if g, ok := env[k]; !ok || g != v {
				t.Errorf("%s = %q (set: %v), want %q", k, g, ok, v)
			}
		}
		if _, ok := env["OCTOGATE_CLIENT_CA_FILE"]; ok {
			t.Error("OCTOGATE_CLIENT_CA_FILE set with clientAuth.enabled=false")
		}
		// Without a client certificate, /authenticate and /authorize are not served: the
		// proxy decides in-process.
		if v, ok := env["OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT"]; ok {
			t.Errorf("OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT = %q with the proxy; want it unset (false)", v)
		}
		plain := get[appsv1.Deployment](t, e.render(t, proxyArgs...), "Deployment", fullname).Spec.Template.Spec.Containers[0]
		for _, k := range []string{"OCTOGATE_PROXY_MAX_INFLIGHT", "OCTOGATE_PROXY_MAX_INFLIGHT_PER_USER", "OCTOGATE_PROXY_MAX_WATCHES_PER_USER"} {
			if _, ok := envMap(plain)[k]; ok {
				t.Errorf("%s set although its value is 0 (the binary's default)", k)
			}
		}
	})

	t.Run("the proxy certificate is mounted as a directory, key and certificate only", func(t *testing.T) {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "proxy-tls" })
		if i < 0 || pod.Volumes[i].Projected == nil || len(pod.Volumes[i].Projected.Sources) != 1 {
			t.Fatalf("volumes = %+v", pod.Volumes)
		}
		src := pod.Volumes[i].Projected.Sources[0].Secret
		if src == nil || src.Name != proxySecret || len(src.Items) != 2 || src.Items[0].Key != "tls.crt" || src.Items[1].Key != "tls.key" {
			t.Errorf("proxy-tls source = %+v", src)
		}
		m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "proxy-tls" })
		if m < 0 || c.VolumeMounts[m].MountPath != "/etc/octogate/proxy-tls" || c.VolumeMounts[m].SubPath != "" || !c.VolumeMounts[m].ReadOnly {
			t.Errorf("mounts = %+v", c.VolumeMounts)
		}
	})

	t.Run("readiness stays /readyz on the webhook port", func(t *testing.T) {
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "https" {
			t.Errorf("readinessProbe = %+v", p)
		}
	})

	t.Run("the pods get their ServiceAccount token: TokenRequest and the upstream need it", func(t *testing.T) {
		if at := pod.AutomountServiceAccountToken; at == nil || !*at {
			t.Error("automountServiceAccountToken is not true")
		}
	})

	t.Run("the proxy's ServiceAccount may impersonate users, groups, uids and octogate's extras, nothing else", func(t *testing.T) {
		sa := get[corev1.ServiceAccount](t, o, "ServiceAccount", proxyName)
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Error("the proxy's ServiceAccount token is automounted; no pod runs as it")
		}
		extras := []string{"uids"}
		for _, k := range proxy.ImpersonatedExtraKeys() {
			extras = append(extras, "userextras/"+k)
		}
		rulesEqual(t, "ClusterRole "+proxyName, get[rbacv1.ClusterRole](t, o, "ClusterRole", proxyName).Rules, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: extras, Verbs: []string{"impersonate"}},
		})
		crb := get[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", proxyName)
		if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != proxyName || len(crb.Subjects) != 1 ||
			crb.Subjects[0].Kind != "ServiceAccount" || crb.Subjects[0].Name != proxyName || crb.Subjects[0].Namespace != namespace {
			t.Errorf("ClusterRoleBinding = %+v", crb)
		}
	})

	t.Run("octogate may create tokens for the proxy's ServiceAccount only", func(t *testing.T) {
		role := get[rbacv1.Role](t, o, "Role", proxyName+"-token")
		if role.Namespace != namespace {
			t.Errorf("Role namespace %q", role.Namespace)
		}
		rulesEqual(t, "Role "+proxyName+"-token", role.Rules, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{proxyName}, Verbs: []string{"create"}},
		})
		rb := get[rbacv1.RoleBinding](t, o, "RoleBinding", proxyName+"-token")
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != proxyName+"-token" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != fullname || rb.Subjects[0].Namespace != namespace {
			t.Errorf("RoleBinding = %+v", rb)
		}
	})

	t.Run("proxy RBAC: octogate manages ClusterRoles, ClusterRoleBindings and RoleBindings, with escalate and bind", func(t *testing.T) {
		rw := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
		rulesEqual(t, "ClusterRole "+fullname+"-proxy-rbac", get[rbacv1.ClusterRole](t, o, "ClusterRole", fullname+"-proxy-rbac").Rules, []rbacv1.PolicyRule{
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: append(slices.Clone(rw), "escalate", "bind")},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterrolebindings", "rolebindings"}, Verbs: rw},
		})
		crb := get[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", fullname+"-proxy-rbac")
		if crb.RoleRef.Name != fullname+"-proxy-rbac" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != fullname || crb.Subjects[0].Namespace != namespace {
			t.Errorf("ClusterRoleBinding = %+v", crb)
		}
		// The ownership controller's own ClusterRole is unchanged: no escalate, bind on the owner role only.
		for _, r := range get[rbacv1.ClusterRole](t, o, "ClusterRole", fullname).Rules {
			if slices.Contains(r.Verbs, "escalate") || (slices.Contains(r.Verbs, "bind") && !slices.Equal(r.ResourceNames, []string{"admin"})) {
				t.Errorf("ownership ClusterRole rule %+v", r)
			}
		}
	})

	t.Run("proxy.rbac=false: no rights on ClusterRoles, and the binary is told", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(proxyArgs), "--set", "proxy.rbac=false")...)
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
			if o.find(kind, fullname+"-proxy-rbac") != nil {
				t.Errorf("%s %s rendered with proxy.rbac=false", kind, fullname+"-proxy-rbac")
			}
		}
		c := get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec.Containers[0]
		if got := envMap(c)["OCTOGATE_PROXY_RBAC"]; got != "false" {
			t.Errorf("OCTOGATE_PROXY_RBAC = %q", got)
		}
		if o.find("ClusterRole", proxyName) == nil || o.find("Role", proxyName+"-token") == nil {
			t.Error("the impersonation RBAC depends on proxy.rbac")
		}
	})

	t.Run("the proxy certificate: proxy.hosts and the Service's names, from the serving CA", func(t *testing.T) {
		ca := get[corev1.Secret](t, o, "Secret", fullname+"-ca")
		s := get[corev1.Secret](t, o, "Secret", proxySecret)
		if s.Type != corev1.SecretTypeTLS || !bytes.Equal(s.Data["ca.crt"], ca.Data["tls.crt"]) {
			t.Errorf("Secret %s: type %s, ca.crt is the serving CA: %v", proxySecret, s.Type, bytes.Equal(s.Data["ca.crt"], ca.Data["tls.crt"]))
		}
		cert := parseCert(t, s.Data["tls.crt"])
		if cert.Subject.CommonName != "kube.example.com" || lifetime(cert) != 90 {
			t.Errorf("CN %q lifetime %d days, want the first of proxy.hosts and certs.certDays", cert.Subject.CommonName, lifetime(cert))
		}
		for _, name := range []string{"kube.example.com", "203.0.113.7", proxySvc, proxySvc + ".cluster.local"} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool(t, ca.Data["tls.crt"]), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("proxy certificate for %s: %v", name, err)
			}
		}
		if err := cert.VerifyHostname(svcHost); err == nil {
			t.Error("the proxy certificate names the webhook Service")
		}
	})

	t.Run("kube-apiserver wiring: not rendered, its ConfigMap says why; admission webhooks stay", func(t *testing.T) {
		if o.find("Secret", fullname+"-kube-apiserver") != nil {
			t.Error("kube-apiserver Secret rendered with the proxy")
		}
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		if len(cm.Data) != 1 || !strings.Contains(cm.Data["README"], "Not needed: proxy.enabled=true") {
			t.Errorf("ConfigMap data = %v", cm.Data)
		}
		mw := get[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", fullname)
		vw := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, o, "ValidatingWebhookConfiguration", fullname)
		if len(mw.Webhooks) != 2 || len(vw.Webhooks) != 2 || len(mw.Webhooks[0].ClientConfig.CABundle) == 0 {
			t.Error("admission webhooks missing or without caBundle")
		}
	})

	t.Run("certs-renew renews the proxy certificate too", func(t *testing.T) {
		cj := get[batchv1.CronJob](t, o, "CronJob", renewName)
		cs := cj.Spec.JobTemplate.Spec.Template.Spec.Containers
		if len(cs) != 2 || cs[1].Name != "proxy-certs-renew" {
			t.Fatalf("containers = %+v", cs)
		}
		want := []string{"certs", "renew", "--secret=" + proxySecret, "--ca-secret=" + fullname + "-ca", "--namespace=" + namespace,
			"--hosts=kube.example.com," + proxySvc + "," + proxySvc + ".cluster.local,203.0.113.7", "--validity=2160h"}
		if !slices.Equal(cs[1].Args, want) {
			t.Errorf("args\n %q\nwant\n %q", cs[1].Args, want)
		}
		role := get[rbacv1.Role](t, o, "Role", renewName)
		if n := slices.IndexFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.ResourceNames, []string{proxySecret}) && slices.Equal(r.Verbs, []string{"get", "update"})
		}); n < 0 {
			t.Errorf("renewal Role rules = %+v, want get and update on %s", role.Rules, proxySecret)
		}
	})

	t.Run("the NetworkPolicy lets kubectl reach the proxy port", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(proxyArgs), "--set", "networkPolicy.enabled=true")...)
		np := get[networkingv1.NetworkPolicy](t, o, "NetworkPolicy", fullname)
		found := false
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				found = found || (p.Port != nil && p.Port.String() == "proxy" && len(r.From) == 0)
			}
		}
		if !found {
			t.Errorf("ingress = %+v, want the proxy port from anywhere", np.Spec.Ingress)
		}
	})
}

func TestProxyCertificateSources(t *testing.T) {
	e := setup(t)
	t.Run("cert-manager issues it from the serving CA's Issuer", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(proxyArgs), "--set", "certManager.enabled=true")...)
		if o.find("Secret", proxySecret) != nil {
			t.Errorf("Secret %s rendered although cert-manager issues it", proxySecret)
		}
		u := o.find("Certificate", proxyName)
		if u == nil {
			t.Fatalf("no Certificate %s; have %v", proxyName, o.kinds())
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		str := func(path ...string) string { s, _, _ := unstructured.NestedString(spec, path...); return s }
		dns, _, _ := unstructured.NestedStringSlice(spec, "dnsNames")
		ips, _, _ := unstructured.NestedStringSlice(spec, "ipAddresses")
		if str("secretName") != proxySecret || str("issuerRef", "name") != fullname+"-ca" || str("commonName") != "kube.example.com" ||
			!slices.Equal(dns, []string{"kube.example.com", proxySvc, proxySvc + ".cluster.local"}) || !slices.Equal(ips, []string{"203.0.113.7"}) ||
			str("duration") != "2160h" || str("renewBefore") != "360h" {
			t.Errorf("Certificate spec = %v", spec)
		}
		if o.find("CronJob", renewName) != nil {
			t.Error("certs-renew CronJob rendered with cert-manager")
		}
	})
	t.Run("proxy.tls.existingSecret is mounted as it is, nothing issued", func(t *testing.T) {
		o := e.render(t, "--set", orgs, "--set", "proxy.enabled=true", "--set", "clientAuth.enabled=false", "--set", "proxy.tls.existingSecret=public-tls")
		if o.find("Secret", proxySecret) != nil || o.find("Secret", "public-tls") != nil {
			t.Error("a proxy certificate Secret rendered with proxy.tls.existingSecret")
		}
		pod := get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "proxy-tls" })
		if i < 0 || pod.Volumes[i].Projected.Sources[0].Secret.Name != "public-tls" {
			t.Errorf("volumes = %+v", pod.Volumes)
		}
		if cs := get[batchv1.CronJob](t, o, "CronJob", renewName).Spec.JobTemplate.Spec.Template.Spec.Containers; len(cs) != 1 {
			t.Errorf("certs-renew containers = %d, want the webhook certificate's only", len(cs))
		}
	})
}

func TestProxyBadValuesFailAtInstall(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no hosts", args: []string{"--set", "proxy.enabled=true", "--set", "clientAuth.enabled=false"}, want: "proxy.hosts is required"},
		{name: "client certificates required", args: []string{"--set", "proxy.enabled=true", "--set", "proxy.hosts={kube.example.com}"}, want: "clientAuth.enabled=false"},
		{name: "no client certificates and no proxy: reviews served to anyone only when asked", args: []string{"--set", "clientAuth.enabled=false"}, want: "clientAuth.reviewsWithoutClientCert=true"},
		{name: "proxy RBAC without the controller", args: []string{"--set", "proxy.enabled=true", "--set", "proxy.hosts={kube.example.com}",
			"--set", "clientAuth.enabled=false", "--set", "ownership.enabled=false"}, want: "proxy.rbac needs ownership.enabled"},
		{name: "a URL as a host", args: []string{"--set", "proxy.hosts={https://kube.example.com}"}, want: "hosts"},
		{name: "an unknown Service type", args: []string{"--set", "proxy.service.type=Ingress"}, want: "type"},
		{name: "a negative limit", args: []string{"--set", "proxy.maxWatchesPerUser=-1"}, want: "maxWatchesPerUser"},
		{name: "a misspelled value", args: []string{"--set", "proxy.host={kube.example.com}"}, want: "host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := e.renderErr(append([]string{"--set", orgs}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
	t.Run("proxy.rbac=false works without the controller", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(proxyArgs), "--set", "ownership.enabled=false", "--set", "proxy.rbac=false", "--set", "replicaCount=1")...)
		d := get[appsv1.Deployment](t, o, "Deployment", fullname)
		if at := d.Spec.Template.Spec.AutomountServiceAccountToken; at == nil || !*at {
			t.Error("no ServiceAccount token for the proxy with ownership.enabled=false")
		}
		if sa := get[corev1.ServiceAccount](t, o, "ServiceAccount", fullname); sa.AutomountServiceAccountToken == nil || !*sa.AutomountServiceAccountToken {
			t.Error("octogate's ServiceAccount does not automount its token")
		}
	})
}

// notes renders the chart's NOTES.txt (which `helm template` leaves out) through a copy of the
// chart with one more template: a ConfigMap holding the notes.
func (e env) notes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "octogate")
	if err := os.CopyFS(dir, os.DirFS(e.chart)); err != nil {
		t.Fatal(err)
	}
	wrapper := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rendered-notes\ndata:\n  notes: |\n" +
		`{{ include (print $.Template.BasePath "/NOTES.txt") . | indent 4 }}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-rendered-notes.yaml"), []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	copied := e
	copied.chart = dir
	return get[corev1.ConfigMap](t, copied.render(t, args...), "ConfigMap", "rendered-notes").Data["notes"]
}

func TestProxyNotes(t *testing.T) {
	e := setup(t)
	notes := e.notes(t, proxyArgs...)
	for _, want := range []string{
		"kube-apiserver needs no flags",
		"kubectl -n " + namespace + " get service " + proxyName,
		"Point kube.example.com at it",
		"get secret " + proxySecret,
		"octogate kubeconfig user --proxy https://kube.example.com --ca proxy-ca.crt",
		"escalate and bind ClusterRoles",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	for _, not := range []string{"kube-apiserver must now be told", "--authorization-config", "remove the flags"} {
		if strings.Contains(notes, not) {
			t.Errorf("NOTES with the proxy still say %q:\n%s", not, notes)
		}
	}
	if port := e.notes(t, append(slices.Clone(proxyArgs), "--set", "proxy.service.port=8443")...); !strings.Contains(port, "--proxy https://kube.example.com:8443 ") {
		t.Errorf("NOTES with proxy.service.port=8443 lack the port in the URL:\n%s", port)
	}
	if plain := e.notes(t, "--set", orgs); !strings.Contains(plain, "kube-apiserver must now be told") || strings.Contains(plain, "--proxy") {
		t.Errorf("NOTES without the proxy:\n%s", plain)
	}
}
