package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/octogate/octogate/subjectaccessreview"
)

// SecondCheck names one authorization check kube-apiserver makes while serving a request,
// besides the request's own, in the words of docs/managed-clusters.md.
type SecondCheck struct {
	// Request is the kind of request that makes the check.
	Request string
	// Check is the attributes kube-apiserver authorizes.
	Check string
	// Note says how the proxy evaluates it, or why it does not.
	Note string
	// Source is where kube-apiserver makes the check (k8s.io/kubernetes path).
	Source string
}

// EnforcedSecondChecks are the second checks the proxy evaluates with the policy before it
// forwards a request: a Deny is answered 403, an Allow adds the allowing rule's group too.
var EnforcedSecondChecks = []SecondCheck{
	{
		Request: "`get` (WebSocket upgrade) of `pods/exec`, `pods/attach`, `pods/portforward`",
		Check:   "`create` on the same subresource, namespace and pod",
		Note:    "from the URL; feature `AuthorizePodWebsocketUpgradeCreatePermission`, on by default from 1.35",
		Source:  "pkg/registry/core/pod/rest/subresources.go",
	},
	{
		Request: "`create`, `update`, `patch` of `roles`, `clusterroles`",
		Check:   "`escalate` on the same resource, namespace and name (no name for `create`)",
		Note:    "from the URL; kube-apiserver asks before RBAC's rule-coverage check",
		Source:  "pkg/registry/rbac/escalation_check.go",
	},
	{
		Request: "`create`, `update`, `patch` of `rolebindings`, `clusterrolebindings`",
		Check:   "`bind` on `roles` or `clusterroles` (the roleRef's kind) named by the roleRef, in the binding's namespace (none for a ClusterRoleBinding), API group the roleRef's",
		Note:    "the roleRef of the body for `create` and `update`; for `patch`, of the stored binding (roleRef is immutable) and of the body whenever it decodes to a binding (a server-side apply creates a binding deleted meanwhile with it): both must pass; an empty roleRef `apiGroup` is `rbac.authorization.k8s.io`, as kube-apiserver defaults it, another is refused (`422`, as kube-apiserver's validation); also checked when an update changes only metadata, which kube-apiserver exempts",
		Source:  "pkg/registry/rbac/escalation_check.go",
	},
	{
		Request: "`update`, `patch` of `certificatesigningrequests/approval`",
		Check:   "`approve` on `signers` in `certificates.k8s.io` named the stored CSR's signerName, else `<domain>/*`: one Allow suffices",
		Note:    "the signerName of the stored CSR, which the proxy reads as the user (who needs `get` on it); the update must carry the resourceVersion read",
		Source:  "plugin/pkg/admission/certificates/approval",
	},
	{
		Request: "`update`, `patch` of `certificatesigningrequests/status`",
		Check:   "`sign` on `signers` named the stored CSR's signerName, else `<domain>/*`",
		Note:    "as for approval; also checked when the status's certificate and conditions do not change, which kube-apiserver exempts",
		Source:  "plugin/pkg/admission/certificates/signing",
	},
}

