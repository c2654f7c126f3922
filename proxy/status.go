package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// writeStatus answers err as kube-apiserver answers an error: a meta/v1 Status in JSON with
// its code and reason (https://kubernetes.io/docs/reference/using-api/api-concepts/#response-status-kind).
// client-go decodes a JSON Status whatever encoding it asked for.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.APIVersion, st.Kind = "v1", "Status"
	body, mErr := json.Marshal(&st)
	if mErr != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(body, '\n'))
}

// htmlSanitizer keeps a message from looking like HTML, as kube-apiserver's does.
var htmlSanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// forbidden is the 403 kube-apiserver answers when its authorizers deny a request, in its
// words (k8s.io/apiserver responsewriters.ForbiddenStatusError): `pods "x" is forbidden:
// User "u" cannot get resource "pods" in API group "" in the namespace "n": REASON`.
func forbidden(username string, info *request.RequestInfo, reason string) *apierrors.StatusError {
	return apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name, errors.New(cannot(username, info, reason)))
}

// cannot is the cause of forbidden: `User "u" cannot VERB resource "R/S" in API group "G" in
// the namespace "N": REASON`, or `... at the cluster scope`, or `... path "P"`.
func cannot(username string, info *request.RequestInfo, reason string) string {
	var msg string
	switch {
	case !info.IsResourceRequest:
		msg = fmt.Sprintf("User %q cannot %s path %q", username, info.Verb, info.Path)
	default:
		resource := info.Resource
		if info.Subresource != "" {
			resource += "/" + info.Subresource
		}
		if info.Namespace != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", username, info.Verb, resource, info.APIGroup, info.Namespace)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", username, info.Verb, resource, info.APIGroup)
		}
	}
	msg = htmlSanitizer.Replace(msg)
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}
