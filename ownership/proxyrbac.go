package ownership

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// LabelProxyRBAC = "true" marks, besides LabelManagedBy, the ClusterRoles and
	// ClusterRoleBindings of the proxy's groups: `kubectl get clusterroles,clusterrolebindings
	// -l octogate.dev/proxy-rbac=true` lists them.
	LabelProxyRBAC = "octogate.dev/proxy-rbac"
	// AnnotationPolicyRule names the policy rule a proxy ClusterRole or ClusterRoleBinding
	// grants; the owner grant has none.
	AnnotationPolicyRule = "octogate.dev/policy-rule"

	// policyPoll is how often the controller looks for a new policy: a reload stores a new
	// *Policy, so comparing pointers is enough, and it is seen within this time.
	policyPoll = time.Second
)

// proxyRBACSelector selects the objects the proxy RBAC controller owns.
var proxyRBACSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelProxyRBAC: "true"})

// ProxyRBACRules returns the ClusterRole rules the proxy RBAC controller (Config.ProxyRBAC)
// needs on top of RBACRules: manage ClusterRoles and ClusterRoleBindings, escalate on
// ClusterRoles (to write rules it does not hold itself: a policy rule may allow anything) and
// bind them (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping).
// Their names come from the policy, so neither can be limited by resourceNames: whoever holds
// these rules can grant anything.
func ProxyRBACRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate", "bind"}},
	}
}

// setupProxyRBAC registers the controller that keeps, for each subjectaccessreview.Grant of
// policy(), a ClusterRole and a ClusterRoleBinding (to the Group of the Grant's name), both
// named after the Grant, labelled LabelManagedBy and LabelProxyRBAC, with
// AnnotationPolicyRule. owned is the cache of labelled objects, with informers for
// ClusterRoles and ClusterRoleBindings. The controller runs on the leader only.
func setupProxyRBAC(mgr manager.Manager, owned cache.Cache, policy func() *subjectaccessreview.Policy, log *slog.Logger) error {
	r := &proxyRBAC{
		client:    mgr.GetClient(),
		owned:     owned,
		apiReader: mgr.GetAPIReader(),
		policy:    policy,
		log:       log,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ProxyRBACControllerName).
		WatchesRawSource(source.Kind(owned, client.Object(&rbacv1.ClusterRole{}), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Kind(owned, client.Object(&rbacv1.ClusterRoleBinding{}), &handler.EnqueueRequestForObject{})).
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

// proxyRBAC reconciles one name: the ClusterRole and ClusterRoleBinding of that name.
type proxyRBAC struct {
	client    client.Client
	owned     client.Reader // ClusterRoles and ClusterRoleBindings matching proxyRBACSelector
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
	return nil
}

// Reconcile makes the ClusterRole and ClusterRoleBinding named req.Name match the policy's
// Grant of that name, or deletes the labelled ones when there is none. Before the policy is
// loaded it changes nothing.
func (r *proxyRBAC) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := r.policy()
	if p == nil {
		return reconcile.Result{}, nil
	}
	g, want := r.grants(p)[req.Name]
	if !want {
		// The binding first: a binding to a missing role grants nothing, but is noise.
		if err := r.remove(ctx, req.Name, &rbacv1.ClusterRoleBinding{}); err != nil {
			return reconcile.Result{}, fmt.Errorf("ClusterRoleBinding %s: %w", req.Name, err)
		}
		if err := r.remove(ctx, req.Name, &rbacv1.ClusterRole{}); err != nil {
			return reconcile.Result{}, fmt.Errorf("ClusterRole %s: %w", req.Name, err)
		}
		return reconcile.Result{}, nil
	}
	if err := r.keepRole(ctx, g); err != nil {
		return reconcile.Result{}, fmt.Errorf("ClusterRole %s: %w", g.Name, err)
	}
	if err := r.keepBinding(ctx, g); err != nil {
		return reconcile.Result{}, fmt.Errorf("ClusterRoleBinding %s: %w", g.Name, err)
	}
	return reconcile.Result{}, nil
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
		r.changed("created", "ClusterRole", g)
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
	r.changed("corrected", "ClusterRole", g)
	return nil
}

func (r *proxyRBAC) keepBinding(ctx context.Context, g subjectaccessreview.Grant) error {
	current := &rbacv1.ClusterRoleBinding{}
	found, err := getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Name: g.Name}, current, true)
	if err != nil {
		return err
	}
	desired := &rbacv1.ClusterRoleBinding{
		ObjectMeta: grantMeta(g, metav1.ObjectMeta{}),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g.Name}},
	}
	switch {
	case !found:
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		r.changed("created", "ClusterRoleBinding", g)
	case current.RoleRef != desired.RoleRef:
		// roleRef is immutable: replace the binding.
		if err := deleteObject(ctx, r.client, current); err != nil {
			return err
		}
		desired.ObjectMeta = grantMeta(g, metav1.ObjectMeta{Labels: current.Labels, Annotations: current.Annotations})
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("recreate: %w", err)
		}
		r.changed("replaced", "ClusterRoleBinding", g)
	case !metaCurrent(g, current.ObjectMeta) || !equality.Semantic.DeepEqual(current.Subjects, desired.Subjects):
		current.ObjectMeta = grantMeta(g, current.ObjectMeta)
		current.Subjects = desired.Subjects
		if err := r.client.Update(ctx, current); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		r.changed("corrected", "ClusterRoleBinding", g)
	}
	return nil
}

// remove deletes the labelled object of name (obj's kind), if any; objects of that name
// without the labels are not the controller's.
func (r *proxyRBAC) remove(ctx context.Context, name string, obj client.Object) error {
	found, err := getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Name: name}, obj, false)
	if err != nil || !found {
		return err
	}
	if err := deleteObject(ctx, r.client, obj); err != nil {
		return err
	}
	kind := "ClusterRole"
	if _, ok := obj.(*rbacv1.ClusterRoleBinding); ok {
		kind = "ClusterRoleBinding"
	}
	r.log.Info("deleted "+kind+" "+name+": the policy no longer grants it", "controller", ProxyRBACControllerName, "name", name, "rule", obj.GetAnnotations()[AnnotationPolicyRule])
	return nil
}

// changed logs one change the controller made.
func (r *proxyRBAC) changed(action, kind string, g subjectaccessreview.Grant) {
	r.log.Info(action+" "+kind+" "+g.Name, "controller", ProxyRBACControllerName, "name", g.Name, "rule", g.Rule)
}
