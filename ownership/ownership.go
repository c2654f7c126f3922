package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/octogate/octogate/subjectaccessreview"
)

const (
	// AnnotationCreator is the Namespace annotation naming its creator (the admission
	// package sets it on CREATE).
	AnnotationCreator = "octogate.dev/creator"
	// RoleBindingName is the RoleBinding that binds a Namespace's creator.
	RoleBindingName = "octogate-owner"
	// ResourceQuotaName is the ResourceQuota created from Config.DefaultQuota.
	ResourceQuotaName = "octogate-default"
	// LabelManagedBy and ManagedByValue mark every object the controller owns
	// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "octogate"
	// ControllerName names the controller, its events' reportingController and its logs.
	ControllerName = "octogate-ownership"
	// DefaultOwnerClusterRole is bound when Config.OwnerClusterRole is empty.
	DefaultOwnerClusterRole = "admin"

	serviceAccountPrefix = "system:serviceaccount:"
)

// Config configures the ownership controller.
type Config struct {
	// OwnerClusterRole is the ClusterRole bound to each Namespace's creator
	// (OCTOGATE_OWNER_CLUSTERROLE); empty means DefaultOwnerClusterRole. The controller needs
	// the bind verb on it (RBACRules).
	OwnerClusterRole string
	// DefaultQuota, when not nil, is the spec of the ResourceQuota ResourceQuotaName kept in
	// every owned Namespace (LoadQuotaFile reads OCTOGATE_DEFAULT_QUOTA_FILE). Nil: quotas
	// are left alone.
	DefaultQuota *corev1.ResourceQuotaSpec
	// OrphanOwnerGroup (OCTOGATE_ORPHAN_OWNER_GROUP), when set, is the group bound to
	// OwnerClusterRole in orphaned Namespaces (AnnotationOrphanedAt) instead of their creator,
	// e.g. "github:acme/platform". Empty: orphaned Namespaces get no owner binding.
	OrphanOwnerGroup string
	// Templates, when set, are the namespace templates whose objects are kept in each owned
	// Namespace with AnnotationTemplate; reloads roll out to every such Namespace.
	Templates TemplateSource
	// UsernamePrefix is the prefix of GitHub groups: co-owner team "org/team" is bound as
	// group UsernamePrefix+"org/team". Empty is "github:".
	UsernamePrefix string
	// ProxyRBAC, when set, turns on a second controller that keeps the RBAC of the
	// impersonating proxy's groups for the policy it returns (an Authorizer's Policy): per
	// subjectaccessreview.Grant a ClusterRole and its bindings to the Group of the same name
	// (a ClusterRoleBinding, or for a rule with namespaces a RoleBinding in each namespace
	// they match), labelled LabelManagedBy and LabelProxyRBAC; labelled ones the policy no
	// longer grants are deleted. It is called every second, and a new *Policy is acted on at
	// once; nil (no policy loaded yet) changes nothing. The controller needs ProxyRBACRules.
	// Nil: no such controller.
	ProxyRBAC func() *subjectaccessreview.Policy
	// Logger receives the controller's logs (controller-runtime's included). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Setup validates cfg and registers the ownership controller with mgr; it runs when mgr is
// started (and, with leader election, only on the leader). mgr's scheme must know core/v1
// and rbac/v1 (the client-go scheme, controller-runtime's default, does). Besides the
// manager's cache of Namespaces it adds a cache that holds only the RoleBindings and
// ResourceQuotas labelled LabelManagedBy=ManagedByValue, so the controller never caches the
// cluster's other RoleBindings. With Config.ProxyRBAC it also registers the proxy RBAC
// controller, whose ClusterRoles, ClusterRoleBindings and RoleBindings that cache holds
// (those labelled LabelProxyRBAC too). Setup errors name the bad Config field.
func Setup(mgr manager.Manager, cfg Config) error {
	if cfg.OwnerClusterRole == "" {
		cfg.OwnerClusterRole = DefaultOwnerClusterRole
	}
	if msgs := content.IsPathSegmentName(cfg.OwnerClusterRole); len(msgs) > 0 {
		return fmt.Errorf("ownership: OwnerClusterRole %q: %s", cfg.OwnerClusterRole, strings.Join(msgs, "; "))
	}
	if cfg.DefaultQuota != nil {
		if err := validateQuota(cfg.DefaultQuota); err != nil {
			return fmt.Errorf("ownership: DefaultQuota: %w", err)
		}
	}
	if mgr == nil {
		return errors.New("ownership: nil manager")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}

	cached := []client.Object{&rbacv1.RoleBinding{}, &corev1.ResourceQuota{}, &corev1.LimitRange{}, &networkingv1.NetworkPolicy{}}
	opts := cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue}),
		DefaultTransform:     cache.TransformStripManagedFields(),
		// Anything else read through this cache is a programming error, not a new informer.
		ReaderFailOnMissingInformer: true,
	}
	if cfg.ProxyRBAC != nil {
		cached = append(cached, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{})
		opts.ByObject = map[client.Object]cache.ByObject{
			&rbacv1.ClusterRole{}:        {Label: proxyRBACSelector},
			&rbacv1.ClusterRoleBinding{}: {Label: proxyRBACSelector},
		}
	}
	owned, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return fmt.Errorf("ownership: cache of owned objects: %w", err)
	}
	// Informers must exist before the cache starts when ReaderFailOnMissingInformer is set.
	for _, obj := range cached {
		if _, err := owned.GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("ownership: informer for %T: %w", obj, err)
		}
	}
	if err := mgr.Add(owned); err != nil {
		return fmt.Errorf("ownership: add cache: %w", err)
	}

	r := &reconciler{
		client:      mgr.GetClient(),
		owned:       owned,
		apiReader:   mgr.GetAPIReader(),
		events:      mgr.GetEventRecorder(ControllerName),
		log:         log,
		clusterRole: cfg.OwnerClusterRole,
		orphanGroup: cfg.OrphanOwnerGroup,
		quota:       cfg.DefaultQuota,
		templates:   cfg.Templates,
		prefix:      cfg.UsernamePrefix,
	}
	if r.prefix == "" {
		r.prefix = "github:"
	}
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Namespace{}).
		WatchesRawSource(source.Kind(owned, client.Object(&rbacv1.RoleBinding{}), toNamespace)).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.ResourceQuota{}), toNamespace)).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.LimitRange{}), toNamespace)).
		WatchesRawSource(source.Kind(owned, client.Object(&networkingv1.NetworkPolicy{}), toNamespace))
	if cfg.Templates != nil {
		b = b.WatchesRawSource(templateSource(cfg.Templates, mgr.GetClient()))
	}
	if cfg.ProxyRBAC != nil {
		if err := setupProxyRBAC(mgr, owned, cfg.ProxyRBAC, log); err != nil {
			return fmt.Errorf("ownership: proxy RBAC controller: %w", err)
		}
	}
	return b.
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		WithLogConstructor(func(req *reconcile.Request) logr.Logger {
			l := logr.FromSlogHandler(log.Handler()).WithValues("controller", ControllerName)
			if req != nil {
				l = l.WithValues("namespace", req.Name)
			}
			return l
		}).
		Complete(r)
}