// NotEnforcedSecondChecks are second checks kube-apiserver can make that the proxy does not
// evaluate: through the proxy RBAC alone decides them, with the groups the proxy added.
var NotEnforcedSecondChecks = []SecondCheck{
	{
		Request: "`create`, `update` of `clustertrustbundles` with a signerName",
		Check:   "`attest` on `signers`",
		Note:    "the ClusterTrustBundle API is off by default; grant `attest` with RBAC only",
		Source:  "plugin/pkg/admission/certificates/ctbattest",
	},
	{
		Request: "writes setting `ownerReferences` with `blockOwnerDeletion`",
		Check:   "`update` on the owner's `finalizers` subresource",
		Note:    "admission plugin OwnerReferencesPermissionEnforcement, off by default; the owner's resource needs discovery",
		Source:  "plugin/pkg/admission/gc",
	},
	{
		Request: "any write a ValidatingAdmissionPolicy or MutatingAdmissionPolicy inspects",
		Check:   "whatever its CEL `authorizer` expressions ask",
		Note:    "the checks are the policy's own, unknown to the proxy",
		Source:  "staging/src/k8s.io/apiserver/pkg/cel/library/authz.go",
	},
	{
		Request: "`create` of `subjectaccessreviews`, `localsubjectaccessreviews`",
		Check:   "the attributes in the review's spec, for the user it names",
		Note:    "an answer about someone, not a permission of the requester; kube-apiserver answers with RBAC alone (SelfSubjectAccessReviews are answered by the proxy)",
		Source:  "pkg/registry/authorization/subjectaccessreview",
	},
	{
		Request: "every request through the proxy",
		Check:   "`impersonate` on `users`, `groups`, `uids`, `userextras/*` for the proxy's ServiceAccount",
		Note:    "the proxy's own identity; the policy's rules for that ServiceAccount are not consulted",
		Source:  "staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go",
	},
	{
		Request: "bindings and roles whose `bind` or `escalate` the policy has no opinion on",
		Check:   "RBAC's rule coverage: the user holds every rule of the role",
		Note:    "not an authorizer call: RBAC counts the permissions of the group of the rule that allowed the write as held, though a Deny above that rule may refuse some of them; behind the webhook only the user's own RBAC counts. Give `bind` and `escalate` explicitly in rules that allow writing RBAC objects",
		Source:  "pkg/registry/rbac/validation/rule.go",
	},
}

// maxCheckedBody bounds the request bodies the proxy reads for a second check: kube-apiserver's
// own limit on a request body (3 MiB, k8s.io/apiserver's MaxRequestBodyBytes). A larger body
// is answered 413 as kube-apiserver would.
const maxCheckedBody = 3 << 20

// maxStoredObject bounds the answer of a read of the stored object.
const maxStoredObject = 3 << 20

// The resources second checks are about.
var (
	rbacGroup       = rbacv1.GroupName
	certsGroup      = certificatesv1.GroupName
	csrResource     = schema.GroupResource{Group: certsGroup, Resource: "certificatesigningrequests"}
	writeVerbs      = map[string]bool{"create": true, "update": true, "patch": true}
	connectedPodSub = map[string]bool{"exec": true, "attach": true, "portforward": true}
	// checkedResources are the resources of requests with second checks.
	checkedResources = map[string]bool{
		"pods": true, "roles": true, "clusterroles": true, "rolebindings": true, "clusterrolebindings": true,
		csrResource.Resource: true,
	}
)

// check is one second check: kube-apiserver allows when the authorizer allows any one of alts
// (the signer checks try a name, then its domain's wildcard); refuse words its 403.
type check struct {
	alts   []subjectaccessreview.Attributes
	refuse func(user, reason string) *apierrors.StatusError
}

// checkRequest is what the second checks of a request are derived from.
type checkRequest struct {
	info   *request.RequestInfo
	base   subjectaccessreview.Attributes // the request's own attributes
	header http.Header
	// body returns the request's body (read once, at most maxCheckedBody bytes).
	body func() ([]byte, error)
	// stored reads the stored object at the request's path.
	stored func(ctx context.Context) (int, []byte, error)
}

// errTooLarge reports a body over maxCheckedBody.
var errTooLarge = errors.New("request body over 3 MiB")

