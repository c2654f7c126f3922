package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/octogate/octogate/subjectaccessreview"
)

const (
	// ProxyRBACControllerName names the controller that keeps the RBAC of the proxy's groups,
	// in its logs and controller-runtime's metrics (controller="octogate-proxy-rbac").
	ProxyRBACControllerName = "octogate-proxy-rbac"
	// LabelProxyRBAC = "true" marks, besides LabelManagedBy, the ClusterRoles,
	// ClusterRoleBindings and RoleBindings of the proxy's groups: `kubectl get
	// clusterroles,clusterrolebindings,rolebindings -A -l octogate.dev/proxy-rbac=true` lists
	// them.
	LabelProxyRBAC = "octogate.dev/proxy-rbac"
	// AnnotationPolicyRule names the policy rule a proxy ClusterRole or binding grants; the
	// owner grant has none.
	AnnotationPolicyRule = "octogate.dev/policy-rule"

	// policyPoll is how often the controller looks for a new policy: a reload stores a new
	// *Policy, so comparing pointers is enough, and it is seen within this time.
	policyPoll = time.Second
)

// proxyRBACSelector selects the objects the proxy RBAC controller owns.
var proxyRBACSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelProxyRBAC: "true"})

// ProxyRBACRules returns the ClusterRole rules the proxy RBAC controller (Config.ProxyRBAC)
// needs on top of RBACRules: manage ClusterRoles and ClusterRoleBindings, and RoleBindings in
// every namespace (the bindings of rules restricted to namespaces; RBACRules holds the same,
// for the owner bindings), escalate on ClusterRoles (to write rules it does not hold itself: a
// policy rule may allow anything) and bind them
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping).
// Their names come from the policy, so neither can be limited by resourceNames: whoever holds
// these rules can grant anything.
func ProxyRBACRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings", "rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate", "bind"}},
	}
}

// proxyBindingName indexes the cached RoleBindings labelled LabelProxyRBAC by name: the
// RoleBindings of one Grant, in every namespace.
const proxyBindingName = "octogate.proxyRBAC.name"

// setupProxyRBAC registers the controller that keeps, for each subjectaccessreview.Grant of
// policy(), a ClusterRole named after the Grant and its bindings to the Group of the Grant's
// name: a ClusterRoleBinding, or for a Grant with Namespaces a RoleBinding in each existing
// namespace the Grant BindsIn (and none elsewhere), all named after the Grant, labelled
// LabelManagedBy and LabelProxyRBAC, with AnnotationPolicyRule. owned is the cache of
// labelled objects, with informers for ClusterRoles, ClusterRoleBindings and RoleBindings;
// Namespaces are read from mgr's cache. The controller runs on the leader only.
func setupProxyRBAC(mgr manager.Manager, owned cache.Cache, policy func() *subjectaccessreview.Policy, log *slog.Logger) error {
	r := &proxyRBAC{
		client:    mgr.GetClient(),
		owned:     owned,
		apiReader: mgr.GetAPIReader(),
		policy:    policy,
		log:       log,
	}
	err := owned.IndexField(context.Background(), &rbacv1.RoleBinding{}, proxyBindingName, func(o client.Object) []string {
		if o.GetLabels()[LabelProxyRBAC] != "true" {
			return nil
		}
		return []string{o.GetName()}
	})
	if err != nil {
		return fmt.Errorf("index RoleBindings by name: %w", err)
	}
	// Every event about a labelled binding reconciles its Grant's name, whatever the namespace.
	toGrant := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if obj.GetLabels()[LabelProxyRBAC] != "true" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ProxyRBACControllerName).
		WatchesRawSource(source.Kind(owned, client.Object(&rbacv1.ClusterRole{}), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Kind(owned, client.Object(&rbacv1.ClusterRoleBinding{}), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Kind(owned, client.Object(&rbacv1.RoleBinding{}), toGrant)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&corev1.Namespace{}), r.namespaceHandler())).
		WatchesRawSource(r.policySource(policyPoll)).
		WithLogConstructor(func(req *reconcile.Request) logr.Logger {
			l := logr.FromSlogHandler(log.Handler()).WithValues("controller", ProxyRBACControllerName)
			if req != nil {
				l = l.WithValues("name", req.Name)
			}
			return l
		}).
		Complete(r)
}

// namespaceHandler enqueues, when a Namespace appears, the Grants bound in it. A deleted
// Namespace takes its RoleBindings with it, whose events reconcile their Grants.
func (r *proxyRBAC) namespaceHandler() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			p := r.policy()
			if p == nil || e.Object == nil {
				return
			}
			for name, g := range r.grants(p) {
				if g.BindsIn(e.Object.GetName()) {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
				}
			}
		},
	}
}

