package admission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	jsonexp "github.com/go-json-experiment/json"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// The fast path serves the reviews kube-apiserver sends without controller-runtime's
// Webhook.ServeHTTP (pkg/webhook/admission/http.go), which decodes the body twice (the
// universal deserializer's Interpret of apiVersion and kind, then the review) and encodes the
// answer with a fresh json.Encoder; that was most of a review's CPU. It decodes once, calls
// the same Webhook.Handle (the handler, its panic recovery and Response.Complete) and writes
// the same bytes. Everything it does not take goes to ServeHTTP unchanged, so every error
// answer is controller-runtime's. TestFastPathAnswersAsControllerRuntime and FuzzFastPath
// (its seeds run with every go test) post the same bodies both ways and compare status,
// headers, bytes and outcomes, so a controller-runtime upgrade that changes its answer fails
// them rather than the API server.

// maxRequestSize is controller-runtime's body limit (http.go): a body of 7 MiB or more gets
// its 413 review.
const maxRequestSize = 7 << 20

// fastReview is an AdmissionReview the fast path takes: the request decoded as
// controller-runtime decodes it, and the apiVersion to answer in (admission.k8s.io/v1 or
// admission.k8s.io/v1beta1; both versions have the same fields).
type fastReview struct {
	req        ctrladmission.Request
	apiVersion string
}

// decodeReview decodes body into rv when the fast path takes it, and reports whether it did.
// It takes what controller-runtime's Webhook.ServeHTTP (http.go) decodes without an error,
// with the same result, and that envelopeGuard then lets through:
//
//   - Content-Type exactly application/json and a body under 7 MiB (ServeHTTP's checks);
//   - a JSON object whose "kind" is AdmissionReview and whose "apiVersion" is
//     admission.k8s.io/v1 or admission.k8s.io/v1beta1, both spelled exactly;
//   - a request with a non-empty uid.
//
// The guard still refuses a review it takes whose uid has U+FFFD (errUIDReplacement), as it
// refuses controller-runtime's answer to one.
//
// The body is decoded as the API machinery's non-strict JSON serializer decodes it
// (sigs.k8s.io/json, case-sensitive field names, into a v1 AdmissionReview whose request is
// the Request's own, as http.go sets it up). ServeHTTP answers in the apiVersion and kind the
// serializer's Interpret reads with encoding/json, which matches field names
// case-insensitively ("APIVERSION", "Kind" and Unicode folds of them), so a body with a
// top-level field the review does not have goes to ServeHTTP: only then could Interpret read
// another apiVersion or kind than the case-sensitive decode. Unknown fields inside request or
// response are skipped by both, as a newer kube-apiserver may send them.
//
// See https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#request
// for the request kube-apiserver sends.
//
// Most bodies are decoded by decodeReviewQuick; what it does not take is decoded again here.
func decodeReview(contentType string, body []byte, rv *fastReview) bool {
	if contentType != "application/json" || len(body) >= maxRequestSize {
		return false
	}
	return decodeReviewQuick(body, rv) || decodeReviewSlow(body, rv)
}

// decodeReviewSlow is decodeReview's decode with sigs.k8s.io/json, for every body.
func decodeReviewSlow(body []byte, rv *fastReview) bool {
	*rv = fastReview{}
	ar := admissionv1.AdmissionReview{Request: &rv.req.AdmissionRequest}
	unknown, err := kjson.UnmarshalStrict(body, &ar, kjson.DisallowUnknownFields)
	if err != nil {
		return false
	}
	for _, e := range unknown {
		var fe kjson.FieldError
		if !errors.As(e, &fe) || !(strings.HasPrefix(fe.FieldPath(), "request.") || strings.HasPrefix(fe.FieldPath(), "response.")) {
			return false
		}
	}
	return takes(&ar, rv)
}

// takes reports whether the decoded review ar, whose request was decoded into rv, is one the
// fast path answers (a v1 or v1beta1 AdmissionReview with a uid), and sets rv's apiVersion.
func takes(ar *admissionv1.AdmissionReview, rv *fastReview) bool {
	if ar.Kind != reviewKind || (ar.APIVersion != apiVersionV1 && ar.APIVersion != apiVersionBeta1) || rv.req.UID == "" {
		return false
	}
	rv.apiVersion = ar.APIVersion
	return true
}

// quickReview are the options of decodeReviewQuick: go-json-experiment/json's defaults
// (case-sensitive names; duplicate names, invalid UTF-8 and trailing data are errors) and no
// member the review does not know, anywhere but inside the objects (RawExtension).
var quickReview = jsonexp.RejectUnknownMembers(true)

// decodeReviewQuick decodes body into rv with go-json-experiment/json, about four times
// faster than sigs.k8s.io/json's reflection, and reports whether it took the body: a review
// decodeReview takes, without a duplicate or unknown name, invalid UTF-8 or a response. For
// those bodies both decoders give the same request, because case-sensitive names, null,
// strings and RawExtension (json.Unmarshaler) decode alike; everything else is refused here
// and decoded by sigs.k8s.io/json. FuzzReviewDecodersAgree checks it body by body.
func decodeReviewQuick(body []byte, rv *fastReview) bool {
	*rv = fastReview{}
	ar := admissionv1.AdmissionReview{Request: &rv.req.AdmissionRequest}
	if jsonexp.Unmarshal(body, &ar, quickReview) != nil || ar.Request != &rv.req.AdmissionRequest || ar.Response != nil {
		return false
	}
	return takes(&ar, rv)
}

