package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/subjectaccessreview"
)

// Exit codes of `policy check`, for scripts.
const (
	exitAllow     = 0
	exitDeny      = 1
	exitNoOpinion = 2
	exitInvalid   = 3
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with AuthorizationPolicy files (OCTOGATE_POLICY_FILE)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPolicyCheckCmd())
	return cmd
}

type policyCheckOptions struct {
	file        string
	user        string
	groups      []string
	verb        string
	resource    string
	subresource string
	apiGroup    string
	namespace   string
	name        string
	path        string
}

func usageError(format string, args ...any) error {
	return &exitError{code: exitInvalid, err: fmt.Errorf(format, args...)}
}

func newPolicyCheckCmd() *cobra.Command {
	var o policyCheckOptions
	cmd := &cobra.Command{
		Use:   "check --file FILE [--user U [--group G]... --verb V (--resource R [--subresource S] [--api-group A] [--namespace N] [--name X] | --path P)]",
		Short: "Validate a policy file, or show how it decides one request",
		Long: `Validate an AuthorizationPolicy file and print a summary of its rules.

With a request (--user and --verb, plus --resource for a resource request or --path for a
non-resource one) print the decision and the rule that made it, as "VERDICT<TAB>REASON".

Exit codes: 0 Allow, 1 Deny, 2 NoOpinion (the next authorizer, normally RBAC, decides),
3 invalid file or usage.`,
		Example: `  octogate policy check --file policy.yaml
  octogate policy check --file policy.yaml --user github:octocat --group github:acme --verb create --resource namespaces
  octogate policy check --file policy.yaml --user github:octocat --verb get --path /healthz`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected arguments %q: use --file and request flags", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPolicyCheck(cmd, &o)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitInvalid, err: err}
	})
	f := cmd.Flags()
	f.StringVar(&o.file, "file", "", "policy file to check (required)")
	f.StringVar(&o.user, "user", "", "username of the request, e.g. github:octocat:583231")
	f.StringArrayVar(&o.groups, "group", nil, "a group of the user (repeatable)")
	f.StringVar(&o.verb, "verb", "", "verb: get, list, watch, create, update, patch, delete, ... (lowercase)")
	f.StringVar(&o.resource, "resource", "", "resource, e.g. pods, or resource/subresource, e.g. pods/log (makes a resource request)")
	f.StringVar(&o.subresource, "subresource", "", "subresource, e.g. log")
	f.StringVar(&o.apiGroup, "api-group", "", `API group; empty is the core group ""`)
	f.StringVar(&o.namespace, "namespace", "", "namespace; empty is cluster scope (for --resource namespaces with --name X, kube-apiserver's namespace is X and is set for you)")
	f.StringVar(&o.name, "name", "", "object name; empty for list, watch, create (kube-apiserver sends none for them)")
	f.StringVar(&o.path, "path", "", "non-resource URL path, e.g. /healthz (makes a non-resource request)")
	return cmd
}

func runPolicyCheck(cmd *cobra.Command, o *policyCheckOptions) error {
	if o.file == "" {
		return usageError("--file is required")
	}
	attrs, isRequest, err := o.attributes(cmd)
	if err != nil {
		return err
	}
	p, err := subjectaccessreview.LoadFile(o.file)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	out := cmd.OutOrStdout()
	if !isRequest {
		if err := p.WriteSummary(out); err != nil {
			return &exitError{code: exitInvalid, err: err}
		}
		return nil
	}
	d := p.Authorize(attrs)
	if _, err := fmt.Fprintf(out, "%s\t%s\n", d.Verdict, strings.TrimPrefix(d.Reason, "octogate: ")); err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	switch d.Verdict {
	case subjectaccessreview.Allow:
		return nil
	case subjectaccessreview.Deny:
		cmd.SilenceErrors = true
		return &exitError{code: exitDeny, err: errors.New("denied")}
	default:
		cmd.SilenceErrors = true
		return &exitError{code: exitNoOpinion, err: errors.New("no opinion")}
	}
}