// secondChecks are the checks kube-apiserver will make inside the request, besides its own,
// that the proxy can foresee (EnforcedSecondChecks), derived from the URL, the body and the
// stored object. An error is a *apierrors.StatusError to answer with.
func secondChecks(ctx context.Context, req checkRequest) ([]check, error) {
	info := req.info
	if !info.IsResourceRequest {
		return nil, nil
	}
	switch {
	case info.APIGroup == "" && info.Resource == "pods" && connectedPodSub[info.Subresource] && info.Verb != "create":
		a := withAttrs(req.base, "create", "", "pods", info.Subresource, info.Namespace, info.Name)
		return []check{{alts: []subjectaccessreview.Attributes{a}, refuse: refuseAs(schema.GroupResource{Resource: "pods"}, info.Name, a)}}, nil
	case info.APIGroup == rbacGroup && (info.Resource == "roles" || info.Resource == "clusterroles") && info.Subresource == "" && writeVerbs[info.Verb]:
		a := withAttrs(req.base, "escalate", rbacGroup, info.Resource, "", info.Namespace, info.Name)
		return []check{{alts: []subjectaccessreview.Attributes{a}, refuse: refuseAs(schema.GroupResource{Group: rbacGroup, Resource: info.Resource}, info.Name, a)}}, nil
	case info.APIGroup == rbacGroup && (info.Resource == "rolebindings" || info.Resource == "clusterrolebindings") && info.Subresource == "" && writeVerbs[info.Verb]:
		refs, err := bindingRoleRefs(ctx, req)
		if err != nil {
			return nil, err
		}
		var checks []check
		for _, ref := range refs {
			var res string
			switch ref.Kind {
			case "ClusterRole":
				res = "clusterroles"
			case "Role":
				res = "roles"
			default:
				continue // kube-apiserver makes no bind check, and refuses the kind
			}
			a := withAttrs(req.base, "bind", ref.APIGroup, res, "", info.Namespace, ref.Name)
			checks = append(checks, check{alts: []subjectaccessreview.Attributes{a}, refuse: refuseAs(schema.GroupResource{Group: rbacGroup, Resource: info.Resource}, info.Name, a)})
		}
		return checks, nil
	case info.APIGroup == certsGroup && info.Resource == csrResource.Resource && (info.Verb == "update" || info.Verb == "patch") &&
		(info.Subresource == "approval" || info.Subresource == "status"):
		verb := "approve"
		if info.Subresource == "status" {
			verb = "sign"
		}
		signer, err := storedSigner(ctx, req)
		if err != nil {
			return nil, err
		}
		domain, _, _ := strings.Cut(signer, "/")
		alts := []subjectaccessreview.Attributes{
			withAttrs(req.base, verb, certsGroup, "signers", "", "", signer),
			withAttrs(req.base, verb, certsGroup, "signers", "", "", domain+"/*"),
		}
		return []check{{alts: alts, refuse: func(user, reason string) *apierrors.StatusError {
			msg := fmt.Sprintf("user not permitted to %s requests with signerName %q", verb, signer)
			if reason != "" {
				msg += ": " + reason
			}
			return apierrors.NewForbidden(csrResource, info.Name, errors.New(msg))
		}}}, nil
	}
	return nil, nil
}

// withAttrs is base (the user) with a resource request's attributes.
func withAttrs(base subjectaccessreview.Attributes, verb, group, resource, sub, ns, name string) subjectaccessreview.Attributes {
	return subjectaccessreview.Attributes{
		User: base.User, UID: base.UID, Groups: base.Groups, Login: base.Login,
		ResourceRequest: true,
		Verb:            verb, APIGroup: group, Resource: resource, Subresource: sub,
		Namespace: ns, Name: name,
	}
}

// refuseAs is the 403 of a failed check a, about the request's object gr/name:
// `rolebindings.rbac.authorization.k8s.io "x" is forbidden: User "u" cannot bind resource
// "clusterroles" in API group "rbac.authorization.k8s.io" in the namespace "n": REASON`.
func refuseAs(gr schema.GroupResource, name string, a subjectaccessreview.Attributes) func(user, reason string) *apierrors.StatusError {
	return func(user, reason string) *apierrors.StatusError {
		return apierrors.NewForbidden(gr, name, errors.New(cannot(user, &request.RequestInfo{
			IsResourceRequest: true, Verb: a.Verb, APIGroup: a.APIGroup, Resource: a.Resource,
			Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
		}, reason)))
	}
}

