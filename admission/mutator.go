package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/namespacetemplate"
	"github.com/octogate/octogate/subjectaccessreview"
)

const webhookMutate = "mutate-namespaces"

// mutator is the controller-runtime admission.Handler behind NewMutator.
type mutator struct {
	reporter
	templates TemplateSource
}

func newMutator(cfg Config) *mutator {
	return &mutator{reporter: newReporter(cfg.logger(), webhookMutate), templates: cfg.Templates}
}

// templateFor returns the name of the template user's namespaces get now, or "".
func (m *mutator) templateFor(user authenticationv1.UserInfo) string {
	if m.templates == nil {
		return ""
	}
	if t := m.templates.Templates().Select(creatorOf(user)); t != nil {
		return t.Name
	}
	return ""
}

// patchOp is one RFC 6902 operation. Value is a string (one annotation) or annotation map
// (the whole metadata.annotations object).
type patchOp struct {
	Op    string
	Path  string
	Value any
}

// Handle decodes the request, lets handle decide and encodes the patch. Dry-run requests get
// the same patch: the handler has no side effects to skip.
func (m *mutator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation != admissionv1.Create || !isNamespace(req) {
		m.record(ctx, req, decisionAdmit, "not a Namespace CREATE")
		return ctrladmission.Allowed("")
	}
	var ns corev1.Namespace
	if err := decodeNamespace(req.Object, &ns); err != nil {
		m.record(ctx, req, decisionError, err.Error())
		return ctrladmission.Errored(http.StatusBadRequest, err)
	}
	ops := handle(&ns, req.UserInfo, m.templateFor(req.UserInfo))
	if len(ops) == 0 {
		m.record(ctx, req, decisionAdmit, "nothing to record")
		return ctrladmission.Allowed("")
	}
	m.record(ctx, req, decisionPatch, "")
	return patched(encodePatch(ops))
}

// handle decides the patch that records user as the creator of ns: the creator annotations
// (plus AnnotationTemplate when a template was decided, removed when the client supplied one
// and none was), the creator-uid label and one owner-team label per team of
// AnnotationOwnerTeams (client-supplied ones that the annotation does not name are removed).
// A Namespace without annotations (or labels) gets one operation adding the whole map, else
// one add, replace or remove per key, so client-supplied values are overwritten and every
// other key is kept. It returns nil when there is nothing to record: the Namespace is being
// deleted, or has neither name nor generateName (the API server refuses it anyway, and a
// patch under /metadata might not apply).
func handle(ns *corev1.Namespace, user authenticationv1.UserInfo, template string) []patchOp {
	if ns.DeletionTimestamp != nil || (ns.Name == "" && ns.GenerateName == "") {
		return nil
	}
	values := creatorAnnotations(user)
	annotations := make(map[string]string, len(values)+1)
	for i, k := range protectedAnnotations {
		annotations[k] = values[i]
	}
	var removeAnnotations []string
	if template != "" {
		annotations[namespacetemplate.AnnotationTemplate] = template
	} else {
		removeAnnotations = append(removeAnnotations, namespacetemplate.AnnotationTemplate)
	}
	labels := map[string]string{}
	var removeLabels []string
	if user.UID != "" && len(validation.IsValidLabelValue(user.UID)) == 0 {
		labels[namespacetemplate.LabelCreatorUID] = user.UID
	} else {
		removeLabels = append(removeLabels, namespacetemplate.LabelCreatorUID)
	}
	teams, err := namespacetemplate.ParseOwnerTeams(ns.Annotations[namespacetemplate.AnnotationOwnerTeams])
	if value, ok := ns.Annotations[namespacetemplate.AnnotationOwnerTeams]; ok && err == nil && value != strings.Join(teams, ",") {
		// Stored as the controller and the authorizer read it: lowercased, no blanks or repeats.
		annotations[namespacetemplate.AnnotationOwnerTeams] = strings.Join(teams, ",")
	}
	for _, team := range teams {
		labels[namespacetemplate.OwnerTeamLabel(team)] = "true"
	}
	for k := range ns.Labels {
		if _, want := labels[k]; !want && strings.HasPrefix(k, namespacetemplate.OwnerTeamLabelPrefix) {
			removeLabels = append(removeLabels, k)
		}
	}
	ops := mapOps("/metadata/annotations/", ns.Annotations, annotations, removeAnnotations)
	return append(ops, mapOps("/metadata/labels/", ns.Labels, labels, removeLabels)...)
}

