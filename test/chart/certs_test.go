package chart

import (
	"bytes"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

const renewName = fullname + "-certs-renew"

func pool(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no PEM certificate")
	}
	return p
}

// lifetime is how long c is valid, rounded to days.
func lifetime(c *x509.Certificate) int {
	return int(c.NotAfter.Sub(c.NotBefore).Round(24*time.Hour) / (24 * time.Hour))
}

// Chart-generated certificates: the serving CA issues the serving certificate only, the
// client CA issues kube-apiserver's client certificate only, and what is copied to the
// control plane (the kube-apiserver Secret) pairs the serving CA with the client certificate.
func TestTwoCAs(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs)
	servingCA := get[corev1.Secret](t, o, "Secret", fullname+"-ca")
	clientCA := get[corev1.Secret](t, o, "Secret", fullname+"-client-ca")
	tls := get[corev1.Secret](t, o, "Secret", fullname+"-tls")
	api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
	servingPool, clientPool := pool(t, servingCA.Data["tls.crt"]), pool(t, clientCA.Data["tls.crt"])

	t.Run("two distinct CAs", func(t *testing.T) {
		if bytes.Equal(servingCA.Data["tls.crt"], clientCA.Data["tls.crt"]) || bytes.Equal(servingCA.Data["tls.key"], clientCA.Data["tls.key"]) {
			t.Fatal("the serving CA and the client CA are the same")
		}
		for name, s := range map[string]*corev1.Secret{"serving": servingCA, "client": clientCA} {
			c := parseCert(t, s.Data["tls.crt"])
			if !c.IsCA || lifetime(c) != 3650 {
				t.Errorf("%s CA: IsCA %v, lifetime %d days, want a CA of certs.caDays (3650)", name, c.IsCA, lifetime(c))
			}
		}
		if !bytes.Equal(clientCA.Data["ca.crt"], clientCA.Data["tls.crt"]) {
			t.Error("client CA Secret's ca.crt is not its certificate")
		}
	})

	serving := parseCert(t, tls.Data["tls.crt"])
	client := parseCert(t, api.Data["client.crt"])
	serverAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

	t.Run("the serving certificate chains to the serving CA only", func(t *testing.T) {
		if _, err := serving.Verify(x509.VerifyOptions{Roots: servingPool, DNSName: svcHost, KeyUsages: serverAuth}); err != nil {
			t.Errorf("against the serving CA: %v", err)
		}
		if _, err := serving.Verify(x509.VerifyOptions{Roots: clientPool, KeyUsages: serverAuth}); err == nil {
			t.Error("the serving certificate verifies against the client CA")
		}
		if got := lifetime(serving); got != 90 {
			t.Errorf("serving certificate lifetime %d days, want certs.certDays (90)", got)
		}
	})

	t.Run("the client certificate chains to the client CA only", func(t *testing.T) {
		if _, err := client.Verify(x509.VerifyOptions{Roots: clientPool, KeyUsages: clientAuth}); err != nil {
			t.Errorf("against the client CA: %v", err)
		}
		if _, err := client.Verify(x509.VerifyOptions{Roots: servingPool, KeyUsages: clientAuth}); err == nil {
			t.Error("the client certificate verifies against the serving CA")
		}
		if client.Subject.CommonName != "kube-apiserver" {
			t.Errorf("client CN %q", client.Subject.CommonName)
		}
		if got := lifetime(client); got != 1825 {
			t.Errorf("client certificate lifetime %d days, want certs.clientCertDays (1825)", got)
		}
	})

	t.Run("kube-apiserver trusts the serving CA", func(t *testing.T) {
		mw := get[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", fullname)
		for what, got := range map[string][]byte{
			"kube-apiserver Secret ca.crt": api.Data["ca.crt"],
			"tls Secret ca.crt":            tls.Data["ca.crt"],
			"webhook caBundle":             mw.Webhooks[0].ClientConfig.CABundle,
		} {
			if !bytes.Equal(got, servingCA.Data["tls.crt"]) {
				t.Errorf("%s is not the serving CA", what)
			}
		}
	})

	t.Run("custom lifetimes", func(t *testing.T) {
		o := e.render(t, "--set", orgs, "--set", "certs.certDays=30", "--set", "certs.clientCertDays=400", "--set", "certs.caDays=1000")
		for _, c := range []struct {
			what string
			pem  []byte
			want int
		}{
			{"serving CA", get[corev1.Secret](t, o, "Secret", fullname+"-ca").Data["tls.crt"], 1000},
			{"client CA", get[corev1.Secret](t, o, "Secret", fullname+"-client-ca").Data["tls.crt"], 1000},
			{"serving certificate", get[corev1.Secret](t, o, "Secret", fullname+"-tls").Data["tls.crt"], 30},
			{"client certificate", get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver").Data["client.crt"], 400},
		} {
			if got := lifetime(parseCert(t, c.pem)); got != c.want {
				t.Errorf("%s: %d days, want %d", c.what, got, c.want)
			}
		}
	})
}

// Both certificate paths: the pods read the serving certificate and key and the client CA's
// certificate, and no CA key, through one projected volume that follows Secret updates.
func TestPodsMountOnlyTheClientCACertificate(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"chart-generated", nil},
		{"cert-manager", []string{"--set", "certManager.enabled=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := e.render(t, append([]string{"--set", orgs}, tc.args...)...)
			d := get[appsv1.Deployment](t, o, "Deployment", fullname)
			pod := d.Spec.Template.Spec
			if got := envMap(pod.Containers[0])["OCTOGATE_CLIENT_CA_FILE"]; got != "/etc/octogate/tls/client-ca.crt" {
				t.Errorf("OCTOGATE_CLIENT_CA_FILE = %q", got)
			}
			type item struct{ secret, key, path string }
			var got []item
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					t.Errorf("volume %s mounts Secret %s whole", v.Name, v.Secret.SecretName)
				}
				if v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					if src.Secret == nil {
						continue
					}
					if len(src.Secret.Items) == 0 {
						t.Errorf("volume %s projects every key of Secret %s", v.Name, src.Secret.Name)
					}
					for _, it := range src.Secret.Items {
						got = append(got, item{src.Secret.Name, it.Key, v.Name + "/" + it.Path})
					}
				}
			}
			want := []item{
				{fullname + "-tls", "tls.crt", "tls/tls.crt"},
				{fullname + "-tls", "tls.key", "tls/tls.key"},
				{fullname + "-client-ca", "ca.crt", "tls/client-ca.crt"},
			}
			if !slices.Equal(got, want) {
				t.Errorf("projected Secret keys = %+v, want %+v", got, want)
			}
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name == "tls" && (m.MountPath != "/etc/octogate/tls" || m.SubPath != "" || !m.ReadOnly) {
					t.Errorf("tls mount = %+v", m)
				}
			}
		})
	}
	t.Run("without clientAuth no client CA is mounted", func(t *testing.T) {
		o := e.render(t, "--set", orgs, "--set", "clientAuth.enabled=false", "--set", "clientAuth.reviewsWithoutClientCert=true")
		pod := get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec
		if _, ok := envMap(pod.Containers[0])["OCTOGATE_CLIENT_CA_FILE"]; ok {
			t.Error("OCTOGATE_CLIENT_CA_FILE set")
		}
		if v := envMap(pod.Containers[0])["OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT"]; v != "true" {
			t.Errorf("OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT = %q, want true as asked", v)
		}
		for _, v := range pod.Volumes {
			if v.Projected != nil && len(v.Projected.Sources) != 1 {
				t.Errorf("volume %s has %d sources, want the serving Secret only", v.Name, len(v.Projected.Sources))
			}
		}
	})
}

