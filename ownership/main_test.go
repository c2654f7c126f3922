package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/subjectaccessreview"
)

// The package's tests share one kube-apiserver + etcd (envtest, binaries from `make tools`)
// and one manager running the controller as the user controllerUser, who holds exactly
// RBACRules(testOwnerRole) and ProxyRBACRules: the tests therefore also prove those rules are
// enough.
const (
	controllerUser = "system:serviceaccount:octogate-system:octogate"
	// testOwnerRole grants something the controller itself lacks, so binding it needs the
	// bind verb.
	testOwnerRole = "octogate-test-owner"
)

var (
	admin        client.Client // system:masters, for the tests' own actions
	skipReason   string
	testQuota    = &corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20"), corev1.ResourceRequestsCPU: resource.MustParse("4")}}
	errNoBinary  = errors.New("kube-apiserver and etcd binaries not found in bin/k8s: run make tools")
	testLogLevel = slog.LevelWarn
	// testTemplates are the controller's namespace templates; templates_test.go sets them.
	testTemplates = &switchableTemplates{}
	// testPolicy is the proxy RBAC controller's policy; proxyrbac_test.go sets it. Nil until
	// then: the controller changes nothing.
	testPolicy atomic.Pointer[subjectaccessreview.Policy]
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets, err := filepath.Abs(cluster.BinDir(".."))
	if err == nil {
		if _, err = os.Stat(filepath.Join(assets, ".stamp")); err != nil {
			err = errNoBinary
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "ownership:", err)
			return 1
		}
		skipReason = err.Error()
		return m.Run()
	}

	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownership: start envtest:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "ownership: stop envtest:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, err := startController(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownership:", err)
		return 1
	}
	code := m.Run()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "ownership: manager:", err)
			code = 1
		}
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "ownership: manager did not stop within 30s")
		code = 1
	}
	return code
}

// startController grants controllerUser RBACRules and runs the controller as that user in a
// manager configured as `octogate serve` does (no metrics or health listener of its own).
func startController(ctx context.Context, cfg *rest.Config) (<-chan error, error) {
	var err error
	admin, err = client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: testOwnerRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "octogate-ownership"}, Rules: append(RBACRules(testOwnerRole), ProxyRBACRules()...)},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "octogate-ownership"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "octogate-ownership"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controllerUser}},
		},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}

	asController := rest.CopyConfig(cfg)
	asController.Impersonate = rest.ImpersonationConfig{UserName: controllerUser, Groups: []string{"system:authenticated"}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel}))
	mgr, err := manager.New(asController, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := Setup(mgr, Config{OwnerClusterRole: testOwnerRole, DefaultQuota: testQuota, OrphanOwnerGroup: testOrphanGroup, Templates: testTemplates, ProxyRBAC: testPolicy.Load, Logger: log}); err != nil {
		return nil, err
	}
	if testOrphaner, err = NewOrphaner(mgr, log); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

func requireAPIServer(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}
