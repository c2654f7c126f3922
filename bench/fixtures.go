package main

import (
	"encoding/json"
	"fmt"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/policyfixture"
)

// org is the GitHub organization every benchmark user belongs to (OCTOGATE_GITHUB_ORGS).
const org = policyfixture.Org

// policyRules is the size of the /authorize policy.
const policyRules = 100

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// subjectAccessReview is what kube-apiserver sends for `kubectl logs web-0` by the user.
func subjectAccessReview(n int) []byte {
	return mustJSON(map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SubjectAccessReview",
		"spec": map[string]any{
			"resourceAttributes": map[string]any{
				"namespace": policyfixture.LastTeam(n) + "-prod", "verb": "get", "group": "", "version": "v1",
				"resource": "pods", "subresource": "log", "name": "web-0",
			},
			"user":   "github:octocat",
			"uid":    "583231",
			"groups": policyfixture.Groups(n),
			"extra":  map[string][]string{"octogate.dev/github-login": {"Octocat"}},
		},
	})
}

// fixedSubjectAccessReviewAnswer is the baseline route's answer, as long as /authorize's.
var fixedSubjectAccessReviewAnswer = []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true,"reason":"octogate: rule team-24-workloads"}}`)

func tokenReview(token string) []byte {
	return mustJSON(map[string]any{
		"apiVersion": "authentication.k8s.io/v1",
		"kind":       "TokenReview",
		"spec":       map[string]any{"token": token, "audiences": []string{"https://kubernetes.default.svc"}},
	})
}

// namespaceCreate is the AdmissionReview kube-apiserver sends for `kubectl create namespace`
// with a label and an annotation, by a user in several groups.
func namespaceCreate() []byte {
	ns := map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata": map[string]any{
			"name":              "team-a-dev",
			"creationTimestamp": nil,
			"labels":            map[string]string{"kubernetes.io/metadata.name": "team-a-dev", "team": "a"},
			"annotations":       map[string]string{"example.com/cost-center": "1234"},
			"managedFields": []any{map[string]any{
				"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
				"time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:team": map[string]any{}}}},
			}},
		},
		"spec":   map[string]any{},
		"status": map[string]any{"phase": "Active"},
	}
	return mustJSON(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"request": map[string]any{
			"uid":                "705ab4f5-6393-11e8-b7cc-42010a800002",
			"kind":               map[string]string{"group": "", "version": "v1", "kind": "Namespace"},
			"resource":           map[string]string{"group": "", "version": "v1", "resource": "namespaces"},
			"requestKind":        map[string]string{"group": "", "version": "v1", "kind": "Namespace"},
			"requestResource":    map[string]string{"group": "", "version": "v1", "resource": "namespaces"},
			"name":               "team-a-dev",
			"operation":          "CREATE",
			"userInfo":           map[string]any{"username": "github:octocat", "uid": "583231", "groups": policyfixture.Groups(policyRules), "extra": map[string][]string{"octogate.dev/github-login": {"Octocat"}}},
			"object":             ns,
			"oldObject":          nil,
			"dryRun":             false,
			"options":            map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl-create"},
			"subResource":        "",
			"requestSubResource": "",
		},
	})
}

// githubUser is a member of org in teams teams, with one token.
func githubUser(login, token string, teams int) githubapi.User {
	u := githubapi.User{
		Login:       login,
		Tokens:      []string{token},
		Memberships: []githubapi.Membership{{Org: org}},
	}
	for i := range teams {
		u.Teams = append(u.Teams, githubapi.Team{Org: org, Name: fmt.Sprintf("Guild %d", i)})
	}
	return u
}