// objectDecoder decodes rbac/v1 and certificates/v1 objects in JSON, YAML and protobuf with
// kube-apiserver's own serializers (case-sensitive field names, as kube-apiserver reads them).
var objectDecoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	_ = rbacv1.AddToScheme(s) // registers types only
	_ = certificatesv1.AddToScheme(s)
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// decodeAs decodes body as kube-apiserver decodes a request's body: the kind and version the
// URL gives unless the body names its own.
func decodeAs(body []byte, gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, _, err := objectDecoder.Decode(body, &gvk, nil)
	return obj, err
}

// bindingKinds are the kinds of the binding resources.
var bindingKinds = map[string]string{"rolebindings": "RoleBinding", "clusterrolebindings": "ClusterRoleBinding"}

// bindingRoleRefs are the roleRefs kube-apiserver's bind check may see, each with its apiGroup
// defaulted as kube-apiserver defaults it (boundRoleRef). For create and update: the body's.
// For a patch: the stored binding's when there is one (roleRef is immutable: a patch that
// changes it fails validation whatever the bind check says), and the body's whenever the body
// decodes to a binding, since the binding may be gone by the time kube-apiserver applies the
// patch, and a server-side apply then creates it with the body's roleRef. Both must pass. A
// server-side apply whose body does not decode is refused (400); another patch's body (a JSON
// patch, say) is not read for a roleRef, and without a stored binding kube-apiserver answers
// it 404.
func bindingRoleRefs(ctx context.Context, req checkRequest) ([]rbacv1.RoleRef, error) {
	info := req.info
	gvk := rbacv1.SchemeGroupVersion.WithKind(bindingKinds[info.Resource])
	var refs []rbacv1.RoleRef
	if info.Verb == "patch" {
		code, stored, err := req.stored(ctx)
		switch {
		case err != nil:
			return nil, err
		case code == http.StatusOK:
			ref, err := roleRefOf(stored, gvk)
			if err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("the stored binding: %w", err))
			}
			refs = append(refs, boundRoleRef(ref))
		case code != http.StatusNotFound:
			return nil, unreadable(info, code)
		}
	}
	body, err := req.body()
	if err != nil {
		return nil, bodyError(err)
	}
	ref, err := roleRefOf(body, gvk)
	switch {
	case err == nil:
	case info.Verb == "patch" && !isApply(patchType(req.header)):
		return refs, nil
	default:
		return nil, apierrors.NewBadRequest("octogate's proxy cannot read the binding's roleRef: " + err.Error())
	}
	ref = boundRoleRef(ref)
	if ref.APIGroup != rbacGroup {
		return nil, apierrors.NewInvalid(gvk.GroupKind(), info.Name, field.ErrorList{
			field.NotSupported(field.NewPath("roleRef", "apiGroup"), ref.APIGroup, []string{rbacGroup}),
		})
	}
	return append(refs, ref), nil
}

// boundRoleRef is ref as kube-apiserver's bind check sees it: an empty apiGroup defaulted to
// rbac.authorization.k8s.io, as decoding a binding does (SetDefaults_RoleBinding and
// SetDefaults_ClusterRoleBinding, k8s.io/kubernetes pkg/apis/rbac/v1/defaults.go). Another
// apiGroup fails kube-apiserver's validation ("supported values: rbac.authorization.k8s.io",
// pkg/apis/rbac/validation/validation.go), which the proxy answers itself.
func boundRoleRef(ref rbacv1.RoleRef) rbacv1.RoleRef {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacGroup
	}
	return ref
}

// patchType is the patch type kube-apiserver reads from a PATCH's Content-Type: the header up
// to its first ";" (unless that is its first character), neither parsed nor folded to lower
// case (k8s.io/apiserver/pkg/endpoints/handlers/patch.go, PatchResource). mime.ParseMediaType
// would refuse some that kube-apiserver takes, such as "application/apply-patch+yaml; a=1; a=2".
func patchType(h http.Header) types.PatchType {
	ct := h.Get("Content-Type")
	if i := strings.Index(ct, ";"); i > 0 {
		ct = ct[:i]
	}
	return types.PatchType(ct)
}

// isApply reports whether pt is a server-side apply, which creates a missing object.
func isApply(pt types.PatchType) bool {
	return pt == types.ApplyYAMLPatchType || pt == types.ApplyCBORPatchType
}

