package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/namespacetemplate"
)

// Orphan annotations. A Namespace with AnnotationOrphanedAt has lost its creator (they left
// the GitHub organization): the controller no longer binds the creator and binds
// Config.OrphanOwnerGroup instead, if set. Removing the annotations (an admin:
// `kubectl annotate namespace NS octogate.dev/orphaned-at- octogate.dev/orphaned-reason-`)
// gives the creator their binding back; a returning member never regains it by themselves.
const (
	// AnnotationOrphanedAt is when the Namespace was orphaned (RFC 3339).
	AnnotationOrphanedAt = namespacetemplate.AnnotationOrphanedAt
	// AnnotationOrphanedReason says why, e.g. "removed from GitHub organization acme
	// (organization member_removed webhook)".
	AnnotationOrphanedReason = "octogate.dev/orphaned-reason"
	// AnnotationLastOrphanedAt is when octogate last orphaned the Namespace (RFC 3339), set
	// with AnnotationOrphanedAt and kept when an admin gives the Namespace back: a Namespace
	// with it and without AnnotationOrphanedAt was given back after an orphaning
	// (OrphanUnlessGivenBack).
	AnnotationLastOrphanedAt = "octogate.dev/last-orphaned-at"
	// ReasonOrphaned is the Event reason on a Namespace whose creator left.
	ReasonOrphaned = "CreatorLeft"

	// creatorUIDField indexes Namespaces by creator uid in the manager's cache.
	creatorUIDField = "octogate.creatorUID"
)

// Orphaned reports whether ns has lost its creator.
func Orphaned(ns *corev1.Namespace) bool {
	return namespacetemplate.Orphaned(ns.Annotations)
}

// orphanSubject is who owns an orphaned Namespace: the group, if one is configured.
func orphanSubject(group string) (rbacv1.Subject, bool) {
	if group == "" {
		return rbacv1.Subject{}, false
	}
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}, true
}

// Orphaner marks the Namespaces a GitHub user created as orphaned. Matching is by the
// creator's uid (octogate.dev/creator-uid, the GitHub numeric id), never by login: a login
// can change hands. It only writes annotations and an Event; the controller (on the leader)
// then replaces the owner RoleBinding. Safe for concurrent use; works on every replica.
type Orphaner struct {
	client client.Client
	api    client.Reader // the API server, when the cache's copy is stale
	events recorder.EventRecorder
	log    *slog.Logger
	now    func() time.Time
}

// NewOrphaner indexes mgr's Namespace cache by creator uid and returns an Orphaner reading
// it. Call it before mgr starts. It needs patch on namespaces (RBACRules).
func NewOrphaner(mgr manager.Manager, log *slog.Logger) (*Orphaner, error) {
	if mgr == nil {
		return nil, errors.New("ownership: nil manager")
	}
	if log == nil {
		log = slog.Default()
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Namespace{}, creatorUIDField, func(o client.Object) []string {
		if uid := o.GetAnnotations()[admission.AnnotationCreatorUID]; uid != "" {
			return []string{uid}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ownership: index namespaces by creator uid: %w", err)
	}
	return &Orphaner{client: mgr.GetClient(), api: mgr.GetAPIReader(), events: mgr.GetEventRecorder(ControllerName), log: log, now: time.Now}, nil
}

// Namespaces lists the Namespaces whose creator uid is uid.
func (o *Orphaner) Namespaces(ctx context.Context, uid string) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := o.client.List(ctx, &list, client.MatchingFields{creatorUIDField: uid}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Orphanable returns how many live Namespaces created by uid are not orphaned, from the
// manager's cache: 0 means an orphaning would change nothing.
func (o *Orphaner) Orphanable(ctx context.Context, uid string) (int, error) {
	nss, err := o.Namespaces(ctx, uid)
	if err != nil {
		return 0, fmt.Errorf("listing namespaces created by uid %s: %w", uid, err)
	}
	n := 0
	for i := range nss {
		if !Orphaned(&nss[i]) && nss[i].DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// Orphan annotates every live, not yet orphaned Namespace created by uid with
// AnnotationOrphanedAt (now), AnnotationOrphanedReason (reason) and AnnotationLastOrphanedAt
// (now), records a Warning Event on each, and returns how many it orphaned. Namespaces
// already orphaned keep their first time and reason, so a redelivered or repeated removal
// changes nothing. Callers that confirmed with GitHub that uid is no member (the periodic
// check, a webhook delivery with an org token) use it.
func (o *Orphaner) Orphan(ctx context.Context, uid, reason string) (int, error) {
	return o.orphan(ctx, uid, reason, false)
}

// OrphanUnlessGivenBack is Orphan but for the Namespaces an admin gave back after an earlier
// orphaning (AnnotationLastOrphanedAt without AnnotationOrphanedAt): a removal that GitHub
// did not confirm (a webhook delivery without an org token) may be an old one replayed, and
// must not undo an admin's decision.
func (o *Orphaner) OrphanUnlessGivenBack(ctx context.Context, uid, reason string) (int, error) {
	return o.orphan(ctx, uid, reason, true)
}

// givenBack reports whether an admin gave ns back after an orphaning.
func givenBack(ns *corev1.Namespace) bool {
	_, ok := ns.Annotations[AnnotationLastOrphanedAt]
	return ok && !Orphaned(ns)
}

func (o *Orphaner) orphan(ctx context.Context, uid, reason string, keepGivenBack bool) (int, error) {
	if uid == "" {
		return 0, nil
	}
	nss, err := o.Namespaces(ctx, uid)
	if err != nil {
		return 0, fmt.Errorf("listing namespaces created by uid %s: %w", uid, err)
	}
	n := 0
	var errs []error
	for i := range nss {
		ns := &nss[i]
		if Orphaned(ns) || ns.DeletionTimestamp != nil || keepGivenBack && givenBack(ns) {
			continue
		}
		done, err := o.annotate(ctx, ns, reason, keepGivenBack)
		if err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns.Name, err))
			continue
		}
		if !done {
			continue
		}
		n++
		o.events.Eventf(ns, nil, corev1.EventTypeWarning, ReasonOrphaned, "Orphan",
			"creator %s (GitHub user id %s) %s; their owner binding is removed; an admin can restore it by removing the %s and %s annotations",
			ns.Annotations[AnnotationCreator], uid, reason, AnnotationOrphanedAt, AnnotationOrphanedReason)
		o.log.Info("namespace orphaned", "controller", ControllerName, "namespace", ns.Name, "creatorUID", uid, "reason", reason)
	}
	return n, errors.Join(errs...)
}

// annotate sets the orphan annotations on ns unless it is orphaned already (or, with
// keepGivenBack, was given back in the meantime). The
// resourceVersion precondition keeps a concurrent orphaning (another replica, the periodic
// check) from overwriting the first time and reason; on a conflict (or a cache behind the API
// server) the Namespace is read again from the API server.
func (o *Orphaner) annotate(ctx context.Context, ns *corev1.Namespace, reason string, keepGivenBack bool) (bool, error) {
	for attempt := 0; ; attempt++ {
		at := o.now().UTC().Format(time.RFC3339)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": ns.ResourceVersion,
			"annotations":     map[string]string{AnnotationOrphanedAt: at, AnnotationOrphanedReason: reason, AnnotationLastOrphanedAt: at},
		}})
		err := o.client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch))
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			return err == nil, err
		}
		if err := o.api.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if Orphaned(ns) || ns.DeletionTimestamp != nil || keepGivenBack && givenBack(ns) {
			return false, nil
		}
	}
}
