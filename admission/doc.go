// Package admission owns the Namespace admission webhooks served at /mutate/namespaces and
// /validate/namespaces. It speaks admission.k8s.io/v1 and v1beta1 AdmissionReview through
// controller-runtime's pkg/webhook/admission (StandaloneWebhook), which answers in the
// apiVersion it was sent and echoes the request uid. The reviews kube-apiserver sends (JSON,
// v1 or v1beta1, with a uid) skip controller-runtime's HTTP decoding and encoding but not its
// Webhook.Handle: they are decoded once and answered with the bytes controller-runtime would
// write (fastpath.go); every other request goes through controller-runtime as it comes.
//
// The mutating webhook records who created a Namespace in three annotations
// (AnnotationCreator, AnnotationCreatorUID, AnnotationCreatorGroups); the validating webhook
// keeps anyone but system:masters and the configured admin groups from changing them
// afterwards. The ownership package turns the creator annotation into RBAC.
//
// See https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
// for the AdmissionReview wire format and JSON patch responses.
package admission