// roleRefOf decodes a RoleBinding or ClusterRoleBinding (gvk unless the body names its kind)
// and returns its roleRef.
func roleRefOf(body []byte, gvk schema.GroupVersionKind) (rbacv1.RoleRef, error) {
	obj, err := decodeAs(body, gvk)
	if err != nil {
		return rbacv1.RoleRef{}, err
	}
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		return b.RoleRef, nil
	case *rbacv1.ClusterRoleBinding:
		return b.RoleRef, nil
	}
	return rbacv1.RoleRef{}, fmt.Errorf("a %T, not a binding", obj)
}

var csrKind = certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest")

// storedSigner is the signerName of the stored CertificateSigningRequest the request updates,
// as the approval and signing checks read it (the old object); the request's body must carry
// that object's resourceVersion, so that a CSR deleted and created again under the same name
// between the read and the update fails kube-apiserver's optimistic concurrency check.
func storedSigner(ctx context.Context, req checkRequest) (string, error) {
	code, stored, err := req.stored(ctx)
	switch {
	case err != nil:
		return "", err
	case code == http.StatusNotFound:
		return "", apierrors.NewNotFound(csrResource, req.info.Name)
	case code != http.StatusOK:
		return "", unreadable(req.info, code)
	}
	obj, err := decodeAs(stored, csrKind)
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if err != nil || !ok {
		return "", apierrors.NewInternalError(fmt.Errorf("the stored CertificateSigningRequest does not decode (%w)", err))
	}
	body, err := req.body()
	if err != nil {
		return "", bodyError(err)
	}
	if rv := bodyResourceVersion(body); rv != csr.ResourceVersion {
		return "", apierrors.NewConflict(csrResource, req.info.Name,
			errors.New("octogate's proxy checks an approval against the CSR it reads: send the CSR's current metadata.resourceVersion"))
	}
	return csr.Spec.SignerName, nil
}

// bodyResourceVersion is metadata.resourceVersion of a CertificateSigningRequest or merge
// patch body in JSON, YAML or protobuf, "" when there is none or the body does not decode.
func bodyResourceVersion(body []byte) string {
	obj, err := decodeAs(body, csrKind)
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); err == nil && ok {
		return csr.ResourceVersion
	}
	return ""
}

// unreadable is the 403 for a request whose stored object the user may not read: the proxy
// cannot foresee its second check.
func unreadable(info *request.RequestInfo, code int) *apierrors.StatusError {
	return apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name,
		fmt.Errorf("octogate's proxy reads the stored object to check this %s as kube-apiserver will, and reading it was answered %d: get permission on it is needed through the proxy", info.Verb, code))
}

func bodyError(err error) *apierrors.StatusError {
	if errors.Is(err, errTooLarge) {
		return apierrors.NewRequestEntityTooLargeError("limit is 3145728")
	}
	return apierrors.NewBadRequest("reading the request body: " + err.Error())
}

// bodyOnce reads r's body at most once, up to maxCheckedBody bytes, and puts it back whole
// (what was read, then the rest) so that it is forwarded unchanged.
func bodyOnce(r *http.Request) func() ([]byte, error) {
	var (
		done bool
		body []byte
		err  error
	)
	return func() ([]byte, error) {
		if done {
			return body, err
		}
		done = true
		if r.Body == nil || r.Body == http.NoBody {
			return nil, nil
		}
		body, err = io.ReadAll(io.LimitReader(r.Body, maxCheckedBody+1))
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		if err == nil && len(body) > maxCheckedBody {
			err = errTooLarge
		}
		return body, err
	}
}

