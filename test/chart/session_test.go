package chart

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/octogate/octogate/session"
)

const (
	sessionKeysName = fullname + "-session-keys"
	rotateName      = fullname + "-session-keys-rotate"
)

var sessionValues = []string{"--set", orgs, "--set", "session.enabled=true", "--set", "session.issuer=https://octogate.example.com",
	"--set", "session.audiences={cluster-a,cluster-b}", "--set", "session.audience=cluster-a"}

func TestSessionsOffByDefault(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs)
	for _, kind := range []string{"Secret", "CronJob", "Role"} {
		for _, name := range []string{sessionKeysName, rotateName} {
			if o.find(kind, name) != nil {
				t.Errorf("%s %s rendered without session.enabled", kind, name)
			}
		}
	}
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	for name := range envMap(d.Spec.Template.Spec.Containers[0]) {
		if strings.HasPrefix(name, "OCTOGATE_SESSION_") {
			t.Errorf("%s set without session.enabled", name)
		}
	}
}

func TestSessions(t *testing.T) {
	e := setup(t)
	o := e.render(t, sessionValues...)
	d := get[appsv1.Deployment](t, o, "Deployment", fullname)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	t.Run("the pods issue and verify sessions with the keys of the Secret", func(t *testing.T) {
		want := map[string]string{
			"OCTOGATE_SESSION_ISSUER":       "https://octogate.example.com",
			"OCTOGATE_SESSION_AUDIENCES":    "cluster-a,cluster-b",
			"OCTOGATE_SESSION_TTL":          "5m",
			"OCTOGATE_SESSION_KEY_FILE":     "/etc/octogate/session/keys.pem",
			"OCTOGATE_SESSION_TRUST_ISSUER": "https://octogate.example.com",
			"OCTOGATE_SESSION_AUDIENCE":     "cluster-a",
		}
		env := envMap(c)
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s = %q, want %q", k, env[k], v)
			}
		}
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/octogate/session" })
		if i < 0 || !c.VolumeMounts[i].ReadOnly || c.VolumeMounts[i].SubPath != "" {
			t.Fatalf("mounts %+v: want /etc/octogate/session read-only, whole directory (a subPath mount is never updated)", c.VolumeMounts)
		}
		j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
		if j < 0 || pod.Volumes[j].Secret == nil || pod.Volumes[j].Secret.SecretName != sessionKeysName {
			t.Fatalf("volume %+v, want Secret %s", pod.Volumes, sessionKeysName)
		}
		s := get[corev1.Secret](t, o, "Secret", sessionKeysName)
		k, err := session.ParseKeys(s.Data["keys.pem"])
		if err != nil {
			t.Fatalf("the generated keys.pem does not load in octogate serve: %v", err)
		}
		if len(k.Public()) != 1 {
			t.Errorf("generated %d keys, want one signer (the first rotation adds the pending key)", len(k.Public()))
		}
	})

	t.Run("without session.audience the pods do not accept sessions at /authenticate", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(sessionValues), "--set", "session.audience=")...)
		env := envMap(get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec.Containers[0])
		if _, ok := env["OCTOGATE_SESSION_TRUST_ISSUER"]; ok || env["OCTOGATE_SESSION_ISSUER"] == "" {
			t.Errorf("env %v", env)
		}
	})

	cj := get[batchv1.CronJob](t, o, "CronJob", rotateName)
	job := cj.Spec.JobTemplate.Spec
	rpod := job.Template.Spec
	t.Run("the CronJob rotates the Secret's keys", func(t *testing.T) {
		if len(rpod.Containers) != 1 {
			t.Fatalf("containers = %+v", rpod.Containers)
		}
		rc := rpod.Containers[0]
		want := []string{"session", "keys", "rotate", "--secret=" + sessionKeysName, "--namespace=" + namespace, "--publish-for=10m", "--drop-after=1h10m"}
		if !slices.Equal(rc.Args, want) || rc.Image != c.Image || len(rc.Command) != 0 {
			t.Errorf("args %q image %q, want %q with the Deployment's image", rc.Args, rc.Image, want)
		}
		if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || rpod.RestartPolicy != corev1.RestartPolicyNever || len(rpod.Volumes) != 0 {
			t.Errorf("concurrency %s restart %s volumes %v", cj.Spec.ConcurrencyPolicy, rpod.RestartPolicy, rpod.Volumes)
		}
		sc := rc.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || rc.Resources.Limits.Memory().IsZero() {
			t.Errorf("securityContext %+v resources %+v", sc, rc.Resources)
		}
		svc := get[corev1.Service](t, o, "Service", fullname)
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(job.Template.Labels)) {
			t.Errorf("the Service selects the rotation pods %v", job.Template.Labels)
		}
	})

	t.Run("its ServiceAccount may get and update the session keys Secret only", func(t *testing.T) {
		if rpod.ServiceAccountName != rotateName || rpod.AutomountServiceAccountToken == nil || !*rpod.AutomountServiceAccountToken {
			t.Errorf("serviceAccountName %q automount %v", rpod.ServiceAccountName, rpod.AutomountServiceAccountToken)
		}
		sa := get[corev1.ServiceAccount](t, o, "ServiceAccount", rotateName)
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Error("the ServiceAccount mounts its token into every pod")
		}
		role := get[rbacv1.Role](t, o, "Role", rotateName)
		want := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{sessionKeysName}, Verbs: []string{"get", "update"}}
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, want.APIGroups) || !slices.Equal(role.Rules[0].Resources, want.Resources) ||
			!slices.Equal(role.Rules[0].ResourceNames, want.ResourceNames) || !slices.Equal(role.Rules[0].Verbs, want.Verbs) || len(role.Rules[0].NonResourceURLs) != 0 {
			t.Errorf("rules = %+v, want exactly %+v", role.Rules, want)
		}
		rb := get[rbacv1.RoleBinding](t, o, "RoleBinding", rotateName)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != rotateName || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != rotateName || rb.Subjects[0].Namespace != namespace {
			t.Errorf("binding = %+v", rb)
		}
	})

	t.Run("values reach it", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(sessionValues), "--set", "session.rotate.schedule=@daily", "--set", "session.rotate.publishFor=30m",
			"--set", "session.rotate.dropAfter=2h", "--set", "session.ttl=15m")...)
		cj := get[batchv1.CronJob](t, o, "CronJob", rotateName)
		args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
		if cj.Spec.Schedule != "@daily" || !slices.Contains(args, "--publish-for=30m") || !slices.Contains(args, "--drop-after=2h") {
			t.Errorf("schedule %q args %q", cj.Spec.Schedule, args)
		}
		if ttl := envMap(get[appsv1.Deployment](t, o, "Deployment", fullname).Spec.Template.Spec.Containers[0])["OCTOGATE_SESSION_TTL"]; ttl != "15m" {
			t.Errorf("OCTOGATE_SESSION_TTL = %q", ttl)
		}
		o = e.render(t, append(slices.Clone(sessionValues), "--set", "session.rotate.enabled=false")...)
		if o.find("CronJob", rotateName) != nil || o.find("Role", rotateName) != nil || o.find("Secret", sessionKeysName) == nil {
			t.Error("session.rotate.enabled=false: want the Secret without the CronJob and its Role")
		}
	})
}

func TestSessionValuesFailAtInstall(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{"no issuer", []string{"session.enabled=true", "session.audiences={a}"}, "session.issuer"},
		{"no audiences", []string{"session.enabled=true", "session.issuer=https://o.example.com"}, "session.audiences"},
		{"http issuer", []string{"session.enabled=true", "session.issuer=http://o.example.com", "session.audiences={a}"}, "issuer"},
		{"ttl without unit", []string{"session.ttl=300"}, "ttl"},
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