// serveFast answers rv as Webhook.ServeHTTP would: Webhook.Handle's response in an
// AdmissionReview of rv's apiVersion, written with one Write (see appendReview), status 200
// by default, and the same log lines (verbosity 5) and write-failure answer as http.go.
func serveFast(ctx context.Context, w http.ResponseWriter, hook *ctrladmission.Webhook, log logr.Logger, rv *fastReview) {
	if v := log.V(5); v.Enabled() {
		v.Info("received request")
	}
	resp := hook.Handle(ctx, rv.req)
	buf := reviewBuffers.Get().(*[]byte)
	defer putReviewBuffer(buf)
	b := appendReview((*buf)[:0], rv.apiVersion, &resp.AdmissionResponse)
	*buf = b
	if _, err := w.Write(b); err != nil {
		// As writeAdmissionResponse: one more try, with a 500 review without apiVersion and kind.
		log.Error(err, "unable to encode and write the response")
		serverError := ctrladmission.Errored(http.StatusInternalServerError, err)
		if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{Response: &serverError.AdmissionResponse}); err != nil {
			log.Error(err, "still unable to encode and write the InternalServerError response")
		}
		return
	}
	if v := log.V(5); v.Enabled() {
		res := &resp.AdmissionResponse
		if res.Result != nil {
			v = v.WithValues("code", res.Result.Code, "reason", res.Result.Reason, "message", res.Result.Message)
		}
		v.Info("wrote response", "requestID", res.UID, "allowed", res.Allowed)
	}
}

// reviewBuffers holds the buffers answers are encoded into; a review answer is a few hundred
// bytes, and buffers that grew past maxPooledBuffer are dropped rather than kept.
var reviewBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledBuffer = 64 << 10

func putReviewBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		reviewBuffers.Put(b)
	}
}

// appendReview appends to b the bytes json.NewEncoder(w).Encode writes for a v1
// AdmissionReview of apiVersion with response res (writeAdmissionResponse in http.go). It is
// written out by hand rather than left to a JSON library: go-json-experiment/json under
// encoding/json's options writes the same bytes but cost /mutate/namespaces 2 µs more per
// review (32 against 34 µs of CPU under hot-routes.sh's load, about 0.04 of its ratio to the
// bare handler); TestAppendReviewMatchesEncodingJSON and FuzzFastPath hold it to encoding/json's
// bytes. Fields
// in struct order, omitempty fields left out, the patch in standard base64, strings escaped
// as encoding/json escapes them (HTML characters included), maps in key order, and a
// trailing newline. A status with fields controller-runtime's responses never set (kind,
// apiVersion, metadata, details) is rare enough to go through encoding/json as a whole.
// kube-apiserver reads the response's uid, allowed, status, patch, patchType,
// auditAnnotations and warnings; see
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response.
func appendReview(b []byte, apiVersion string, res *admissionv1.AdmissionResponse) []byte {
	if s := res.Result; s != nil && (s.TypeMeta != (metav1.TypeMeta{}) || s.ListMeta != (metav1.ListMeta{}) || s.Details != nil) {
		raw, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{Kind: reviewKind, APIVersion: apiVersion},
			Response: res,
		})
		if err != nil {
			// Not reached: an AdmissionReview has no value encoding/json cannot encode.
			// http.go answers a 500 review without apiVersion and kind then.
			serverError := ctrladmission.Errored(http.StatusInternalServerError, err)
			raw, _ = json.Marshal(admissionv1.AdmissionReview{Response: &serverError.AdmissionResponse})
		}
		return append(append(b, raw...), '\n')
	}
	b = append(b, `{"kind":"AdmissionReview","apiVersion":`...)
	b = appendJSONString(b, apiVersion)
	b = append(b, `,"response":{"uid":`...)
	b = appendJSONString(b, string(res.UID))
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, res.Allowed)
	if s := res.Result; s != nil {
		b = append(b, `,"status":{"metadata":{}`...)
		b = appendStringField(b, "status", s.Status)
		b = appendStringField(b, "message", s.Message)
		b = appendStringField(b, "reason", string(s.Reason))
		if s.Code != 0 {
			b = append(b, `,"code":`...)
			b = strconv.AppendInt(b, int64(s.Code), 10)
		}
		b = append(b, '}')
	}
	if len(res.Patch) > 0 {
		b = append(b, `,"patch":"`...)
		b = base64.StdEncoding.AppendEncode(b, res.Patch)
		b = append(b, '"')
	}
	if res.PatchType != nil {
		b = append(b, `,"patchType":`...)
		b = appendJSONString(b, string(*res.PatchType))
	}
	if len(res.AuditAnnotations) > 0 {
		b = append(b, `,"auditAnnotations":{`...)
		for i, k := range sortedKeys(res.AuditAnnotations) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, res.AuditAnnotations[k])
		}
		b = append(b, '}')
	}
	if len(res.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, warning := range res.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, warning)
		}
		b = append(b, ']')
	}
	return append(b, "}}\n"...)
}

// appendStringField appends `,"name":value` unless value is empty (omitempty).
func appendStringField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}