// proxyRBAC reconciles one name: the ClusterRole, ClusterRoleBinding and RoleBindings of
// that name.
type proxyRBAC struct {
	client    client.Client // reads Namespaces from the manager's cache
	owned     client.Reader // ClusterRoles, ClusterRoleBindings, RoleBindings matching proxyRBACSelector
	apiReader client.Reader // the API server, for objects of our names that lack the labels
	policy    func() *subjectaccessreview.Policy
	log       *slog.Logger

	mu         sync.Mutex
	lastPolicy *subjectaccessreview.Policy
	lastGrants map[string]subjectaccessreview.Grant
}

// grants returns p's Grants by name, computed once per policy.
func (r *proxyRBAC) grants(p *subjectaccessreview.Policy) map[string]subjectaccessreview.Grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p != r.lastPolicy || r.lastGrants == nil {
		m := map[string]subjectaccessreview.Grant{}
		for _, g := range p.Grants() {
			m[g.Name] = g
		}
		r.lastPolicy, r.lastGrants = p, m
	}
	return r.lastGrants
}

// policySource enqueues, whenever policy() returns a new policy, the name of each of its
// Grants and of each object the controller owns, so new rules get their RBAC and removed ones
// lose it. It reports the policy's SkippedGrants once per policy. A nil policy (not loaded
// yet) enqueues nothing.
func (r *proxyRBAC) policySource(every time.Duration) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			var last *subjectaccessreview.Policy
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				if p := r.policy(); p != nil && p != last {
					if err := r.enqueueAll(ctx, p, q); err == nil {
						last = p
						for _, s := range p.SkippedGrants() {
							r.log.Warn("policy rule gets no proxy RBAC", "controller", ProxyRBACControllerName, "field", s.Field, "reason", s.Detail)
						}
					} else if ctx.Err() == nil {
						r.log.Debug("listing proxy RBAC objects failed; retrying", "controller", ProxyRBACControllerName, "err", err)
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
		return nil
	})
}

func (r *proxyRBAC) enqueueAll(ctx context.Context, p *subjectaccessreview.Policy, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	var roles rbacv1.ClusterRoleList
	if err := r.owned.List(ctx, &roles); err != nil {
		return err
	}
	var bindings rbacv1.ClusterRoleBindingList
	if err := r.owned.List(ctx, &bindings); err != nil {
		return err
	}
	var nsBindings rbacv1.RoleBindingList
	if err := r.owned.List(ctx, &nsBindings, client.HasLabels{LabelProxyRBAC}); err != nil {
		return err
	}
	add := func(name string) { q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}) }
	for name := range r.grants(p) {
		add(name)
	}
	for i := range roles.Items {
		add(roles.Items[i].Name)
	}
	for i := range bindings.Items {
		add(bindings.Items[i].Name)
	}
	for i := range nsBindings.Items {
		add(nsBindings.Items[i].Name)
	}
	return nil
}

// Reconcile makes the ClusterRole and the bindings named req.Name match the policy's Grant of
// that name, or deletes the labelled ones when there is none. Before the policy is loaded it
// changes nothing.
func (r *proxyRBAC) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := r.policy()
	if p == nil {
		return reconcile.Result{}, nil
	}
	g, want := r.grants(p)[req.Name]
	if !want {
		// The bindings first: a binding to a missing role grants nothing, but is noise.
		if err := r.keepRoleBindings(ctx, req.Name, nil); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.remove(ctx, req.Name, newBinding("")); err != nil {
			return reconcile.Result{}, fmt.Errorf("ClusterRoleBinding %s: %w", req.Name, err)
		}
		if err := r.removeRole(ctx, req.Name); err != nil {
			return reconcile.Result{}, fmt.Errorf("ClusterRole %s: %w", req.Name, err)
		}
		return reconcile.Result{}, nil
	}
	if err := r.keepRole(ctx, g); err != nil {
		return reconcile.Result{}, fmt.Errorf("ClusterRole %s: %w", g.Name, err)
	}
	if len(g.Namespaces) == 0 {
		if err := r.keepBinding(ctx, g, ""); err != nil {
			return reconcile.Result{}, fmt.Errorf("ClusterRoleBinding %s: %w", g.Name, err)
		}
		// RoleBindings left from when the rule had namespaces.
		return reconcile.Result{}, r.keepRoleBindings(ctx, g.Name, nil)
	}
	// The cluster-wide binding first: the group never holds more than the rule allows, though
	// it may briefly hold less.
	if err := r.remove(ctx, g.Name, newBinding("")); err != nil {
		return reconcile.Result{}, fmt.Errorf("ClusterRoleBinding %s: %w", g.Name, err)
	}
	return reconcile.Result{}, r.keepRoleBindings(ctx, g.Name, &g)
}

