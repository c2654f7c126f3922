package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/octogate/octogate/namespacetemplate"
)

// extraLogin is the userInfo.extra key where octogate's authenticator puts the GitHub login
// (tokenreview.ExtraLogin).
const extraLogin = "octogate.dev/github-login"

// TemplateSource gives the namespace templates in force (a *namespacetemplate.Store).
type TemplateSource interface {
	Templates() *namespacetemplate.Templates
}

// NamespaceLister reads, from a cache, the namespaces whose AnnotationTemplate is template
// and, when uid is not empty, whose AnnotationCreatorUID is uid: the names of those that
// count towards the limits, and of those being deleted (which do not count).
type NamespaceLister interface {
	CountedNamespaces(ctx context.Context, template, uid string) (counted, deleting []string, err error)
}

// reservationTTL is how long a namespace admitted at CREATE counts towards the limits
// before the cache is expected to show it. A create that fails after admission (its name is
// taken, a later webhook denies it) holds its slot that long.
const reservationTTL = 30 * time.Second

// creatorOf is user as a template creator: the GitHub login comes from userInfo.extra.
func creatorOf(user authenticationv1.UserInfo) namespacetemplate.Creator {
	c := namespacetemplate.Creator{Username: user.Username, UID: user.UID, Groups: user.Groups}
	if l := user.Extra[extraLogin]; len(l) > 0 {
		c.Login = l[0]
	}
	return c
}

// reservations hold the namespaces admitted by this replica that the cache may not show
// yet, so concurrent creates cannot all pass a count read from the cache.
type reservations struct {
	mu      sync.Mutex
	pending map[string]reservation // by namespace name
	now     func() time.Time
}

type reservation struct {
	template, uid string
	expires       time.Time
}

// selfService holds what the validating webhook needs for templates, names and limits.
type selfService struct {
	templates TemplateSource
	lister    NamespaceLister
	prefix    string
	reserved  reservations
}

// validateCreate returns why user may not create ns, or "" when it may. Admins are checked
// by the caller. dryRun checks without reserving a slot.
func (s *selfService) validateCreate(ctx context.Context, ns *corev1.Namespace, user authenticationv1.UserInfo, dryRun bool) (string, error) {
	if p := namespacetemplate.Reserved(ns.Name); p != "" {
		return fmt.Sprintf("octogate: namespace name %q is reserved (%s): only admins may create it", ns.Name, p), nil
	}
	if msg := s.checkOwnerTeams(nil, ns, user); msg != "" {
		return msg, nil
	}
	if s.templates == nil {
		return "", nil
	}
	templates := s.templates.Templates()
	creator := creatorOf(user)
	var t *namespacetemplate.Template
	if name, ok := ns.Annotations[namespacetemplate.AnnotationTemplate]; ok {
		t, _ = templates.Get(name)
	} else {
		t = templates.Select(creator)
	}
	if t == nil {
		return "", nil
	}
	if what := foreignMetadata(ns, t); what != "" {
		also := ""
		if keys := allowedKeys(t); keys != "" {
			also = " and the keys the template allows (" + keys + ")"
		}
		return fmt.Sprintf("octogate: namespaces of template %q carry only octogate's labels and annotations%s, not %s; ask an admin to add it", t.Name, also, what), nil
	}
	if !t.NameAllowed(ns.Name, creator) {
		allowed := t.AllowedNames(creator)
		if len(allowed) == 0 {
			return fmt.Sprintf("octogate: template %q allows no namespace name for %s (patterns %s)", t.Name, user.Username, strings.Join(t.Names, ", ")), nil
		}
		return fmt.Sprintf("octogate: namespace name %q is not allowed by template %q; allowed names for you: %s", ns.Name, t.Name, strings.Join(allowed, ", ")), nil
	}
	if t.MaxNamespacesPerUser == nil && t.MaxNamespaces == nil {
		return "", nil
	}
	if s.lister == nil {
		return "", fmt.Errorf("template %q has limits but no namespace cache is running (OCTOGATE_CONTROLLER=false)", t.Name)
	}
	return s.reserve(ctx, ns.Name, t, user, dryRun)
}

