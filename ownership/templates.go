package ownership

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/octogate/octogate/namespacetemplate"
)

// TemplateSource gives the namespace templates in force and tells of reloads (a
// *namespacetemplate.Store).
type TemplateSource interface {
	Templates() *namespacetemplate.Templates
	OnChange(func(*namespacetemplate.Templates))
}

// OwnerTeamsRoleBindingName binds the co-owner teams of AnnotationOwnerTeams.
const OwnerTeamsRoleBindingName = "octogate-owner-teams"

// Event reasons of templates and co-owner teams.
const (
	ReasonTemplateObjectCreated = "TemplateObjectCreated"
	ReasonTemplateObjectFixed   = "TemplateObjectCorrected"
	ReasonTemplateObjectPruned  = "TemplateObjectPruned"
	ReasonOwnerTeamsBound       = "OwnerTeamsBound"
	ReasonOwnerTeamsRemoved     = "OwnerTeamsBindingRemoved"
	ReasonOwnerTeamLabels       = "OwnerTeamLabelsUpdated"
)

// templateKinds are the kinds a template may hold, as empty lists for pruning.
func templateLists() []client.ObjectList {
	return []client.ObjectList{&rbacv1.RoleBindingList{}, &corev1.ResourceQuotaList{}, &corev1.LimitRangeList{}, &networkingv1.NetworkPolicyList{}}
}

// templateSource enqueues every Namespace when the templates are reloaded, so edits roll out
// at the controller's pace (its client's QPS) without waiting for a resync.
func templateSource(templates TemplateSource, c client.Reader) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		templates.OnChange(func(*namespacetemplate.Templates) {
			var list corev1.NamespaceList
			if err := c.List(ctx, &list); err != nil {
				return
			}
			for _, ns := range list.Items {
				if _, ok := ns.Annotations[namespacetemplate.AnnotationTemplate]; ok {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: ns.Name}})
				}
			}
		})
		return nil
	})
}

// reconcileTemplate keeps the objects of ns's template (AnnotationTemplate) in ns and deletes
// the objects labelled LabelTemplate that it no longer lists. Fields a template leaves unset
// are not compared, so values the API server defaults cause no writes.
func (r *reconciler) reconcileTemplate(ctx context.Context, ns *corev1.Namespace, owned bool) error {
	var desired []client.Object
	if name, ok := ns.Annotations[namespacetemplate.AnnotationTemplate]; ok && owned {
		if t, ok := r.templates.Templates().Get(name); ok {
			desired = t.Render(ns.Name)
		}
	}
	keep := map[string]bool{}
	for _, want := range desired {
		keep[kindName(want)] = true
		current := reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object)
		found, err := r.get(ctx, ns.Name, want.GetName(), current, true)
		if err != nil {
			return err
		}
		if !found {
			if err := r.client.Create(ctx, want); err != nil {
				return fmt.Errorf("create %s: %w", kindName(want), err)
			}
			r.event(ns, want, ReasonTemplateObjectCreated, "Create", "created %s from template %s", kindName(want), ns.Annotations[namespacetemplate.AnnotationTemplate])
			continue
		}
		if err := r.correct(ctx, ns, want, current); err != nil {
			return err
		}
	}
	for _, list := range templateLists() {
		if err := r.owned.List(ctx, list, client.InNamespace(ns.Name), client.HasLabels{namespacetemplate.LabelTemplate}); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		items, err := metaItems(list)
		if err != nil {
			return err
		}
		for _, obj := range items {
			if keep[kindName(obj)] {
				continue
			}
			if err := r.delete(ctx, obj); err != nil {
				return err
			}
			r.event(ns, obj, ReasonTemplateObjectPruned, "Delete", "deleted %s: template %q no longer lists it", kindName(obj), ns.Annotations[namespacetemplate.AnnotationTemplate])
		}
	}
	return nil
}

