package admission

import (
	"encoding/json"
	"errors"
	"fmt"

	jsonexp "github.com/go-json-experiment/json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/octogate/octogate/webhooks/door"
)

// namespaceObject is the part of a v1 Namespace the webhooks decide on. The fields have the
// JSON names and Go types corev1.Namespace gives them, so they decode, or fail to, as they
// would there; everything else (labels, managedFields, spec, status) is skipped unread.
// kube-apiserver has already decoded and validated the whole object before it calls a
// webhook, so the webhook checks only what it reads.
type namespaceObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        namespaceMeta `json:"metadata"`
}

type namespaceMeta struct {
	Name              string            `json:"name"`
	GenerateName      string            `json:"generateName"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	Annotations       map[string]string `json:"annotations"`
	Labels            map[string]string `json:"labels"`
}

// decodeInto decodes the kind, apiVersion, metadata.name, metadata.generateName,
// metadata.deletionTimestamp, metadata.annotations and metadata.labels of a Namespace into ns, the way the
// API machinery's JSON serializer does (case-sensitive field names) without going through a
// scheme: the object in an AdmissionRequest is already in the version the webhook registered
// for (v1). A kind or apiVersion other than v1 Namespace is an error. Errors speak of JSON
// fields and types, never of Go types.
//
// encoding/json decodes field names case-insensitively, so it would take "Annotations" for
// metadata.annotations, which kube-apiserver does not; a patch built on that would not apply.
//
// go-json-experiment/json decodes first: with its defaults it matches names case-sensitively
// and skips unknown ones, as kjson here, and refuses duplicate names and invalid UTF-8, where
// kjson takes the last and replaces; any body it refuses is decoded again by kjson, whose
// answer stands. FuzzNamespaceDecodersAgree checks that both give the same object.
func decodeInto(data []byte, ns *corev1.Namespace) error {
	var obj namespaceObject
	if !decodeNamespaceQuick(data, &obj) {
		obj = namespaceObject{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &obj); err != nil {
			return jsonObjectError(data, err)
		}
	}
	if (obj.Kind != "" && obj.Kind != "Namespace") || (obj.APIVersion != "" && obj.APIVersion != "v1") {
		return fmt.Errorf("object is %s %s, not v1 Namespace", obj.APIVersion, obj.Kind)
	}
	*ns = corev1.Namespace{
		TypeMeta: obj.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              obj.Metadata.Name,
			GenerateName:      obj.Metadata.GenerateName,
			DeletionTimestamp: obj.Metadata.DeletionTimestamp,
			Annotations:       obj.Metadata.Annotations,
			Labels:            obj.Metadata.Labels,
		},
	}
	return nil
}

// decodeNamespaceQuick decodes data into obj with go-json-experiment/json's defaults and
// reports whether it could (see decodeInto).
func decodeNamespaceQuick(data []byte, obj *namespaceObject) bool {
	return jsonexp.Unmarshal(data, obj) == nil
}

// jsonObjectError restates err, kjson's error for data, in JSON words. kjson's error types
// are internal, so data is decoded again with encoding/json, which finds the same first
// mismatch; only failed decodes pay for it.
func jsonObjectError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch again := json.Unmarshal(data, new(namespaceObject)); {
	case errors.As(again, &se):
		return fmt.Errorf("object is not JSON: %w at byte %d", se, se.Offset)
	case errors.As(again, &te) && te.Field == "":
		return fmt.Errorf("object is a JSON %s, want a Namespace object", door.JSONValueWord(te.Value))
	case errors.As(again, &te):
		return fmt.Errorf("%s is a JSON %s, want %s", te.Field, door.JSONValueWord(te.Value), door.JSONTypeWords(te.Type))
	default:
		return errors.New("object is not a Namespace")
	}
}