// reserve counts the namespaces of t (all, and user's) from the cache plus this replica's
// pending reservations and, when both are below their limits, reserves ns for reservationTTL.
// The count and the reservation happen under one lock: of concurrent creates on this
// replica, only as many pass as there are free slots.
func (s *selfService) reserve(ctx context.Context, name string, t *namespacetemplate.Template, user authenticationv1.UserInfo, dryRun bool) (string, error) {
	r := &s.reserved
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	for n, p := range r.pending {
		if now.After(p.expires) {
			delete(r.pending, n)
		}
	}
	count := func(uid string) ([]string, error) {
		names, deleting, err := s.lister.CountedNamespaces(ctx, t.Name, uid)
		if err != nil {
			return nil, err
		}
		// The cache has seen these: their reservations are done, so a namespace deleted soon
		// after it was created stops counting as soon as the cache loses it.
		for _, n := range slices.Concat(names, deleting) {
			delete(r.pending, n)
		}
		for n, p := range r.pending {
			if n != name && p.template == t.Name && (uid == "" || p.uid == uid) && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		names = slices.DeleteFunc(names, func(n string) bool { return n == name })
		slices.Sort(names)
		return names, nil
	}
	if t.MaxNamespacesPerUser != nil {
		if user.UID == "" {
			return fmt.Sprintf("octogate: template %q limits namespaces per user and %s has no uid to count them by", t.Name, user.Username), nil
		}
		names, err := count(user.UID)
		if err != nil {
			return "", err
		}
		if max := *t.MaxNamespacesPerUser; len(names) >= max {
			return fmt.Sprintf("octogate: %s owns %d of the %d namespaces allowed by template %q%s", user.Username, len(names), max, t.Name, listNames(names)), nil
		}
	}
	if t.MaxNamespaces != nil {
		names, err := count("")
		if err != nil {
			return "", err
		}
		if max := *t.MaxNamespaces; len(names) >= max {
			return fmt.Sprintf("octogate: template %q has %d of its %d namespaces%s", t.Name, len(names), max, listNames(names)), nil
		}
	}
	if !dryRun {
		if r.pending == nil {
			r.pending = map[string]reservation{}
		}
		r.pending[name] = reservation{template: t.Name, uid: user.UID, expires: now.Add(reservationTTL)}
	}
	return "", nil
}

// listNames formats ": a, b, c" (at most 20 names, then how many more).
func listNames(names []string) string {
	if len(names) == 0 {
		return ""
	}
	if len(names) > 20 {
		return ": " + strings.Join(names[:20], ", ") + fmt.Sprintf(" and %d more", len(names)-20)
	}
	return ": " + strings.Join(names, ", ")
}

// checkOwnerTeams returns why user may not set ns's AnnotationOwnerTeams (old is nil at
// CREATE), or "": every team must be an org/team-slug, and a team that is added must be one
// of user's teams (group PREFIX<org>/<team>). Admins are checked by the caller.
func (s *selfService) checkOwnerTeams(old, ns *corev1.Namespace, user authenticationv1.UserInfo) string {
	value, ok := ns.Annotations[namespacetemplate.AnnotationOwnerTeams]
	if !ok {
		return ""
	}
	teams, err := namespacetemplate.ParseOwnerTeams(value)
	if err != nil {
		return fmt.Sprintf("octogate: annotation %s: %v", namespacetemplate.AnnotationOwnerTeams, err)
	}
	var had []string
	if old != nil {
		had, _ = namespacetemplate.ParseOwnerTeams(old.Annotations[namespacetemplate.AnnotationOwnerTeams])
	}
	for _, team := range teams {
		if slices.Contains(had, team) {
			continue
		}
		if !slices.ContainsFunc(user.Groups, func(g string) bool { return strings.EqualFold(g, s.prefix+team) }) {
			return fmt.Sprintf("octogate: annotation %s: %s is not a member of team %s (group %s%s): only teams you are in may co-own a namespace", namespacetemplate.AnnotationOwnerTeams, user.Username, team, s.prefix, team)
		}
	}
	return ""
}

// validateOwnership returns why user may not turn old into ns, for the self-service keys:
// AnnotationTemplate and LabelCreatorUID never change (but for admins, checked by the
// caller); an owner-team label may be added only for a team AnnotationOwnerTeams names;
// AnnotationOwnerTeams may be changed only by the creator or a member of a co-owner team.
//
// Owners (the creator, by uid, or a member of a co-owner team) who are not admins may change
// nothing else of their namespace but the label and annotation keys its template allows
// (AllowedLabels, AllowedAnnotations of the template old records in AnnotationTemplate):
// /authorize lets them update and patch it so they can name co-owner teams, and that must not
// let them relabel it (pod security levels, labels other namespaces' NetworkPolicies select
// on), whatever else their RBAC grants.
func (s *selfService) validateOwnership(old, ns *corev1.Namespace, user authenticationv1.UserInfo) string {
	if s.isOwner(old, user) {
		t := s.templateOf(old)
		if what := changeBeyondOwnerTeams(old, ns, t); what != "" {
			may := "annotation " + namespacetemplate.AnnotationOwnerTeams + " there"
			if keys := allowedKeys(t); keys != "" {
				may = fmt.Sprintf("annotation %s and the keys template %q allows (%s) there", namespacetemplate.AnnotationOwnerTeams, t.Name, keys)
			}
			return fmt.Sprintf("octogate: %q owns namespace %q and may change only %s, not %s; ask an admin", user.Username, ns.Name, may, what)
		}
	}
	if old.Annotations[namespacetemplate.AnnotationTemplate] != ns.Annotations[namespacetemplate.AnnotationTemplate] {
		return fmt.Sprintf("octogate: annotation %s of namespace %q is decided at creation and cannot be changed by %q", namespacetemplate.AnnotationTemplate, ns.Name, user.Username)
	}
	if old.Labels[namespacetemplate.LabelCreatorUID] != ns.Labels[namespacetemplate.LabelCreatorUID] {
		return fmt.Sprintf("octogate: label %s of namespace %q cannot be set, changed or removed by %q", namespacetemplate.LabelCreatorUID, ns.Name, user.Username)
	}
	teams, _ := namespacetemplate.ParseOwnerTeams(ns.Annotations[namespacetemplate.AnnotationOwnerTeams])
	for k, v := range ns.Labels {
		team, ok := namespacetemplate.TeamOfLabel(k)
		if !ok || old.Labels[k] == v {
			continue
		}
		if !slices.Contains(teams, team) {
			return fmt.Sprintf("octogate: label %s of namespace %q: team %s is not in annotation %s", k, ns.Name, team, namespacetemplate.AnnotationOwnerTeams)
		}
	}
	if old.Annotations[namespacetemplate.AnnotationOwnerTeams] == ns.Annotations[namespacetemplate.AnnotationOwnerTeams] {
		return ""
	}
	if !s.isOwner(old, user) {
		return fmt.Sprintf("octogate: annotation %s of namespace %q may be changed only by its creator, a member of a co-owner team or an admin, not %q", namespacetemplate.AnnotationOwnerTeams, ns.Name, user.Username)
	}
	return s.checkOwnerTeams(old, ns, user)
}

// templateOf returns the template in force that ns records in AnnotationTemplate, or nil
// (none recorded, or no longer in the templates file).
func (s *selfService) templateOf(ns *corev1.Namespace) *namespacetemplate.Template {
	name, ok := ns.Annotations[namespacetemplate.AnnotationTemplate]
	if !ok || s.templates == nil {
		return nil
	}
	t, _ := s.templates.Templates().Get(name)
	return t
}

// allowedKeys names the keys t lets owners set ("label istio-injection; annotations
// example.com/*, note"), or "" when it lists none.
func allowedKeys(t *namespacetemplate.Template) string {
	if t == nil {
		return ""
	}
	var parts []string
	for _, f := range []struct {
		noun string
		keys []string
	}{{"label", t.AllowedLabels}, {"annotation", t.AllowedAnnotations}} {
		switch len(f.keys) {
		case 0:
		case 1:
			parts = append(parts, f.noun+" "+f.keys[0])
		default:
			parts = append(parts, f.noun+"s "+strings.Join(f.keys, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// isOwner reports whether user created ns (uid) or is in one of its co-owner teams. The
// creator of an orphaned namespace (namespacetemplate.AnnotationOrphanedAt) is no owner of it
// until an admin gives it back.
func (s *selfService) isOwner(ns *corev1.Namespace, user authenticationv1.UserInfo) bool {
	if user.UID != "" && user.UID == ns.Annotations[AnnotationCreatorUID] && !namespacetemplate.Orphaned(ns.Annotations) {
		return true
	}
	teams, _ := namespacetemplate.ParseOwnerTeams(ns.Annotations[namespacetemplate.AnnotationOwnerTeams])
	for _, team := range teams {
		if slices.ContainsFunc(user.Groups, func(g string) bool { return strings.EqualFold(g, s.prefix+team) }) {
			return true
		}
	}
	return false
}

// changeBeyondOwnerTeams names the first change from old to ns other than annotation
// AnnotationOwnerTeams, the owner-team labels, kubectl apply's own annotation (so owners may
// name teams with kubectl apply too) and the labels and annotations t allows (t may be nil)
// ("label env", "spec"), or "".
func changeBeyondOwnerTeams(old, ns *corev1.Namespace, t *namespacetemplate.Template) string {
	if k := changedKey(old.Labels, ns.Labels, func(k string) bool { _, team := namespacetemplate.TeamOfLabel(k); return team || t.AllowsLabel(k) }); k != "" {
		return "label " + k
	}
	if k := changedKey(old.Annotations, ns.Annotations, func(k string) bool {
		return k == namespacetemplate.AnnotationOwnerTeams || k == lastApplied || t.AllowsAnnotation(k)
	}); k != "" {
		return "annotation " + k
	}
	switch {
	case !equality.Semantic.DeepEqual(old.Spec, ns.Spec):
		return "spec"
	case !slices.Equal(old.Finalizers, ns.Finalizers):
		return "metadata.finalizers"
	case !equality.Semantic.DeepEqual(old.OwnerReferences, ns.OwnerReferences):
		return "metadata.ownerReferences"
	}
	return ""
}

// changedKey returns the smallest key, other than those skip accepts, whose presence or value
// differs between a and b.
func changedKey(a, b map[string]string, skip func(string) bool) string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; (!ok || w != v) && !skip(k) {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !skip(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	return slices.Min(keys)
}

// lastApplied is the annotation `kubectl apply` keeps on the objects it creates
// (https://kubernetes.io/docs/reference/labels-annotations-taints/#kubectl-kubernetes-io-last-applied-configuration).
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// foreignMetadata names the first label or annotation of a namespace of template t at CREATE
// that octogate does not set or read and t does not allow ("label
// pod-security.kubernetes.io/enforce"), or "". A creator held to a template may not choose
// pod security levels, labels other namespaces' NetworkPolicies select on, or annotations
// admission plugins read (node selectors), as owners may not change them later.
// kubernetes.io/metadata.name (set by kube-apiserver) and kubectl apply's annotation are
// allowed.
func foreignMetadata(ns *corev1.Namespace, t *namespacetemplate.Template) string {
	ours := func(k string) bool {
		_, team := namespacetemplate.TeamOfLabel(k)
		return team || k == namespacetemplate.LabelCreatorUID || k == corev1.LabelMetadataName || t.AllowsLabel(k)
	}
	if k := changedKey(nil, ns.Labels, ours); k != "" {
		return "label " + k
	}
	ours = func(k string) bool {
		return slices.Contains(protectedAnnotations[:], k) || k == namespacetemplate.AnnotationTemplate ||
			k == namespacetemplate.AnnotationOwnerTeams || k == lastApplied || t.AllowsAnnotation(k)
	}
	if k := changedKey(nil, ns.Annotations, ours); k != "" {
		return "annotation " + k
	}
	return ""
}