func TestCertManagerHasTwoCAs(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs, "--set", "certManager.enabled=true")
	spec := func(kind, name string) map[string]any {
		t.Helper()
		u := o.find(kind, name)
		if u == nil {
			t.Fatalf("no %s %s; have %v", kind, name, o.kinds())
		}
		s, _, _ := unstructured.NestedMap(u.Object, "spec")
		return s
	}
	str := func(m map[string]any, path ...string) string {
		s, _, _ := unstructured.NestedString(m, path...)
		return s
	}
	for _, ca := range []string{fullname + "-ca", fullname + "-client-ca"} {
		s := spec("Certificate", ca)
		if isCA, _, _ := unstructured.NestedBool(s, "isCA"); !isCA || str(s, "secretName") != ca || str(s, "issuerRef", "name") != fullname+"-selfsigned" {
			t.Errorf("Certificate %s = %v, want a self-signed CA in Secret %s", ca, s, ca)
		}
		if str(s, "privateKey", "rotationPolicy") != "Never" {
			t.Errorf("Certificate %s rotates its key on renewal: what it issued would stop verifying", ca)
		}
		if is := spec("Issuer", ca); str(is, "ca", "secretName") != ca {
			t.Errorf("Issuer %s = %v", ca, is)
		}
	}
	serving := spec("Certificate", fullname+"-serving")
	if str(serving, "issuerRef", "name") != fullname+"-ca" || str(serving, "secretName") != fullname+"-tls" ||
		str(serving, "duration") != "2160h" || str(serving, "renewBefore") != "360h" {
		t.Errorf("serving Certificate = %v, want the serving CA's, 2160h, renewed 360h before", serving)
	}
	client := spec("Certificate", fullname+"-kube-apiserver-client")
	if str(client, "issuerRef", "name") != fullname+"-client-ca" || str(client, "duration") != "43800h" || str(client, "renewBefore") != "" {
		t.Errorf("client Certificate = %v, want the client CA's, certManager.clientDuration (43800h), renewed at cert-manager's default", client)
	}
	usages, _, _ := unstructured.NestedStringSlice(client, "usages")
	if !slices.Contains(usages, "client auth") || slices.Contains(usages, "server auth") {
		t.Errorf("client usages = %v", usages)
	}
	o = e.render(t, "--set", orgs, "--set", "certManager.enabled=true", "--set", "certManager.clientDuration=17520h")
	if d, _, _ := unstructured.NestedString(o.find("Certificate", fullname+"-kube-apiserver-client").Object, "spec", "duration"); d != "17520h" {
		t.Errorf("certManager.clientDuration not used: %s", d)
	}
}

