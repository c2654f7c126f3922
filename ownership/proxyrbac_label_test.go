package ownership

import (
	"testing"

	"github.com/octogate/octogate/internal/cluster"
)

// The test clusters wait for the proxy RBAC objects by this label, spelled out there.
func TestProxyRBACLabelIsTheClusterPackages(t *testing.T) {
	if cluster.ProxyRBACLabel != LabelProxyRBAC {
		t.Fatalf("cluster.ProxyRBACLabel = %q, want LabelProxyRBAC %q", cluster.ProxyRBACLabel, LabelProxyRBAC)
	}
}