// attributes builds the request from the flags; isRequest is false when no request flag is set.
func (o *policyCheckOptions) attributes(cmd *cobra.Command) (*subjectaccessreview.Attributes, bool, error) {
	f := cmd.Flags()
	requestFlags := []string{"user", "group", "verb", "resource", "subresource", "api-group", "namespace", "name", "path"}
	isRequest := false
	for _, name := range requestFlags {
		if f.Changed(name) {
			isRequest = true
			break
		}
	}
	if !isRequest {
		return nil, false, nil
	}
	switch {
	case o.user == "":
		return nil, true, usageError("--user is required with a request")
	case o.verb == "":
		return nil, true, usageError("--verb is required with a request")
	case o.resource == "" && o.path == "":
		return nil, true, usageError("a request needs --resource (resource request) or --path (non-resource request)")
	case o.resource != "" && o.path != "":
		return nil, true, usageError("--resource and --path cannot be combined")
	}
	if err := lowercase("--verb", "verbs", o.verb); err != nil {
		return nil, true, err
	}
	a := &subjectaccessreview.Attributes{User: o.user, Groups: o.groups, Verb: o.verb}
	if o.path != "" {
		for _, name := range []string{"subresource", "api-group", "namespace", "name"} {
			if f.Changed(name) {
				return nil, true, usageError("--%s applies to resource requests; it cannot be combined with --path", name)
			}
		}
		if !strings.HasPrefix(o.path, "/") {
			return nil, true, usageError("--path %q must start with /", o.path)
		}
		a.Path = o.path
		return a, true, nil
	}
	resource, subresource := o.resource, o.subresource
	if r, sub, ok := strings.Cut(o.resource, "/"); ok {
		if f.Changed("subresource") {
			return nil, true, usageError("--resource %q already names the subresource %q; drop --subresource or write --resource %s", o.resource, sub, r)
		}
		if r == "" || sub == "" || strings.Contains(sub, "/") {
			return nil, true, usageError("--resource %q must be RESOURCE or RESOURCE/SUBRESOURCE, e.g. pods or pods/log", o.resource)
		}
		resource, subresource = r, sub
	}
	for _, c := range []struct{ flag, plural, value string }{
		{"--resource", "resources", resource},
		{"--subresource", "subresources", subresource},
		{"--api-group", "API groups", o.apiGroup},
	} {
		if err := lowercase(c.flag, c.plural, c.value); err != nil {
			return nil, true, err
		}
	}
	namespace, err := apiserverNamespace(resource, subresource, o.verb, o.namespace, o.name)
	if err != nil {
		return nil, true, err
	}
	a.ResourceRequest = true
	a.Resource = resource
	a.Subresource = subresource
	a.APIGroup = o.apiGroup
	a.Namespace = namespace
	a.Name = o.name
	return a, true, nil
}

// apiserverNamespace is the namespace kube-apiserver puts in the SubjectAccessReview of a
// request, refusing flag combinations no real request has. kube-apiserver takes the
// attributes from the URL (k8s.io/apiserver/pkg/endpoints/request RequestInfoFactory,
// https://kubernetes.io/docs/reference/access-authn-authz/authorization/#review-your-request-attributes):
//
//   - /api/v1/namespaces/X[/status|/finalize] names the Namespace object X, and its namespace
//     attribute is X too: a rule's `namespaces` globs match the Namespace object itself.
//   - A create (POST to the collection) has no name in the URL, so the review has none.
func apiserverNamespace(resource, subresource, verb, namespace, name string) (string, error) {
	if name != "" && subresource == "" && (verb == "create" || verb == "list" || verb == "watch" || verb == "deletecollection") {
		return "", usageError("--name %q with --verb %s: kube-apiserver sends no name for %s (it is not in the URL); drop --name", name, verb, verb)
	}
	if resource != "namespaces" {
		return namespace, nil
	}
	if name == "" {
		if namespace != "" {
			return "", usageError("--namespace %q with --resource namespaces and no --name: kube-apiserver sends no namespace for the namespaces collection; drop --namespace", namespace)
		}
		return "", nil
	}
	if namespace != "" && namespace != name {
		return "", usageError("--namespace %q with --resource namespaces --name %q: kube-apiserver sends the Namespace object's name as its namespace (%q); drop --namespace", namespace, name, name)
	}
	return name, nil
}

// lowercase refuses a flag value with upper-case letters: kube-apiserver sends verbs,
// resources, subresources and API groups in lower case, so such a request never happens and
// would only match "*" rules.
func lowercase(flag, plural, value string) error {
	if lower := strings.ToLower(value); lower != value {
		return usageError("%s %q: %s are lowercase, as kube-apiserver sends them: %s", flag, value, plural, lower)
	}
	return nil
}
