package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// Every webhook route tells the same defect of a body in the same words (only the review's
// name differs), as 400 with a one-line JSON error.
func TestEveryRouteTellsABadBodyInTheSameWords(t *testing.T) {
	authz, err := subjectaccessreview.New(subjectaccessreview.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mutate, err := admission.NewMutator(admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct {
		review     string // the review's name with its article
		apiVersion string // the apiVersion words the route wants
		h          http.Handler
	}{
		{"a TokenReview", "authentication.k8s.io/v1 or authentication.k8s.io/v1beta1", tokenreview.NewHandler(nil, nil)},
		{"a SubjectAccessReview", "authorization.k8s.io/v1 or authorization.k8s.io/v1beta1", authz},
		{"an AdmissionReview", "admission.k8s.io/v1 or admission.k8s.io/v1beta1", mutate},
	}
	for _, tc := range []struct {
		name, body string
		want       func(review, apiVersion string) string
	}{
		{"empty", "", func(r, _ string) string { return "body is empty: want " + r }},
		{"not JSON", "{", func(string, string) string { return "body is not JSON: unexpected end of JSON input at byte 1" }},
		{"null", "null", func(r, _ string) string { return "body is JSON null, want " + r + " object" }},
		{"an array", "[1]", func(r, _ string) string { return "body is a JSON array, want " + r + " object" }},
		{"another kind", `{"apiVersion":"v9","kind":"Pod"}`, func(r, _ string) string { return `kind must be ` + r[strings.Index(r, " ")+1:] + `, not "Pod"` }},
		{"another apiVersion", `{"apiVersion":"v9","kind":"%s"}`, func(_, v string) string { return `apiVersion must be ` + v + `, not "v9"` }},
	} {
		for _, rt := range routes {
			t.Run(tc.name+" "+rt.review, func(t *testing.T) {
				rec := httptest.NewRecorder()
				body := tc.body
				if strings.Contains(body, "%s") {
					body = fmt.Sprintf(body, rt.review[strings.Index(rt.review, " ")+1:])
				}
				r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				rt.h.ServeHTTP(rec, r)
				var got struct{ Error string }
				_ = json.Unmarshal(rec.Body.Bytes(), &got)
				if want := tc.want(rt.review, rt.apiVersion); rec.Code != 400 || got.Error != want {
					t.Fatalf("%d %q, want 400 %q", rec.Code, rec.Body, want)
				}
			})
		}
	}
}
