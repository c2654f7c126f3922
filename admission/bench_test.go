package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// BenchmarkMutate measures one Namespace CREATE review through the HTTP handler, from the
// request body to the encoded AdmissionReview with its patch.
func BenchmarkMutate(b *testing.B) {
	h, _ := testMutator(b)
	body := reviewBody(b, v1, namespaceRequest(admissionv1.Create,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"kubernetes.io/metadata.name":"team-a"},"annotations":{"example.com/owner":"x"}},"spec":{},"status":{"phase":"Active"}}`,
		"", octocat))
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if w := serve(ctx, h, body); w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkMutateAsKubectlCreates is BenchmarkMutate with the object kube-apiserver sends for
// `kubectl create namespace`: with managedFields, which the decision does not read, and a user
// in a dozen groups.
func BenchmarkMutateAsKubectlCreates(b *testing.B) {
	h, _ := testMutator(b)
	user := octocat
	user.Groups = []string{"github:acme", "github:acme/guild-0", "github:acme/guild-1", "github:acme/guild-2",
		"github:acme/guild-3", "github:acme/guild-4", "github:acme/guild-5", "github:acme/guild-6",
		"github:acme/guild-7", "github:acme/guild-8", "github:acme/guild-9", "github:acme/team-24", "system:authenticated"}
	body := reviewBody(b, v1, namespaceRequest(admissionv1.Create,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a-dev","creationTimestamp":null,`+
			`"labels":{"kubernetes.io/metadata.name":"team-a-dev","team":"a"},"annotations":{"example.com/cost-center":"1234"},`+
			`"managedFields":[{"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"2025-01-01T00:00:00Z",`+
			`"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}}]},"spec":{},"status":{"phase":"Active"}}`,
		"", user))
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if w := serve(ctx, h, body); w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkValidate measures one Namespace UPDATE review through the validating webhook's
// HTTP handler: a user who is neither an admin nor the owner changes a label (RBAC let them),
// which is allowed.
func BenchmarkValidate(b *testing.B) {
	h, _ := testValidator(b)
	old := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"kubernetes.io/metadata.name":"team-a"},` +
		`"annotations":{"octogate.dev/creator":"github:hubot:42","octogate.dev/creator-uid":"42","octogate.dev/creator-groups":"[\"github:acme\"]"}},"spec":{},"status":{"phase":"Active"}}`
	body := reviewBody(b, v1, namespaceRequest(admissionv1.Update, strings.Replace(old, `"team-a"}`, `"team-a","tier":"gold"}`, 1), old, octocat))
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if w := serve(ctx, h, body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"allowed":true`) {
			b.Fatal(w.Code, w.Body)
		}
	}
}

// BenchmarkBareHandler is the floor BenchmarkMutate compares against: the same request
// through an http.Handler that only reads the body and writes a fixed answer.
func BenchmarkBareHandler(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = r.Body.Read(make([]byte, 4096))
		_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`))
	})
	body := reviewBody(b, v1, namespaceRequest(admissionv1.Create, `{"metadata":{"name":"team-a"}}`, "", octocat))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		serve(ctx, h, body)
	}
}
