package ownership

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/octogate/octogate/namespacetemplate"
)

// annotationCreatorUID is the creator's uid annotation (admission.AnnotationCreatorUID).
const annotationCreatorUID = "octogate.dev/creator-uid"

// indexTemplateCreator indexes Namespaces by "template/uid" and "template/" (every creator).
const indexTemplateCreator = "octogate.template-creator"

// NamespaceIndex answers, from the manager's cache of Namespaces, how many namespaces count
// towards a template's limits (admission.NamespaceLister) and who owns a namespace (for the
// authorizer). The cache runs on every replica, leader or not.
type NamespaceIndex struct {
	reader client.Reader
}

// NewNamespaceIndex registers the index on mgr's cache; call before mgr starts.
func NewNamespaceIndex(ctx context.Context, mgr manager.Manager) (*NamespaceIndex, error) {
	err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Namespace{}, indexTemplateCreator, func(o client.Object) []string {
		t, ok := o.GetAnnotations()[namespacetemplate.AnnotationTemplate]
		if !ok {
			return nil
		}
		return []string{t + "/", t + "/" + o.GetAnnotations()[annotationCreatorUID]}
	})
	if err != nil {
		return nil, fmt.Errorf("ownership: namespace index: %w", err)
	}
	return &NamespaceIndex{reader: mgr.GetCache()}, nil
}

// CountedNamespaces returns the names of the namespaces whose template is template and, when
// uid is not empty, whose creator uid is uid: those not being deleted, and those being deleted.
func (x *NamespaceIndex) CountedNamespaces(ctx context.Context, template, uid string) (counted, deleting []string, err error) {
	var list corev1.NamespaceList
	if err := x.reader.List(ctx, &list, client.MatchingFields{indexTemplateCreator: template + "/" + uid}); err != nil {
		return nil, nil, err
	}
	counted = make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		if ns.DeletionTimestamp == nil {
			counted = append(counted, ns.Name)
		} else {
			deleting = append(deleting, ns.Name)
		}
	}
	return counted, deleting, nil
}

// NamespaceOwners returns the creator uid and the co-owner teams ("org/team") of the
// namespace name, from the cache; ok is false when the cache does not have it. creatorUID is
// empty while the namespace is orphaned (namespacetemplate.AnnotationOrphanedAt): its creator
// left the GitHub organization and has no owner rights there until an admin gives it back,
// even once a member again (docs/revocation.md).
func (x *NamespaceIndex) NamespaceOwners(name string) (creatorUID string, teams []string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var ns corev1.Namespace
	if err := x.reader.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return "", nil, false
	}
	teams, _ = namespacetemplate.ParseOwnerTeams(ns.Annotations[namespacetemplate.AnnotationOwnerTeams])
	if namespacetemplate.Orphaned(ns.Annotations) {
		return "", teams, true
	}
	uid := ns.Labels[namespacetemplate.LabelCreatorUID]
	if uid == "" {
		uid = ns.Annotations[annotationCreatorUID]
	}
	return uid, teams, true
}