// keepRoleBindings makes the labelled RoleBindings named name be those of g: one in each
// existing namespace g BindsIn, except namespaces being deleted (kube-apiserver refuses new
// objects there); the others are deleted. A nil g deletes them all. It goes on past a
// namespace that fails and returns every error, each naming its namespace.
func (r *proxyRBAC) keepRoleBindings(ctx context.Context, name string, g *subjectaccessreview.Grant) error {
	var have rbacv1.RoleBindingList
	if err := r.owned.List(ctx, &have, client.MatchingFields{proxyBindingName: name}); err != nil {
		return fmt.Errorf("RoleBindings %s: list: %w", name, err)
	}
	var errs []error
	keep := map[string]bool{}
	if g != nil {
		var namespaces corev1.NamespaceList
		if err := r.client.List(ctx, &namespaces); err != nil {
			return fmt.Errorf("RoleBindings %s: list namespaces: %w", name, err)
		}
		for i := range namespaces.Items {
			ns := &namespaces.Items[i]
			if !g.BindsIn(ns.Name) {
				continue
			}
			keep[ns.Name] = true
			if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
				continue
			}
			if err := r.keepBinding(ctx, *g, ns.Name); err != nil {
				errs = append(errs, fmt.Errorf("RoleBinding %s/%s: %w", ns.Name, name, err))
			}
		}
	}
	for i := range have.Items {
		b := &have.Items[i]
		if keep[b.Namespace] {
			continue
		}
		if err := deleteObject(ctx, r.client, b); err != nil {
			errs = append(errs, fmt.Errorf("RoleBinding %s/%s: %w", b.Namespace, name, err))
			continue
		}
		r.log.Info("deleted RoleBinding "+name+" in "+b.Namespace+": the policy no longer grants it there", "controller", ProxyRBACControllerName, "name", name, "namespace", b.Namespace, "rule", b.Annotations[AnnotationPolicyRule])
	}
	return errors.Join(errs...)
}

// grantMeta is the metadata a Grant's objects carry, over existing's labels and annotations.
func grantMeta(g subjectaccessreview.Grant, existing metav1.ObjectMeta) metav1.ObjectMeta {
	l := managedLabels(existing.Labels)
	l[LabelProxyRBAC] = "true"
	a := maps.Clone(existing.Annotations)
	if g.Rule != "" {
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationPolicyRule] = g.Rule
	} else {
		delete(a, AnnotationPolicyRule)
	}
	existing.Name, existing.Labels, existing.Annotations = g.Name, l, a
	return existing
}

// metaCurrent reports whether obj carries the labels and annotation of g.
func metaCurrent(g subjectaccessreview.Grant, obj metav1.ObjectMeta) bool {
	rule, has := obj.Annotations[AnnotationPolicyRule]
	return obj.Labels[LabelManagedBy] == ManagedByValue && obj.Labels[LabelProxyRBAC] == "true" &&
		rule == g.Rule && has == (g.Rule != "")
}

func (r *proxyRBAC) keepRole(ctx context.Context, g subjectaccessreview.Grant) error {
	current := &rbacv1.ClusterRole{}
	found, err := getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Name: g.Name}, current, true)
	if err != nil {
		return err
	}
	if !found {
		desired := &rbacv1.ClusterRole{ObjectMeta: grantMeta(g, metav1.ObjectMeta{}), Rules: g.Rules}
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		r.changedRole("created", "ClusterRole", g)
		return nil
	}
	if metaCurrent(g, current.ObjectMeta) && current.AggregationRule == nil && equality.Semantic.DeepEqual(current.Rules, g.Rules) {
		return nil
	}
	current.ObjectMeta = grantMeta(g, current.ObjectMeta)
	// An aggregationRule would have the controller manager overwrite the rules.
	current.Rules, current.AggregationRule = g.Rules, nil
	if err := r.client.Update(ctx, current); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	r.changedRole("corrected", "ClusterRole", g)
	return nil
}

// binding is a ClusterRoleBinding or a RoleBinding, with the fields the controller keeps.
type binding struct {
	obj      client.Object
	meta     *metav1.ObjectMeta
	roleRef  *rbacv1.RoleRef
	subjects *[]rbacv1.Subject
	kind     string
}

