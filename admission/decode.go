package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
)

// decodeInto decodes a Namespace the way the API machinery's JSON serializer does
// (case-sensitive field names, integers kept as int64) without going through a scheme: the
// object in an AdmissionRequest is already in the version the webhook registered for (v1).
// A kind or apiVersion other than v1 Namespace is an error.
func decodeInto(data []byte, ns *corev1.Namespace) error {
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, ns); err != nil {
		return err
	}
	if (ns.Kind != "" && ns.Kind != "Namespace") || (ns.APIVersion != "" && ns.APIVersion != "v1") {
		return fmt.Errorf("object is %s %s, not v1 Namespace", ns.APIVersion, ns.Kind)
	}
	return nil
}