func TestCertsRenewCronJob(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs)
	cj := get[batchv1.CronJob](t, o, "CronJob", renewName)
	job := cj.Spec.JobTemplate.Spec
	pod := job.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("containers = %+v", pod.Containers)
	}
	c := pod.Containers[0]
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)

	t.Run("runs certs renew on the chart's Secrets daily", func(t *testing.T) {
		tls := get[corev1.Secret](t, o, "Secret", fullname+"-tls")
		serving := parseCert(t, tls.Data["tls.crt"])
		hosts := append([]string{serving.Subject.CommonName}, slices.DeleteFunc(slices.Clone(serving.DNSNames), func(n string) bool { return n == serving.Subject.CommonName })...)
		for _, ip := range serving.IPAddresses {
			hosts = append(hosts, ip.String())
		}
		want := []string{"certs", "renew", "--secret=" + fullname + "-tls", "--ca-secret=" + fullname + "-ca", "--namespace=" + namespace,
			"--hosts=" + strings.Join(hosts, ","), "--validity=2160h"}
		if !slices.Equal(c.Args, want) {
			t.Errorf("args\n %q\nwant (the serving certificate's names, CN first)\n %q", c.Args, want)
		}
		if c.Image != d.Spec.Template.Spec.Containers[0].Image || len(c.Command) != 0 {
			t.Errorf("image %q command %v, want the Deployment's image and entrypoint", c.Image, c.Command)
		}
		if cj.Spec.Schedule != "17 3 * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("schedule %q concurrency %s", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
		}
		if pod.RestartPolicy != corev1.RestartPolicyNever || job.ActiveDeadlineSeconds == nil {
			t.Errorf("restartPolicy %s activeDeadlineSeconds %v", pod.RestartPolicy, job.ActiveDeadlineSeconds)
		}
	})

	t.Run("is hardened like the webhook pods", func(t *testing.T) {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container securityContext = %+v", sc)
		}
		if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("pod securityContext = %+v", psc)
		}
		if c.Resources.Limits.Memory().IsZero() || len(pod.Volumes) != 0 {
			t.Errorf("resources %+v volumes %+v, want a memory limit and no volume", c.Resources, pod.Volumes)
		}
	})

	t.Run("its pods are not the Service's", func(t *testing.T) {
		svc := get[corev1.Service](t, o, "Service", fullname)
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		if sel.Matches(labels.Set(job.Template.Labels)) {
			t.Errorf("the Service's selector %v selects the renewal pods %v", svc.Spec.Selector, job.Template.Labels)
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Error("the Service does not select the webhook pods")
		}
	})

	t.Run("its ServiceAccount may get the CA and get and update the serving Secret only", func(t *testing.T) {
		if pod.ServiceAccountName != renewName || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
			t.Errorf("serviceAccountName %q automount %v", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
		}
		sa := get[corev1.ServiceAccount](t, o, "ServiceAccount", renewName)
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Error("the ServiceAccount mounts its token into every pod, not only the renewal pods")
		}
		role := get[rbacv1.Role](t, o, "Role", renewName)
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{fullname + "-ca"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{fullname + "-tls"}, Verbs: []string{"get", "update"}},
		}
		if len(role.Rules) != len(want) {
			t.Fatalf("rules = %+v", role.Rules)
		}
		for i, r := range role.Rules {
			if !slices.Equal(r.APIGroups, want[i].APIGroups) || !slices.Equal(r.Resources, want[i].Resources) ||
				!slices.Equal(r.ResourceNames, want[i].ResourceNames) || !slices.Equal(r.Verbs, want[i].Verbs) {
				t.Errorf("rule %d = %+v, want %+v", i, r, want[i])
			}
		}
		rb := get[rbacv1.RoleBinding](t, o, "RoleBinding", renewName)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != renewName || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != renewName || rb.Subjects[0].Namespace != namespace {
			t.Errorf("binding = %+v", rb)
		}
	})

	t.Run("values reach it", func(t *testing.T) {
		o := e.render(t, "-f", "testdata/custom-values.yaml")
		cj := get[batchv1.CronJob](t, o, "CronJob", renewName)
		pod := cj.Spec.JobTemplate.Spec.Template.Spec
		args := pod.Containers[0].Args
		if cj.Spec.Schedule != "0 4 * * 1" || !slices.Contains(args, "--before=480h") || !slices.Contains(args, "--validity=1440h") {
			t.Errorf("schedule %q args %q, want the custom schedule, --before=480h, --validity=1440h", cj.Spec.Schedule, args)
		}
		if !strings.HasPrefix(pod.Containers[0].Image, "registry.example.com/octogate:") || len(pod.ImagePullSecrets) == 0 || pod.NodeSelector["kubernetes.io/os"] != "linux" {
			t.Errorf("image %q pull secrets %v node selector %v", pod.Containers[0].Image, pod.ImagePullSecrets, pod.NodeSelector)
		}
		if !strings.Contains(strings.Join(args, " "), "10.96.0.50") {
			t.Errorf("--hosts lacks service.clusterIP: %q", args)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"not with cert-manager", []string{"--set", "certManager.enabled=true"}},
		{"not when disabled", []string{"--set", "certs.renew.enabled=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := e.render(t, append([]string{"--set", orgs}, tc.args...)...)
			for _, kind := range []string{"CronJob", "ServiceAccount", "Role", "RoleBinding"} {
				if o.find(kind, renewName) != nil {
					t.Errorf("%s %s rendered", kind, renewName)
				}
			}
		})
	}

	t.Run("bad values fail at install", func(t *testing.T) {
		for _, tc := range []struct{ set, want string }{
			{"certs.renew.before=2160h", "certs.renew.before"},
			{"certs.renew.before=30d", "before"},
			{"certs.renew.schedule=daily", "schedule"},
			{"certs.clientCertDays=0", "clientCertDays"},
			{"certManager.clientDuration=5y", "clientDuration"},
		} {
			if err := e.renderErr("--set", orgs, "--set", tc.set); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want one naming %s", tc.set, err, tc.want)
			}
		}
	})
}