// mapOps returns the operations that set every key of set and remove every key of remove in
// the map existing at base ("/metadata/annotations/"): one add of the whole map when
// existing is nil, else one operation per key, in key order.
func mapOps(base string, existing, set map[string]string, remove []string) []patchOp {
	if existing == nil {
		if len(set) == 0 {
			return nil
		}
		return []patchOp{{Op: "add", Path: strings.TrimSuffix(base, "/"), Value: set}}
	}
	keys := sortedKeys(set)
	ops := make([]patchOp, 0, len(keys)+len(remove))
	for _, k := range keys {
		op := "add"
		if old, ok := existing[k]; ok {
			if old == set[k] && base != "/metadata/annotations/" {
				continue
			}
			op = "replace"
		}
		ops = append(ops, patchOp{Op: op, Path: pointerTo(base, k), Value: set[k]})
	}
	slices.Sort(remove)
	for _, k := range remove {
		if _, ok := existing[k]; ok {
			ops = append(ops, patchOp{Op: "remove", Path: pointerTo(base, k)})
		}
	}
	return ops
}

// creatorAnnotations returns the values of protectedAnnotations, in that order, for user.
func creatorAnnotations(user authenticationv1.UserInfo) [len(protectedAnnotations)]string {
	return [...]string{user.Username, groupsJSON(user.Groups), user.UID}
}

// groupsJSON encodes groups as a JSON array of strings; no groups is "[]". Groups under
// "octogate:" are left out: octogate's proxy adds them to one request a rule allowed
// (subjectaccessreview.RuleGroupPrefix, OwnerGroup); they are not the creator's.
func groupsJSON(groups []string) string {
	n := 2
	for _, g := range groups {
		n += len(g) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	first := true
	for _, g := range groups {
		if strings.HasPrefix(g, subjectaccessreview.ProxyGroupPrefix) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, g)
	}
	return string(append(b, ']'))
}

// pointerTo is the JSON pointer of key k of the map at base ("/metadata/labels/"): base, then
// k as a reference token (RFC 6901 section 3: "~" as "~0" and "/" as "~1", in one pass, so the
// "~1" of an escaped "/" is not escaped again), in one allocation. A strings.Replacer would
// escape as well, but takes the builder as an io.Writer, which costs a second allocation, and
// building one per call was an eighth of a review's CPU.
func pointerTo(base, k string) string {
	var b strings.Builder
	b.Grow(len(base) + len(k) + strings.Count(k, "~") + strings.Count(k, "/"))
	b.WriteString(base)
	for i := range len(k) {
		switch c := k[i]; c {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// patched is admission.Patched with the patch already encoded, so Response.Complete does
// not marshal it again.
func patched(patch []byte) ctrladmission.Response {
	resp := ctrladmission.Allowed("")
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch = patch
	resp.PatchType = &pt
	return resp
}

// encodePatch writes ops as a JSON patch document. Maps are written in key order, as
// encoding/json would write them; a remove has no value.
func encodePatch(ops []patchOp) []byte {
	b := make([]byte, 0, patchSize(ops))
	b = append(b, '[')
	for i, op := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"op":`...)
		b = appendJSONString(b, op.Op)
		b = append(b, `,"path":`...)
		b = appendJSONString(b, op.Path)
		if op.Value != nil {
			b = append(b, `,"value":`...)
		}
		switch v := op.Value.(type) {
		case nil:
		case string:
			b = appendJSONString(b, v)
		case map[string]string:
			b = append(b, '{')
			n := 0
			for _, k := range sortedKeys(v) {
				val := v[k]
				if n > 0 {
					b = append(b, ',')
				}
				n++
				b = appendJSONString(b, k)
				b = append(b, ':')
				b = appendJSONString(b, val)
			}
			b = append(b, '}')
		default:
			// Not reached: handle only builds strings and annotation maps.
			raw, _ := json.Marshal(v)
			b = append(b, raw...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// sortedKeys is the keys of m in order, in one allocation (slices.Sorted(maps.Keys(m)) grows
// its slice from empty: five allocations for the four keys of a creator's annotations).
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// patchSize is the length of ops encoded when no value needs more escapes than the quotes
// of a creator-groups array, so encodePatch's buffer usually grows no more.
func patchSize(ops []patchOp) int {
	n := 2
	for _, op := range ops {
		n += len(`{"op":"","path":"","value":},`) + len(op.Op) + len(op.Path)
		switch v := op.Value.(type) {
		case string:
			n += jsonStringSize(v)
		case map[string]string:
			for k, val := range v {
				n += len(k) + jsonStringSize(val) + len(`"":,`)
			}
		}
	}
	return n
}

// jsonStringSize is the length of s as a JSON string when only its quotes need escaping.
func jsonStringSize(s string) int {
	return len(s) + strings.Count(s, `"`) + 2
}

const hexDigits = "0123456789abcdef"

// jsonSafe[c] reports whether appendJSONString copies the ASCII byte c as it is.
var jsonSafe = func() (safe [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		safe[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return safe
}()

// appendJSONString appends s as a JSON string literal, escaping like encoding/json (Go 1.22
// and later): quote, backslash, control characters (\b, \f, \n, \r, \t by name), <, >, &,
// U+2028, U+2029, and invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
