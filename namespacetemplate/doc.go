// Package namespacetemplate owns the namespace templates file (OCTOGATE_NAMESPACE_TEMPLATES_FILE):
// an octogate.dev/v1alpha1 NamespaceTemplates document listing, in order, which creators a
// template applies to, how many namespaces a creator and the template may have, which names a
// creator may choose, which label and annotation keys owners may set (never keys under
// kubernetes.io, k8s.io, octogate.dev or their subdomains, see ReservedKey), and the objects
// (ResourceQuota, LimitRange, NetworkPolicy, RoleBinding) kept in every namespace created
// under it.
//
// Parse decodes the document strictly (unknown fields, wrong types, duplicate keys and more
// than one YAML document are refused, each with its field path); Store keeps the templates in
// step with the file (fsnotify plus a periodic hash check, as the authorization policy is),
// keeping the last good templates when an edit is invalid. The admission package decides the
// template and enforces names, limits and allowed keys; the ownership package renders the
// objects.
//
// The object kinds are those of the multi-tenancy recipe octogate follows:
// https://kubernetes.io/docs/concepts/security/multi-tenancy/ (quotas, limit ranges, network
// policies) and https://kubernetes.io/docs/concepts/policy/resource-quotas/.
package namespacetemplate
