package credential

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// MergeKubeconfig adds add's clusters, users and contexts to dst (both client-go kubeconfigs)
// and leaves every other entry of dst as it was. An entry of the same name is replaced only
// when it is the same thing: a cluster with the same server (or with any server when the
// context of its name joins it to this issuer's session user: the issuer moved the cluster), a
// user whose exec plugin runs `credential --session-issuer issuer` (a previous login at this
// issuer), a context of the same cluster and user. Any other name taken is a conflict:
// MergeKubeconfig then changes nothing and its error lists every conflicting name, so that a
// login never turns another cluster's context into this issuer's. dst's current context is
// kept; add's becomes current only when dst has none.
func MergeKubeconfig(dst, add *clientcmdapi.Config, issuer string) error {
	var conflicts []string
	for name, c := range add.Clusters {
		if old, ok := dst.Clusters[name]; ok && old.Server != c.Server && !loggedIn(dst, name, issuer) {
			conflicts = append(conflicts, fmt.Sprintf("cluster %q is %s, not %s", name, old.Server, c.Server))
		}
	}
	for name := range add.AuthInfos {
		if old, ok := dst.AuthInfos[name]; ok && !loginUser(old, issuer) {
			conflicts = append(conflicts, fmt.Sprintf("user %q is not a session user of %s", name, issuer))
		}
	}
	for name, c := range add.Contexts {
		if old, ok := dst.Contexts[name]; ok && (old.Cluster != c.Cluster || old.AuthInfo != c.AuthInfo) {
			conflicts = append(conflicts, fmt.Sprintf("context %q is cluster %q and user %q", name, old.Cluster, old.AuthInfo))
		}
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return fmt.Errorf("names already used for something else: %s; rename or delete those entries (kubectl config rename-context, delete-cluster, delete-user) or write another file (--kubeconfig)",
			strings.Join(conflicts, "; "))
	}
	for name, c := range add.Clusters {
		dst.Clusters[name] = c
	}
	for name, u := range add.AuthInfos {
		dst.AuthInfos[name] = u
	}
	for name, c := range add.Contexts {
		dst.Contexts[name] = c
	}
	if dst.CurrentContext == "" {
		dst.CurrentContext = add.CurrentContext
	}
	return nil
}

// loginUser is whether u's exec plugin runs `credential ... --session-issuer issuer`.
func loginUser(u *clientcmdapi.AuthInfo, issuer string) bool {
	if u == nil || u.Exec == nil {
		return false
	}
	i := slices.Index(u.Exec.Args, "--session-issuer")
	return slices.Contains(u.Exec.Args, "credential") && i >= 0 && i+1 < len(u.Exec.Args) && u.Exec.Args[i+1] == issuer
}

// loggedIn is whether dst's context name joins cluster name to a session user of issuer: the
// entries an earlier login at issuer wrote.
func loggedIn(dst *clientcmdapi.Config, name, issuer string) bool {
	c := dst.Contexts[name]
	return c != nil && c.Cluster == name && loginUser(dst.AuthInfos[c.AuthInfo], issuer)
}
