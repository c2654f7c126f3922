package ownership

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Event reasons, one per action the controller takes on a Namespace.
const (
	ReasonOwnerBound           = "OwnerBound"
	ReasonOwnerBindingFixed    = "OwnerBindingCorrected"
	ReasonOwnerBindingReplaced = "OwnerBindingReplaced"
	ReasonOwnerBindingRemoved  = "OwnerBindingRemoved"
	ReasonQuotaCreated         = "DefaultQuotaCreated"
	ReasonQuotaFixed           = "DefaultQuotaCorrected"
	ReasonQuotaRemoved         = "DefaultQuotaRemoved"
	ReasonFailed               = "OwnershipFailed"
)

type reconciler struct {
	client    client.Client // writes, and Namespaces from the manager's cache
	owned     client.Reader // RoleBindings and ResourceQuotas labelled managed-by=octogate
	apiReader client.Reader // the API server, for objects of our names that lack the label
	events    recorder.EventRecorder
	log       *slog.Logger

	clusterRole string
	orphanGroup string // bound in orphaned Namespaces instead of the creator; "" binds no one
	quota       *corev1.ResourceQuotaSpec
	templates   TemplateSource // nil: no templates
	prefix      string         // of GitHub groups, for co-owner teams
}

// Reconcile makes the owner RoleBinding and default ResourceQuota of one Namespace match its
// creator annotation. A Namespace without the annotation, or whose creator gets no binding,
// loses the binding the controller made; one that is gone or being deleted is left alone
// (its objects go with it).
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	creator, owned := ns.Annotations[AnnotationCreator]
	subject, ok := subjectFor(creator)
	if Orphaned(ns) {
		subject, ok = orphanSubject(r.orphanGroup)
	}
	if err := r.reconcileBinding(ctx, ns, subject, owned && ok); err != nil {
		r.events.Eventf(ns, nil, corev1.EventTypeWarning, ReasonFailed, "Reconcile", "RoleBinding %s: %v", RoleBindingName, err)
		return reconcile.Result{}, err
	}
	if r.quota != nil {
		if err := r.reconcileQuota(ctx, ns, owned); err != nil {
			r.events.Eventf(ns, nil, corev1.EventTypeWarning, ReasonFailed, "Reconcile", "ResourceQuota %s: %v", ResourceQuotaName, err)
			return reconcile.Result{}, err
		}
	}
	if err := r.reconcileOwnerTeams(ctx, ns, owned); err != nil {
		r.events.Eventf(ns, nil, corev1.EventTypeWarning, ReasonFailed, "Reconcile", "RoleBinding %s: %v", OwnerTeamsRoleBindingName, err)
		return reconcile.Result{}, err
	}
	if err := r.reconcileOwnerTeamLabels(ctx, ns, owned); err != nil {
		r.events.Eventf(ns, nil, corev1.EventTypeWarning, ReasonFailed, "Reconcile", "labels: %v", err)
		return reconcile.Result{}, err
	}
	if r.templates != nil {
		if err := r.reconcileTemplate(ctx, ns, owned); err != nil {
			r.events.Eventf(ns, nil, corev1.EventTypeWarning, ReasonFailed, "Reconcile", "template: %v", err)
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// subjectFor returns the RBAC subject for a creator username: a ServiceAccount for
// system:serviceaccount:NAMESPACE:NAME (the username form of service accounts,
// https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/), nothing
// for any other system: user (the control plane, nodes, anonymous) or an empty name, else a User.
func subjectFor(creator string) (rbacv1.Subject, bool) {
	if rest, ok := strings.CutPrefix(creator, serviceAccountPrefix); ok {
		ns, name, ok := strings.Cut(rest, ":")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return rbacv1.Subject{}, false
		}
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}, true
	}
	if creator == "" || strings.HasPrefix(creator, "system:") {
		return rbacv1.Subject{}, false
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: creator}, true
}

func managedLabels(existing map[string]string) map[string]string {
	l := maps.Clone(existing)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManagedBy] = ManagedByValue
	return l
}