// decideChecks evaluates checks with the policy: the groups the Allows add, or the 403 of
// the first check that fails. A check fails when one of its alternatives is denied and none
// is allowed: kube-apiserver's RBAC would then decide with the rule groups the request
// carries, which grant regardless of the Deny. A check without opinion is left to RBAC, as
// behind the webhook.
func decideChecks(authz Authorizer, user string, checks []check) (groups []string, refusal *apierrors.StatusError) {
	for _, c := range checks {
		var allowed, denied *subjectaccessreview.Decision
		// In order, up to the first Allow, as kube-apiserver asks.
		for i := 0; i < len(c.alts) && allowed == nil; i++ {
			d := authz.Decide(&c.alts[i])
			switch {
			case d.Verdict == subjectaccessreview.Allow:
				allowed = &d
			case d.Verdict == subjectaccessreview.Deny && denied == nil:
				denied = &d
			}
		}
		switch {
		case allowed != nil:
			if g := allowed.Group(); g != "" {
				groups = append(groups, g)
			}
		case denied != nil:
			return nil, c.refuse(user, denied.Reason)
		}
	}
	return groups, nil
}

// checkInside evaluates the second checks of r (secondChecks) for u, whose request the policy
// decided d (not Deny): the groups their Allows add, or the answer that refuses r.
func (p *Proxy) checkInside(ctx context.Context, r *http.Request, u *user.DefaultInfo, base subjectaccessreview.Attributes, info *request.RequestInfo, d subjectaccessreview.Decision) ([]string, *apierrors.StatusError) {
	if !info.IsResourceRequest || !checkedResources[info.Resource] {
		return nil, nil // most requests: nothing to read or evaluate
	}
	checks, err := secondChecks(ctx, checkRequest{
		info:   info,
		base:   base,
		header: r.Header,
		body:   bodyOnce(r),
		stored: func(ctx context.Context) (int, []byte, error) {
			// As the user, with the groups the policy gives the request and the read.
			get := withAttrs(base, "get", info.APIGroup, info.Resource, "", info.Namespace, info.Name)
			gd := p.authz.Decide(&get)
			if gd.Verdict == subjectaccessreview.Deny {
				return http.StatusForbidden, nil, nil
			}
			as := *u
			as.Groups = slices.Clone(u.Groups)
			for _, g := range []string{d.Group(), gd.Group()} {
				if g != "" && !slices.Contains(as.Groups, g) {
					as.Groups = append(as.Groups, g)
				}
			}
			return p.forward.read(ctx, objectPath(info), &as)
		},
	})
	var st *apierrors.StatusError
	switch {
	case errors.As(err, &st):
		p.log.LogAttrs(ctx, slog.LevelInfo, "second check not evaluated", slog.String("user", u.Name), slog.String("verb", info.Verb),
			slog.String("resource", info.Resource), slog.String("namespace", info.Namespace), slog.String("error", st.Error()))
		p.metrics.refused.WithLabelValues("second_check", strings.ToLower(string(st.ErrStatus.Reason))).Inc()
		return nil, st
	case err != nil:
		p.log.LogAttrs(ctx, slog.LevelWarn, "kube-apiserver unreachable for a second check", slog.String("path", info.Path), slog.String("error", err.Error()))
		p.metrics.refused.WithLabelValues("unavailable", "second_check").Inc()
		return nil, apierrors.NewServiceUnavailable("octogate's proxy cannot reach the cluster's API server; retry")
	}
	groups, refusal := decideChecks(p.authz, u.Name, checks)
	if refusal != nil {
		p.log.LogAttrs(ctx, slog.LevelInfo, "request denied by a check inside it", slog.String("user", u.Name), slog.String("verb", info.Verb),
			slog.String("resource", info.Resource), slog.String("namespace", info.Namespace), slog.String("error", refusal.Error()))
		p.metrics.requests.WithLabelValues("denied").Inc()
	}
	return groups, refusal
}

// SecondCheckTable is checks as the Markdown table docs/managed-clusters.md shows: one row
// per check, with the request, the check, how (or why not) and where kube-apiserver makes it.
func SecondCheckTable(checks []SecondCheck) string {
	var b strings.Builder
	b.WriteString("| request | kube-apiserver's check | how | where |\n|---|---|---|---|\n")
	for _, c := range checks {
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", c.Request, c.Check, c.Note, c.Source)
	}
	return b.String()
}
