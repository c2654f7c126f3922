package elevation

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/octogate/octogate/subjectaccessreview"
)

// Labels of the RBAC objects the RBAC keeper writes for an active request.
const (
	// LabelAccessRequest names the AccessRequest the object serves.
	LabelAccessRequest = "octogate.dev/access-request"
	// LabelElevation names its elevation.
	LabelElevation = "octogate.dev/elevation"
)

// rbacResync bounds how long a drift (an object deleted or edited by hand, a namespace
// created) lasts when no AccessRequest changes.
const rbacResync = 30 * time.Second

// RBAC keeps, for every active AccessRequest, RBAC that gives its requester what the
// elevation grants, for clusters where kube-apiserver authorizes without octogate (it
// verifies octogate's sessions itself, and RBAC decides): a ClusterRole named
// "octogate:access:REQUEST" with the elevation's rules (subjectaccessreview.Grant), bound to
// the User requester by a RoleBinding of that name in spec.namespace, or in each existing
// namespace the elevation's namespaces match, or, for an elevation without namespaces, by a
// ClusterRoleBinding. Every object is labelled LabelAccessRequest and LabelElevation; objects
// so labelled whose request is not active any more (ended, revoked, deleted) are deleted.
// It reconciles when the store changes, at the next end time, and every 30 s.
//
// kube-apiserver's RBAC has no decision cache: access ends when the objects are deleted, one
// reconcile after the end (at most a second or two). Groups are not re-checked here: leaving
// an allowed team does not end RBAC-kept access before its end time.
type RBAC struct {
	Client client.Client
	Store  *Store
	// Log; required.
	Log *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// ClusterRoleName is the name of the RBAC objects of request name.
func ClusterRoleName(request string) string { return "octogate:access:" + request }

// NeedLeaderElection: one replica writes.
func (r *RBAC) NeedLeaderElection() bool { return true }

// Start reconciles until ctx is done (a controller-runtime Runnable).
func (r *RBAC) Start(ctx context.Context) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	for {
		next, err := r.Reconcile(ctx, now())
		if err != nil && ctx.Err() == nil {
			r.Log.Warn("keeping elevation RBAC failed; retrying", "err", err)
			next = now().Add(2 * time.Second)
		}
		wait := min(rbacResync, max(next.Sub(now()), 100*time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-r.Store.Changed():
		case <-time.After(wait):
		}
	}
}

// Reconcile makes the cluster's labelled RBAC match the requests active at now and returns
// the next end time (zero-time + rbacResync when none).
func (r *RBAC) Reconcile(ctx context.Context, now time.Time) (time.Time, error) {
	p := r.Store.Policy()
	grants := map[string]subjectaccessreview.Grant{}
	for _, g := range p.Grants() {
		grants[g.Name] = g
	}
	next := now.Add(rbacResync)
	var namespaces corev1.NamespaceList
	if err := r.Client.List(ctx, &namespaces); err != nil {
		return next, fmt.Errorf("listing namespaces: %w", err)
	}
	wantRoles := map[string]*rbacv1.ClusterRole{}
	wantCRBs := map[string]*rbacv1.ClusterRoleBinding{}
	wantRBs := map[string]*rbacv1.RoleBinding{} // key namespace/name
	for _, ar := range r.Store.List() {
		end, ok := ar.GrantEnd(p)
		if !ok || !now.Before(end) || !r.Store.Holds(ar, now) {
			continue
		}
		g, ok := grants[subjectaccessreview.ElevationGroup(ar.Spec.Elevation)]
		if !ok || !p.ElevationHere(ar.Spec.Elevation) || !p.MayRequest(ar.Spec.Elevation, ar.Status.Requester.Username, ar.Status.Requester.Groups) {
			continue
		}
		if end.Before(next) {
			next = end
		}
		name := ClusterRoleName(ar.Name)
		meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelAccessRequest: ar.Name, LabelElevation: ar.Spec.Elevation}}
		wantRoles[name] = &rbacv1.ClusterRole{ObjectMeta: meta, Rules: g.Rules}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ar.Status.Requester.Username}}
		switch {
		case ar.Spec.Namespace != "":
			m := *meta.DeepCopy()
			m.Namespace = ar.Spec.Namespace
			wantRBs[m.Namespace+"/"+name] = &rbacv1.RoleBinding{ObjectMeta: m, RoleRef: ref, Subjects: subjects}
		case len(g.Namespaces) > 0:
			for _, ns := range namespaces.Items {
				if g.BindsIn(ns.Name) && ns.DeletionTimestamp == nil {
					m := *meta.DeepCopy()
					m.Namespace = ns.Name
					wantRBs[m.Namespace+"/"+name] = &rbacv1.RoleBinding{ObjectMeta: m, RoleRef: ref, Subjects: subjects}
				}
			}
		default:
			wantCRBs[name] = &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
		}
	}
	labelled := client.HasLabels{LabelAccessRequest}
	// Bindings go first and roles last, so no binding points at a missing role for long.
	var rbs rbacv1.RoleBindingList
	if err := r.Client.List(ctx, &rbs, labelled); err != nil {
		return next, err
	}
	for i := range rbs.Items {
		if _, ok := wantRBs[rbs.Items[i].Namespace+"/"+rbs.Items[i].Name]; !ok {
			if err := r.delete(ctx, &rbs.Items[i]); err != nil {
				return next, err
			}
		} else {
			delete(wantRBs, rbs.Items[i].Namespace+"/"+rbs.Items[i].Name)
		}
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := r.Client.List(ctx, &crbs, labelled); err != nil {
		return next, err
	}
	for i := range crbs.Items {
		if _, ok := wantCRBs[crbs.Items[i].Name]; !ok {
			if err := r.delete(ctx, &crbs.Items[i]); err != nil {
				return next, err
			}
		} else {
			delete(wantCRBs, crbs.Items[i].Name)
		}
	}
	var roles rbacv1.ClusterRoleList
	if err := r.Client.List(ctx, &roles, labelled); err != nil {
		return next, err
	}
	for i := range roles.Items {
		want, ok := wantRoles[roles.Items[i].Name]
		switch {
		case !ok:
			if err := r.delete(ctx, &roles.Items[i]); err != nil {
				return next, err
			}
		case !slices.EqualFunc(roles.Items[i].Rules, want.Rules, equalRule):
			roles.Items[i].Rules = want.Rules
			if err := r.Client.Update(ctx, &roles.Items[i]); err != nil {
				return next, err
			}
			delete(wantRoles, want.Name)
		default:
			delete(wantRoles, want.Name)
		}
	}
	for _, o := range wantRoles {
		if err := r.create(ctx, o); err != nil {
			return next, err
		}
	}
	for _, o := range wantCRBs {
		if err := r.create(ctx, o); err != nil {
			return next, err
		}
	}
	for _, o := range wantRBs {
		if err := r.create(ctx, o); err != nil {
			return next, err
		}
	}
	return next, nil
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

func (r *RBAC) create(ctx context.Context, o client.Object) error {
	if err := r.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.Log.Info("elevation RBAC created", "kind", fmt.Sprintf("%T", o), "name", o.GetName(), "namespace", o.GetNamespace(), "request", o.GetLabels()[LabelAccessRequest])
	return nil
}

func (r *RBAC) delete(ctx context.Context, o client.Object) error {
	if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.Log.Info("elevation RBAC removed", "kind", fmt.Sprintf("%T", o), "name", o.GetName(), "namespace", o.GetNamespace(), "request", o.GetLabels()[LabelAccessRequest])
	return nil
}