func (r *reconciler) reconcileBinding(ctx context.Context, ns *corev1.Namespace, subject rbacv1.Subject, want bool) error {
	current := &rbacv1.RoleBinding{}
	found, err := r.get(ctx, ns.Name, RoleBindingName, current, want)
	if err != nil {
		return err
	}
	if !want {
		if !found {
			return nil
		}
		if err := r.delete(ctx, current); err != nil {
			return err
		}
		r.event(ns, current, ReasonOwnerBindingRemoved, "Delete", "removed RoleBinding %s: creator %q gets no binding", RoleBindingName, ns.Annotations[AnnotationCreator])
		return nil
	}
	desired := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: RoleBindingName, Namespace: ns.Name, Labels: managedLabels(nil)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.clusterRole},
		Subjects:   []rbacv1.Subject{subject},
	}
	switch {
	case !found:
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		r.event(ns, desired, ReasonOwnerBound, "Create", "bound %s %q to ClusterRole %s", subject.Kind, subject.Name, r.clusterRole)
	case current.RoleRef != desired.RoleRef:
		// roleRef is immutable (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#clusterrolebinding-example).
		if err := r.delete(ctx, current); err != nil {
			return err
		}
		desired.Labels = managedLabels(current.Labels)
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("recreate: %w", err)
		}
		r.event(ns, desired, ReasonOwnerBindingReplaced, "Replace", "replaced RoleBinding %s: roleRef %s %s is now ClusterRole %s", RoleBindingName, current.RoleRef.Kind, current.RoleRef.Name, r.clusterRole)
	case !equality.Semantic.DeepEqual(current.Subjects, desired.Subjects) || current.Labels[LabelManagedBy] != ManagedByValue:
		current.Subjects = desired.Subjects
		current.Labels = managedLabels(current.Labels)
		if err := r.client.Update(ctx, current); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		r.event(ns, current, ReasonOwnerBindingFixed, "Update", "corrected RoleBinding %s: subject is %s %q", RoleBindingName, subject.Kind, subject.Name)
	}
	return nil
}

func (r *reconciler) reconcileQuota(ctx context.Context, ns *corev1.Namespace, want bool) error {
	current := &corev1.ResourceQuota{}
	found, err := r.get(ctx, ns.Name, ResourceQuotaName, current, want)
	if err != nil {
		return err
	}
	if !want {
		if !found {
			return nil
		}
		if err := r.delete(ctx, current); err != nil {
			return err
		}
		r.event(ns, current, ReasonQuotaRemoved, "Delete", "removed ResourceQuota %s: the namespace has no creator", ResourceQuotaName)
		return nil
	}
	if !found {
		desired := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: ResourceQuotaName, Namespace: ns.Name, Labels: managedLabels(nil)},
			Spec:       *r.quota.DeepCopy(),
		}
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		r.event(ns, desired, ReasonQuotaCreated, "Create", "created ResourceQuota %s", ResourceQuotaName)
		return nil
	}
	if equality.Semantic.DeepEqual(current.Spec, *r.quota) && current.Labels[LabelManagedBy] == ManagedByValue {
		return nil
	}
	current.Spec = *r.quota.DeepCopy()
	current.Labels = managedLabels(current.Labels)
	if err := r.client.Update(ctx, current); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	r.event(ns, current, ReasonQuotaFixed, "Update", "corrected ResourceQuota %s to the configured spec", ResourceQuotaName)
	return nil
}

// get reads one of our objects from the cache of labelled objects (getObject).
func (r *reconciler) get(ctx context.Context, namespace, name string, obj client.Object, live bool) (found bool, err error) {
	return getObject(ctx, r.owned, r.apiReader, client.ObjectKey{Namespace: namespace, Name: name}, obj, live)
}

// delete removes obj if it is still the object that was read (deleteObject).
func (r *reconciler) delete(ctx context.Context, obj client.Object) error {
	return deleteObject(ctx, r.client, obj)
}

// getObject reads one of our objects from owned, the cache of labelled objects. With live, a
// cache miss is asked of api, the API server, which also has objects of our name without our
// label and ones created too recently for the cache; those are ours to correct, but not to
// delete, so objects that need not exist (most of them, on every resync) cost no API call.
func getObject(ctx context.Context, owned, api client.Reader, key client.ObjectKey, obj client.Object, live bool) (found bool, err error) {
	err = owned.Get(ctx, key, obj)
	if live && apierrors.IsNotFound(err) {
		err = api.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get: %w", err)
	}
	return true, nil
}

// deleteObject removes obj if it is still the object that was read (uid precondition).
func deleteObject(ctx context.Context, c client.Writer, obj client.Object) error {
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// event records a Normal Event on ns about related and logs the same line.
func (r *reconciler) event(ns *corev1.Namespace, related client.Object, reason, action, note string, args ...any) {
	r.events.Eventf(ns, related, corev1.EventTypeNormal, reason, action, note, args...)
	r.log.Info(fmt.Sprintf(note, args...), "controller", ControllerName, "namespace", ns.Name, "reason", reason)
}
