package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeNamespacesAPI answers the two requests `octogate namespaces` makes, a SelfSubjectReview
// for user and the list of namespaces labelled with uid, as kube-apiserver would (the real
// one is in test/e2e's TestSelfServiceNamespaces). It writes a kubeconfig for it.
func fakeNamespacesAPI(t *testing.T, user authenticationv1.UserInfo, namespaces ...corev1.Namespace) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/selfsubjectreviews", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(authenticationv1.SelfSubjectReview{
			TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectReview", APIVersion: "authentication.k8s.io/v1"},
			Status:   authenticationv1.SelfSubjectReviewStatus{UserInfo: user}})
	})
	mux.HandleFunc("GET /api/v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		if got, want := r.URL.Query().Get("labelSelector"), "octogate.dev/creator-uid="+user.UID; got != want {
			http.Error(w, "labelSelector "+got+", want "+want, http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(corev1.NamespaceList{TypeMeta: metav1.TypeMeta{Kind: "NamespaceList", APIVersion: "v1"}, Items: namespaces})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: " + srv.URL + "}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func TestNamespacesCommand(t *testing.T) {
	bob := authenticationv1.UserInfo{Username: "github:bob:1002", UID: "1002"}
	t.Run("a table with a header, as kubectl prints", func(t *testing.T) {
		isolate(t)
		created := metav1.NewTime(time.Now().Add(-3 * time.Minute))
		kubeconfig := fakeNamespacesAPI(t, bob,
			corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bob-a", CreationTimestamp: created, Annotations: map[string]string{"octogate.dev/template": "members"}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bob-long-name", CreationTimestamp: created},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}})
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "namespaces", "--kubeconfig", kubeconfig)
		want := "NAME            STATUS        TEMPLATE   AGE\n" +
			"bob-a           Active        members    3m\n" +
			"bob-long-name   Terminating   <none>     3m\n"
		if code != 0 || out != want {
			t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, out, want, stderr)
		}
	})
	t.Run("none: a line on standard error says whose", func(t *testing.T) {
		isolate(t)
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "namespaces", "--kubeconfig", fakeNamespacesAPI(t, bob))
		if code != 0 || out != "" || !strings.Contains(stderr.String(), "No namespaces created by github:bob:1002 (label octogate.dev/creator-uid=1002).") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
	})
	t.Run("a user without a uid is told so", func(t *testing.T) {
		isolate(t)
		stderr := &syncBuffer{}
		_, code := runOctogate(t, stderr, "namespaces", "--kubeconfig", fakeNamespacesAPI(t, authenticationv1.UserInfo{Username: "admin"}))
		if code == 0 || !strings.Contains(stderr.String(), "the cluster knows admin without a uid") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
}
