package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/session"
)

const (
	sessionKeysSecret  = "octogate-session-keys"
	sessionKeysCronJob = "octogate-session-keys-rotate"
	sessionKeysUser    = "system:serviceaccount:" + chartNamespace + ":" + sessionKeysCronJob
)

// TestChartSessionKeysSurviveUpgradeAndRotate installs charts/octogate with sessions on, runs
// the rotation CronJob's command as its ServiceAccount (the test plays its pod: there are no
// nodes), and upgrades the release: the rotated key file is kept byte for byte, so a
// `helm upgrade` never replaces the keys live sessions were signed with. The ServiceAccount
// may not read another Secret.
func TestChartSessionKeysSurviveUpgradeAndRotate(t *testing.T) {
	root := requireBinaries(t, "etcd", "kube-apiserver", "helm")
	binary := octogateBinary(t, root)
	chart := filepath.Join(root, "charts", "octogate")
	api, cs, h := startHelmAPIServer(t, root)
	values := []string{"--set", "github.orgs={acme}", "--set", "session.enabled=true", "--set", "session.issuer=https://octogate.example.com",
		"--set", "session.audiences={cluster-a}", "--set", "session.audience=cluster-a"}

	h.mustRun(t, append([]string{"install", upgradeRelease, chart, "--namespace", chartNamespace, "--create-namespace", "--timeout", "90s"}, values...)...)
	installed := getSecret(t, cs, sessionKeysSecret)
	if _, err := session.ParseKeys(installed.Data["keys.pem"]); err != nil {
		t.Fatalf("installed keys.pem: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cj, err := cs.BatchV1().CronJobs(chartNamespace).Get(ctx, sessionKeysCronJob, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's CronJob: %v", err)
	}
	kubeconfig := userKubeconfig(t, api, sessionKeysUser, "system:serviceaccounts", "system:serviceaccounts:"+chartNamespace)
	args := append(slices.Clone(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args), "--kubeconfig="+kubeconfig)
	out := runOctogate(t, binary, args...)
	if !strings.Contains(out, "published ") {
		t.Errorf("first rotation %q, want a pending key published", out)
	}
	rotated := getSecret(t, cs, sessionKeysSecret)
	keys, err := session.ParseKeys(rotated.Data["keys.pem"])
	if err != nil || len(keys.Public()) != 2 {
		t.Fatalf("rotated keys.pem: %v, %v; want the installed signer and a pending key", keys, err)
	}
	if again := runOctogate(t, binary, args...); !strings.Contains(again, "unchanged") || getSecret(t, cs, sessionKeysSecret).ResourceVersion != rotated.ResourceVersion {
		t.Errorf("second rotation %q wrote the Secret, want nothing due", again)
	}

	h.mustRun(t, append([]string{"upgrade", upgradeRelease, chart, "--namespace", chartNamespace, "--timeout", "90s", "--set", "replicaCount=3"}, values...)...)
	if upgraded := getSecret(t, cs, sessionKeysSecret); !bytes.Equal(upgraded.Data["keys.pem"], rotated.Data["keys.pem"]) {
		t.Error("keys.pem changed across the upgrade: sessions signed with the rotated keys would be refused")
	}

	denied := slices.Clone(args)
	for i, a := range denied {
		if strings.HasPrefix(a, "--secret=") {
			denied[i] = "--secret=" + upgradeCASecret
		}
	}
	if b, err := exec.CommandContext(ctx, binary, denied...).CombinedOutput(); err == nil || !strings.Contains(string(b), "forbidden") {
		t.Errorf("rotating %s as %s: err %v, output %q; want forbidden", upgradeCASecret, sessionKeysUser, err, b)
	}
}
