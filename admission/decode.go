package admission

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
)

// decodeInto decodes a Namespace the way the API machinery's JSON serializer does
// (case-sensitive field names, integers kept as int64) without going through a scheme: the
// object in an AdmissionRequest is already in the version the webhook registered for (v1).
// A kind or apiVersion other than v1 Namespace is an error. Errors speak of JSON fields and
// types, never of Go types.
func decodeInto(data []byte, ns *corev1.Namespace) error {
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, ns); err != nil {
		return jsonObjectError(data, err)
	}
	if (ns.Kind != "" && ns.Kind != "Namespace") || (ns.APIVersion != "" && ns.APIVersion != "v1") {
		return fmt.Errorf("object is %s %s, not v1 Namespace", ns.APIVersion, ns.Kind)
	}
	return nil
}

// jsonObjectError restates err, kjson's error for data, in JSON words. kjson's error types
// are internal, so data is decoded again with encoding/json, which finds the same first
// mismatch; only failed decodes pay for it.
func jsonObjectError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch again := json.Unmarshal(data, new(corev1.Namespace)); {
	case errors.As(again, &se):
		return fmt.Errorf("object is not JSON: %v at byte %d", se, se.Offset)
	case errors.As(again, &te) && te.Field == "":
		return fmt.Errorf("object is a JSON %s, want a Namespace object", jsonValue(te.Value))
	case errors.As(again, &te):
		return fmt.Errorf("%s is a JSON %s, want %s", te.Field, jsonValue(te.Value), jsonType(te.Type))
	default:
		return errors.New("object is not a Namespace")
	}
}
