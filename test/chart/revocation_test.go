package chart

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestGitHubWebhookValues(t *testing.T) {
	e := setup(t)
	o := e.render(t, "--set", orgs, "--set", "githubWebhook.existingSecret=gh-webhook", "--set", "orphanOwnerGroup=github:acme/platform")

	t.Run("the secret and the orphan group reach the pods", func(t *testing.T) {
		d := get[appsv1.Deployment](t, o, "Deployment", fullname)
		c := d.Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "OCTOGATE_GITHUB_WEBHOOK_SECRET" })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil ||
			c.Env[i].ValueFrom.SecretKeyRef.Name != "gh-webhook" || c.Env[i].ValueFrom.SecretKeyRef.Key != "webhook-secret" {
			t.Fatalf("OCTOGATE_GITHUB_WEBHOOK_SECRET = %+v", c.Env)
		}
		if got := envMap(c)["OCTOGATE_ORPHAN_OWNER_GROUP"]; got != "github:acme/platform" {
			t.Fatalf("OCTOGATE_ORPHAN_OWNER_GROUP = %q", got)
		}
	})
	t.Run("revocations RBAC is two ConfigMaps in the release namespace", func(t *testing.T) {
		role := get[rbacv1.Role](t, o, "Role", fullname+"-revocations")
		if role.Namespace != namespace {
			t.Fatalf("Role namespace %q", role.Namespace)
		}
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"octogate-revocations"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"octogate-github-removals"}, Verbs: []string{"get", "update"}},
		}
		if len(role.Rules) != len(want) {
			t.Fatalf("rules %+v", role.Rules)
		}
		for i, r := range role.Rules {
			if !slices.Equal(r.Verbs, want[i].Verbs) || !slices.Equal(r.ResourceNames, want[i].ResourceNames) || !slices.Equal(r.Resources, want[i].Resources) {
				t.Errorf("rule %d = %+v, want %+v", i, r, want[i])
			}
		}
		get[rbacv1.RoleBinding](t, o, "RoleBinding", fullname+"-revocations")
	})
	t.Run("without a webhook secret there is no revocations Role", func(t *testing.T) {
		if e.render(t, "--set", orgs).find("Role", fullname+"-revocations") != nil {
			t.Fatal("Role rendered without githubWebhook.existingSecret")
		}
	})
}
