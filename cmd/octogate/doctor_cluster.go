package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/octogate/octogate/tokenreview"
)

// runClusterDoctor asks the cluster of the kubeconfig user u who the credential makes you,
// with a SelfSubjectReview (`kubectl auth whoami`), when nothing says which orgs the server
// allows (no --github-orgs, no session issuer) or the user sends no GitHub token of ours (a
// client certificate, another exec plugin). githubToken, when not empty, is the token the
// user's `octogate credential` gave, sent instead of running the plugin again; else the
// kubeconfig's own credential is used, as kubectl would. token describes the static or found
// token for the "token:" line ("" value: none is shown).
//
// A refusal is HTTP 401 without a reason (kube-apiserver answers "Unauthorized" whatever its
// webhook said), so the output says how to have the reason code.
// https://kubernetes.io/docs/reference/access-authn-authz/authentication/#self-subject-review
func runClusterDoctor(ctx context.Context, out io.Writer, u *kubeconfigUser, token tokenSetting, githubToken string, timeout time.Duration) error {
	// The token the plugin just found, when there is one: sending it spares a second run of
	// the plugin (and of its login).
	rc, err := u.restConfig(githubToken)
	if err != nil {
		return &exitError{code: doctorUsage, err: fmt.Errorf("kubeconfig context %q: %w", u.context, oneLine(err))}
	}
	rc.Timeout = timeout
	credential := describeCredential(u)
	switch {
	case githubToken != "":
	case token.value != "":
		_, _ = fmt.Fprintf(out, "token:    GitHub token of type %s, from %s\n", tokenreview.TokenType(token.value), token.source)
	default:
		_, _ = fmt.Fprintf(out, "credential: %s\n", credential)
	}
	_, _ = fmt.Fprintf(out, "checked:  SelfSubjectReview at %s (context %s): the cluster's answer; the server's orgs are not known here\n", rc.Host, u.context)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return &exitError{code: doctorUsage, err: oneLine(err)}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	switch {
	case err == nil:
		ui := review.Status.UserInfo
		_, _ = fmt.Fprintf(out, "result:   accepted\nusername: %s\nuid:      %s\ngroups:   %s\n", ui.Username, ui.UID, strings.Join(ui.Groups, ", "))
		keys := make([]string, 0, len(ui.Extra))
		for k := range ui.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_, _ = fmt.Fprintf(out, "extra:    %s=%s\n", k, strings.Join(ui.Extra[k], ","))
		}
		return nil
	case apierrors.IsForbidden(err):
		// Authenticated: only the review itself is not allowed.
		_, _ = fmt.Fprintf(out, "result:   accepted (the cluster forbids this user a SelfSubjectReview)\nerror:    %s\n", oneLine(err))
		return nil
	case apierrors.IsUnauthorized(err):
		_, _ = fmt.Fprintf(out, "result:   refused (HTTP 401)\nerror:    %s\n", oneLine(err))
		_, _ = fmt.Fprintf(out, "means:    the cluster did not accept %s; kube-apiserver does not say why\n", credential)
		_, _ = fmt.Fprintf(out, "fix:      run \"octogate doctor --context %s --github-orgs ORGS --github-url URL\" with the server's OCTOGATE_GITHUB_ORGS (and GitHub) for the reason code and its fix\n", u.context)
		return &exitError{code: doctorRefused, err: errors.New("the cluster refused the credential")}
	default:
		_, _ = fmt.Fprintf(out, "result:   unavailable\nerror:    %s\nmeans:    the cluster could not be reached or did not answer\nfix:      check the context's server and CA, and the network\n", oneLine(err))
		return &exitError{code: doctorUnavailable, err: errors.New("the cluster did not answer")}
	}
}

// describeCredential says what kubectl sends for u, never its value.
func describeCredential(u *kubeconfigUser) string {
	a := u.auth
	switch {
	case u.token != "":
		return "the token of kubeconfig user " + u.name
	case isCredentialPlugin(a.Exec):
		return "the GitHub token of kubeconfig user " + u.name + "'s octogate credential"
	case a.Exec != nil && len(a.Exec.Args) > 0 && a.Exec.Args[0] == "credential":
		return fmt.Sprintf("the GitHub Actions token of kubeconfig user %s's %s credential %s", u.name, a.Exec.Command, strings.Join(a.Exec.Args[1:], " "))
	case a.Exec != nil:
		return fmt.Sprintf("the credential of kubeconfig user %s's exec plugin %s (not octogate's)", u.name, a.Exec.Command)
	case len(a.ClientCertificateData) > 0 || a.ClientCertificate != "":
		return "the client certificate of kubeconfig user " + u.name + " (kube-apiserver verifies it itself; octogate is not asked)"
	case a.AuthProvider != nil:
		return fmt.Sprintf("the credential of kubeconfig user %s's auth provider %s", u.name, a.AuthProvider.Name)
	case a.Username != "":
		return "the basic auth of kubeconfig user " + u.name
	}
	return "no credential (kubeconfig user " + u.name + " has none): an anonymous request"
}
