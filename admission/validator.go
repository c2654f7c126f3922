package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/namespacetemplate"
)

const webhookValidate = "validate-namespaces"

// validator is the controller-runtime admission.Handler behind NewValidator.
type validator struct {
	reporter
	// adminGroups holds system:masters and Config.AdminGroups; adminList is the same in
	// order, for denial messages.
	adminGroups map[string]struct{}
	adminList   []string
	self        *selfService
}

func newValidator(cfg Config) *validator {
	v := &validator{
		reporter:    newReporter(cfg.logger(), webhookValidate),
		adminGroups: make(map[string]struct{}, len(cfg.AdminGroups)+1),
		adminList:   append([]string{groupSystemMasters}, cfg.AdminGroups...),
		self:        &selfService{templates: cfg.Templates, lister: cfg.Namespaces, prefix: cfg.UsernamePrefix},
	}
	for _, g := range v.adminList {
		v.adminGroups[g] = struct{}{}
	}
	return v
}

// Handle decodes the old and new Namespace of an UPDATE and lets validate decide.
func (v *validator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation == admissionv1.Create && isNamespace(req) {
		return v.handleCreate(ctx, req)
	}
	if req.Operation != admissionv1.Update || !isNamespace(req) {
		v.record(ctx, req, decisionAdmit, "not a Namespace CREATE or UPDATE")
		return ctrladmission.Allowed("")
	}
	var ns, old corev1.Namespace
	if err := decodeNamespace(req.Object, &ns); err != nil {
		v.record(ctx, req, decisionError, err.Error())
		return ctrladmission.Errored(http.StatusBadRequest, err)
	}
	if err := decodeNamespace(req.OldObject, &old); err != nil {
		err = fmt.Errorf("oldObject: %w", err)
		v.record(ctx, req, decisionError, err.Error())
		return ctrladmission.Errored(http.StatusBadRequest, err)
	}
	if msg := v.validate(&old, &ns, req.UserInfo); msg != "" {
		v.record(ctx, req, decisionReject, msg)
		return ctrladmission.Denied(msg)
	}
	v.record(ctx, req, decisionAdmit, "")
	return ctrladmission.Allowed("")
}

// validate returns why user may not turn old into ns, or "" when the update is allowed.
// Setting, changing or removing any creator annotation needs system:masters or an admin
// group, and so do giving an orphaned Namespace back (removing
// namespacetemplate.AnnotationOrphanedAt) and changing its co-owner teams (its creator left
// the GitHub organization; no one else may name owners until an admin gives it back);
// updates of a Namespace that is being deleted are always allowed so deletion is never
// blocked.
func (v *validator) validate(old, ns *corev1.Namespace, user authenticationv1.UserInfo) string {
	if old.DeletionTimestamp != nil || ns.DeletionTimestamp != nil {
		return ""
	}
	var changed []string
	for _, k := range protectedAnnotations {
		was, hadIt := old.Annotations[k]
		is, hasIt := ns.Annotations[k]
		if hadIt != hasIt || was != is {
			changed = append(changed, k)
		}
	}
	if v.isAdmin(user) {
		return ""
	}
	if namespacetemplate.Orphaned(old.Annotations) && !namespacetemplate.Orphaned(ns.Annotations) {
		return fmt.Sprintf("octogate: namespace %q is orphaned (annotation %s: its creator left the GitHub organization): only members of the groups %s may give it back",
			ns.Name, namespacetemplate.AnnotationOrphanedAt, strings.Join(v.adminList, ", "))
	}
	if orphaned := namespacetemplate.Orphaned(old.Annotations) || namespacetemplate.Orphaned(ns.Annotations); orphaned &&
		old.Annotations[namespacetemplate.AnnotationOwnerTeams] != ns.Annotations[namespacetemplate.AnnotationOwnerTeams] {
		return fmt.Sprintf("octogate: namespace %q is orphaned (annotation %s: its creator left the GitHub organization): only members of the groups %s may change annotation %s until an admin gives it back",
			ns.Name, namespacetemplate.AnnotationOrphanedAt, strings.Join(v.adminList, ", "), namespacetemplate.AnnotationOwnerTeams)
	}
	if len(changed) == 0 {
		return v.self.validateOwnership(old, ns, user)
	}
	noun := "annotation"
	if len(changed) > 1 {
		noun = "annotations"
	}
	return fmt.Sprintf("octogate: %s %s of namespace %q cannot be set, changed or removed by %q: only members of the groups %s may change it",
		noun, strings.Join(changed, ", "), ns.Name, user.Username, strings.Join(v.adminList, ", "))
}

func (v *validator) isAdmin(user authenticationv1.UserInfo) bool {
	for _, g := range user.Groups {
		if _, ok := v.adminGroups[g]; ok {
			return true
		}
	}
	return false
}

// handleCreate decides a Namespace CREATE: admins pass; others are held to the reserved
// names and their template's names and limits (see selfService.validateCreate). The name is
// the final one: kube-apiserver generates a generateName's name before validating admission.
func (v *validator) handleCreate(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	var ns corev1.Namespace
	if err := decodeNamespace(req.Object, &ns); err != nil {
		v.record(ctx, req, decisionError, err.Error())
		return ctrladmission.Errored(http.StatusBadRequest, err)
	}
	if v.isAdmin(req.UserInfo) {
		v.record(ctx, req, decisionAdmit, "admin")
		return ctrladmission.Allowed("")
	}
	msg, err := v.self.validateCreate(ctx, &ns, req.UserInfo, req.DryRun != nil && *req.DryRun)
	if err != nil {
		v.record(ctx, req, decisionError, err.Error())
		return ctrladmission.Errored(http.StatusInternalServerError, err)
	}
	if msg != "" {
		v.record(ctx, req, decisionReject, msg)
		return ctrladmission.Denied(msg)
	}
	v.record(ctx, req, decisionAdmit, "")
	return ctrladmission.Allowed("")
}