// newBinding returns an empty ClusterRoleBinding when namespace is "", else an empty
// RoleBinding in namespace.
func newBinding(namespace string) binding {
	if namespace == "" {
		b := &rbacv1.ClusterRoleBinding{}
		return binding{obj: b, meta: &b.ObjectMeta, roleRef: &b.RoleRef, subjects: &b.Subjects, kind: "ClusterRoleBinding"}
	}
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}}
	return binding{obj: b, meta: &b.ObjectMeta, roleRef: &b.RoleRef, subjects: &b.Subjects, kind: "RoleBinding"}
}

// keepBinding makes the binding of g's ClusterRole to g's group, a ClusterRoleBinding when
// namespace is "", else a RoleBinding in namespace, as the controller keeps it. Creating one
// in a namespace being deleted, or already gone, is not an error: there is nothing to grant.
func (r *proxyRBAC) keepBinding(ctx context.Context, g subjectaccessreview.Grant, namespace string) error {
	current := newBinding(namespace)
	found, err := getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Namespace: namespace, Name: g.Name}, current.obj, true)
	if err != nil {
		return err
	}
	desired := newBinding(namespace)
	*desired.meta = grantMeta(g, metav1.ObjectMeta{Namespace: namespace})
	*desired.roleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.Name}
	*desired.subjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g.Name}}
	switch {
	case !found:
		if err := r.client.Create(ctx, desired.obj); err != nil {
			if namespace != "" && (apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)) {
				return nil
			}
			return fmt.Errorf("create: %w", err)
		}
		r.changed("created", desired, g)
	case *current.roleRef != *desired.roleRef:
		// roleRef is immutable: replace the binding.
		if err := deleteObject(ctx, r.client, current.obj); err != nil {
			return err
		}
		*desired.meta = grantMeta(g, metav1.ObjectMeta{Namespace: namespace, Labels: current.meta.Labels, Annotations: current.meta.Annotations})
		if err := r.client.Create(ctx, desired.obj); err != nil {
			return fmt.Errorf("recreate: %w", err)
		}
		r.changed("replaced", desired, g)
	case !metaCurrent(g, *current.meta) || !equality.Semantic.DeepEqual(*current.subjects, *desired.subjects):
		*current.meta = grantMeta(g, *current.meta)
		*current.subjects = *desired.subjects
		if err := r.client.Update(ctx, current.obj); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		r.changed("corrected", current, g)
	}
	return nil
}

// remove deletes the labelled binding of name (b's kind and namespace), if any; objects of
// that name without the labels are not the controller's.
func (r *proxyRBAC) remove(ctx context.Context, name string, b binding) error {
	found, err := getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Namespace: b.meta.Namespace, Name: name}, b.obj, false)
	if err != nil || !found {
		return err
	}
	if err := deleteObject(ctx, r.client, b.obj); err != nil {
		return err
	}
	r.log.Info("deleted "+b.kind+" "+name+": the policy no longer grants it", "controller", ProxyRBACControllerName, "name", name, "rule", b.meta.Annotations[AnnotationPolicyRule])
	return nil
}

// removeRole deletes the labelled ClusterRole name, if any.
func (r *proxyRBAC) removeRole(ctx context.Context, name string) error {
	role := &rbacv1.ClusterRole{}
	found, err := getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Name: name}, role, false)
	if err != nil || !found {
		return err
	}
	if err := deleteObject(ctx, r.client, role); err != nil {
		return err
	}
	r.log.Info("deleted ClusterRole "+name+": the policy no longer grants it", "controller", ProxyRBACControllerName, "name", name, "rule", role.Annotations[AnnotationPolicyRule])
	return nil
}

// changed logs one change the controller made to binding b.
func (r *proxyRBAC) changed(action string, b binding, g subjectaccessreview.Grant) {
	if b.meta.Namespace != "" {
		r.log.Info(action+" "+b.kind+" "+g.Name+" in "+b.meta.Namespace, "controller", ProxyRBACControllerName, "name", g.Name, "namespace", b.meta.Namespace, "rule", g.Rule)
		return
	}
	r.changedRole(action, b.kind, g)
}

// changedRole logs one change the controller made to a cluster-scoped object.
func (r *proxyRBAC) changedRole(action, kind string, g subjectaccessreview.Grant) {
	r.log.Info(action+" "+kind+" "+g.Name, "controller", ProxyRBACControllerName, "name", g.Name, "rule", g.Rule)
}