// correct updates current to want when a field want sets differs, or a label is missing.
func (r *reconciler) correct(ctx context.Context, ns *corev1.Namespace, want, current client.Object) error {
	labelsOK := true
	for k, v := range want.GetLabels() {
		labelsOK = labelsOK && current.GetLabels()[k] == v
	}
	same := labelsOK
	switch w := want.(type) {
	case *corev1.ResourceQuota:
		c := current.(*corev1.ResourceQuota)
		same = same && equality.Semantic.DeepDerivative(w.Spec, c.Spec)
		c.Spec = w.Spec
	case *corev1.LimitRange:
		c := current.(*corev1.LimitRange)
		same = same && equality.Semantic.DeepDerivative(w.Spec, c.Spec)
		c.Spec = w.Spec
	case *networkingv1.NetworkPolicy:
		c := current.(*networkingv1.NetworkPolicy)
		same = same && equality.Semantic.DeepDerivative(w.Spec, c.Spec)
		c.Spec = w.Spec
	case *rbacv1.RoleBinding:
		c := current.(*rbacv1.RoleBinding)
		if c.RoleRef != w.RoleRef {
			// roleRef is immutable: replace the binding.
			if err := r.delete(ctx, c); err != nil {
				return err
			}
			if err := r.client.Create(ctx, w); err != nil {
				return fmt.Errorf("recreate %s: %w", kindName(w), err)
			}
			r.event(ns, w, ReasonTemplateObjectFixed, "Replace", "replaced %s: its roleRef differed from the template", kindName(w))
			return nil
		}
		same = same && equality.Semantic.DeepEqual(w.Subjects, c.Subjects)
		c.Subjects = w.Subjects
	}
	if same {
		return nil
	}
	l := current.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range want.GetLabels() {
		l[k] = v
	}
	current.SetLabels(l)
	if err := r.client.Update(ctx, current); err != nil {
		return fmt.Errorf("update %s: %w", kindName(want), err)
	}
	r.event(ns, current, ReasonTemplateObjectFixed, "Update", "corrected %s to its template", kindName(want))
	return nil
}

// reconcileOwnerTeams keeps RoleBinding OwnerTeamsRoleBindingName binding the groups of the
// teams in AnnotationOwnerTeams (UsernamePrefix + "org/team") to the owner ClusterRole.
func (r *reconciler) reconcileOwnerTeams(ctx context.Context, ns *corev1.Namespace, owned bool) error {
	teams, _ := namespacetemplate.ParseOwnerTeams(ns.Annotations[namespacetemplate.AnnotationOwnerTeams])
	var subjects []rbacv1.Subject
	for _, t := range teams {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: r.prefix + t})
	}
	want := owned && len(subjects) > 0
	current := &rbacv1.RoleBinding{}
	found, err := r.get(ctx, ns.Name, OwnerTeamsRoleBindingName, current, want)
	if err != nil {
		return err
	}
	if !want {
		if found {
			if err := r.delete(ctx, current); err != nil {
				return err
			}
			r.event(ns, current, ReasonOwnerTeamsRemoved, "Delete", "removed RoleBinding %s: no co-owner teams", OwnerTeamsRoleBindingName)
		}
		return nil
	}
	desired := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: OwnerTeamsRoleBindingName, Namespace: ns.Name, Labels: managedLabels(nil)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.clusterRole},
		Subjects:   subjects,
	}
	if !found {
		if err := r.client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create %s: %w", OwnerTeamsRoleBindingName, err)
		}
		r.event(ns, desired, ReasonOwnerTeamsBound, "Create", "bound teams %v to ClusterRole %s", teams, r.clusterRole)
		return nil
	}
	return r.correct(ctx, ns, desired, current)
}

// reconcileOwnerTeamLabels keeps one label namespacetemplate.OwnerTeamLabel(team) = "true"
// per co-owner team of an owned Namespace and no other owner-team label, so teams named after
// creation can list their namespaces like those named at creation (the mutating webhook sets
// the labels only on CREATE). The merge patch carries the Namespace's resourceVersion: a
// concurrent edit of the annotation makes it fail and the Namespace is reconciled again.
func (r *reconciler) reconcileOwnerTeamLabels(ctx context.Context, ns *corev1.Namespace, owned bool) error {
	want := map[string]bool{}
	if owned {
		teams, _ := namespacetemplate.ParseOwnerTeams(ns.Annotations[namespacetemplate.AnnotationOwnerTeams])
		for _, t := range teams {
			want[namespacetemplate.OwnerTeamLabel(t)] = true
		}
	}
	var added, removed []string
	for k := range want {
		if ns.Labels[k] != "true" {
			added = append(added, k)
		}
	}
	for k := range ns.Labels {
		if _, isTeam := namespacetemplate.TeamOfLabel(k); isTeam && !want[k] {
			removed = append(removed, k)
		}
	}
	if len(added) == 0 && len(removed) == 0 {
		return nil
	}
	patched := ns.DeepCopy()
	if patched.Labels == nil {
		patched.Labels = map[string]string{}
	}
	for _, k := range added {
		patched.Labels[k] = "true"
	}
	for _, k := range removed {
		delete(patched.Labels, k)
	}
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(ns, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patch owner-team labels: %w", err)
	}
	slices.Sort(added)
	slices.Sort(removed)
	r.event(ns, nil, ReasonOwnerTeamLabels, "Patch", "owner-team labels: added %v, removed %v", added, removed)
	return nil
}

func kindName(o client.Object) string {
	return reflect.TypeOf(o).Elem().Name() + "/" + o.GetName()
}

func metaItems(list client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	switch l := list.(type) {
	case *rbacv1.RoleBindingList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ResourceQuotaList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.LimitRangeList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *networkingv1.NetworkPolicyList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", list)
	}
	return slices.Clip(out), nil
}
