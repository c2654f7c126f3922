package ownership

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestSubjectFor(t *testing.T) {
	tests := []struct {
		name    string
		creator string
		want    rbacv1.Subject
		wantOK  bool
	}{
		{"GitHub user is a User", "github:octocat", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "github:octocat"}, true},
		{"plain user is a User", "alice@example.com", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice@example.com"}, true},
		{"service account is a ServiceAccount", "system:serviceaccount:ci:deployer", rbacv1.Subject{Kind: "ServiceAccount", Namespace: "ci", Name: "deployer"}, true},
		{"system:admin gets nothing", "system:admin", rbacv1.Subject{}, false},
		{"node gets nothing", "system:node:worker-1", rbacv1.Subject{}, false},
		{"anonymous gets nothing", "system:anonymous", rbacv1.Subject{}, false},
		{"service account without a name gets nothing", "system:serviceaccount:ci", rbacv1.Subject{}, false},
		{"service account with an invalid namespace gets nothing", "system:serviceaccount:CI:x", rbacv1.Subject{}, false},
		{"service account with extra colons gets nothing", "system:serviceaccount:ci:a:b", rbacv1.Subject{}, false},
		{"empty creator gets nothing", "", rbacv1.Subject{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := subjectFor(tc.creator)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("subjectFor(%q) = %+v, %v; want %+v, %v", tc.creator, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestLoadQuotaFile(t *testing.T) {
	tests := []struct {
		file    string
		want    *corev1.ResourceQuotaSpec
		wantErr string
	}{
		{file: "quota.yaml", want: &corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			"requests.cpu": resource.MustParse("4"), "requests.memory": resource.MustParse("8Gi"),
			"limits.memory": resource.MustParse("16Gi"), "pods": resource.MustParse("20"),
			"count/services.loadbalancers": resource.MustParse("0"),
		}}},
		{file: "quota.json", want: &corev1.ResourceQuotaSpec{
			Hard:   corev1.ResourceList{"pods": resource.MustParse("10")},
			Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating},
		}},
		{file: "quota-unknown-field.yaml", wantErr: `unknown field "hrad"`},
		{file: "quota-whole-object.yaml", wantErr: `unknown field "apiVersion"`},
		{file: "quota-bad-quantity.yaml", wantErr: "quantities must match"},
		{file: "quota-negative.yaml", wantErr: "hard.pods: -1 is negative"},
		{file: "quota-no-hard.yaml", wantErr: "hard: at least one resource limit is required"},
		{file: "quota-duplicate.yaml", wantErr: `"hard" already set`},
		{file: "quota-not-yaml.yaml", wantErr: "yaml"},
		{file: "missing.yaml", wantErr: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			got, err := LoadQuotaFile("testdata/" + tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.file) {
					t.Fatalf("err = %v, want one naming %s and containing %q", err, tc.file, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSetupRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"ClusterRole name with a slash", Config{OwnerClusterRole: "a/b"}, "OwnerClusterRole"},
		{"quota without limits", Config{DefaultQuota: &corev1.ResourceQuotaSpec{}}, "DefaultQuota: hard"},
		{"valid config still needs a manager", Config{}, "nil manager"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := Setup(nil, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Setup: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRBACRulesBindOnlyTheOwnerRole(t *testing.T) {
	for role, want := range map[string]string{"": "admin", "edit": "edit"} {
		var bind []string
		for _, r := range RBACRules(role) {
			for _, v := range r.Verbs {
				if v == "bind" || v == "escalate" || v == "*" {
					bind = append(bind, r.ResourceNames...)
				}
			}
		}
		if len(bind) != 1 || bind[0] != want {
			t.Errorf("RBACRules(%q) binds %v, want only %s", role, bind, want)
		}
	}
}
