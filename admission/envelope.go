package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/octogate/octogate/webhooks"
)

// envelopeGuard gives requests that are not an admission.k8s.io/v1 or v1beta1 AdmissionReview
// with a uid the answer every octogate route gives to a bad body: HTTP 400 with a one-line
// JSON error (webhooks.WriteError). controller-runtime answers them with HTTP 200 instead: an
// AdmissionReview without apiVersion and kind carrying the error when the body does not
// decode, or a review echoing whatever apiVersion and kind (even "foo/v1" "Pod") it was sent.
//
// It reads the first bytes of controller-runtime's answer rather than parsing the request a
// second time, so a well-formed review costs one prefix comparison. controller-runtime writes
// the whole answer with one json.Encoder.Encode of a v1.AdmissionReview, whose fields come out
// in struct order: kind, apiVersion, response (whose first field is uid).
type envelopeGuard struct {
	next http.Handler
}

func (g envelopeGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.next.ServeHTTP(&guardWriter{ResponseWriter: w}, r)
}

var reviewPrefixes = [...][]byte{
	[]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`),
	[]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","response":{"uid":"`),
}

// guardWriter passes the answer through when it starts like a supported AdmissionReview
// with a non-empty uid, else replaces it with the 400 error.
type guardWriter struct {
	http.ResponseWriter
	decided, refused bool
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if !g.decided {
		g.decided = true
		g.refused = !isReviewAnswer(p)
		if g.refused {
			webhooks.WriteError(g.ResponseWriter, http.StatusBadRequest, envelopeError(p))
		}
	}
	if g.refused {
		return len(p), nil
	}
	return g.ResponseWriter.Write(p)
}

func isReviewAnswer(p []byte) bool {
	for _, prefix := range reviewPrefixes {
		if bytes.HasPrefix(p, prefix) {
			return len(p) > len(prefix) && p[len(prefix)] != '"'
		}
	}
	return false
}

// envelopeError says what was wrong with the request, from controller-runtime's answer.
func envelopeError(answer []byte) string {
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &ar); err != nil {
		return "not an AdmissionReview"
	}
	switch {
	case ar.Kind == "" && ar.Response != nil && ar.Response.Result != nil:
		return "not an AdmissionReview: " + ar.Response.Result.Message
	case ar.Kind != "AdmissionReview" || (ar.APIVersion != "admission.k8s.io/v1" && ar.APIVersion != "admission.k8s.io/v1beta1"):
		return fmt.Sprintf("unsupported apiVersion %q kind %q: want an admission.k8s.io/v1 or v1beta1 AdmissionReview", ar.APIVersion, ar.Kind)
	default:
		return "not an AdmissionReview request: no request.uid"
	}
}
