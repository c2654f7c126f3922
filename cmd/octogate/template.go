package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/namespacetemplate"
)

func newTemplateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Work with namespace templates files (OCTOGATE_NAMESPACE_TEMPLATES_FILE)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTemplateCheckCmd())
	return cmd
}

type templateCheckOptions struct {
	file, user, login, namespace string
	groups                       []string
}

func newTemplateCheckCmd() *cobra.Command {
	var o templateCheckOptions
	cmd := &cobra.Command{
		Use:   "check --file FILE [--user U [--login L] [--group G]... [--namespace NAME]]",
		Short: "Validate a namespace templates file, or show which template a creator gets",
		Long: `Validate a NamespaceTemplates file and list its templates.

With --user, print the template the creator would get, its limits, the names allowed for them
(--login fills {{login}}, --group fills {{team}} and the match), the label and annotation keys
owners may set, and the objects it renders, as YAML. With --namespace also say whether that
name is allowed.

Exit codes: 0 valid (and the name allowed), 1 the name is not allowed or no template fits,
3 invalid file or usage.`,
		Example: `  octogate template check --file examples/namespace-templates.yaml
  octogate template check --file examples/namespace-templates.yaml --user github:bob:1002 --login bob --group github:acme --namespace bob-dev`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected arguments %q: use --file and creator flags", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTemplateCheck(cmd, &o)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitInvalid, err: err}
	})
	f := cmd.Flags()
	f.StringVar(&o.file, "file", "", "templates file to check (required)")
	f.StringVar(&o.user, "user", "", "username of the creator, e.g. github:bob:1002")
	f.StringVar(&o.login, "login", "", "GitHub login of the creator ({{login}}); default: the login in a github:LOGIN:ID username")
	f.StringArrayVar(&o.groups, "group", nil, "a group of the creator (repeatable), e.g. github:acme/sre")
	f.StringVar(&o.namespace, "namespace", "", "a namespace name to check against the template's names")
	return cmd
}

func runTemplateCheck(cmd *cobra.Command, o *templateCheckOptions) error {
	if o.file == "" {
		return usageError("--file is required")
	}
	tp, err := namespacetemplate.LoadFile(o.file)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	out := cmd.OutOrStdout()
	if o.user == "" {
		_, _ = fmt.Fprintf(out, "%s: %d templates\n", o.file, len(tp.List()))
		for _, t := range tp.List() {
			_, _ = fmt.Fprintf(out, "  %s: %s, %d objects\n", t.Name, limits(t), len(t.Render("x")))
		}
		return nil
	}
	login := o.login
	if login == "" {
		if parts := strings.Split(o.user, ":"); len(parts) == 3 {
			login = parts[1]
		}
	}
	c := namespacetemplate.Creator{Username: o.user, Login: login, Groups: o.groups}
	t := tp.Select(c)
	if t == nil {
		return &exitError{code: 1, err: fmt.Errorf("no template fits %s: its namespaces get no objects, names or limits", o.user)}
	}
	_, _ = fmt.Fprintf(out, "template: %s\nlimits: %s\n", t.Name, limits(t))
	if len(t.Names) > 0 {
		_, _ = fmt.Fprintf(out, "allowed names: %s\n", strings.Join(t.AllowedNames(c), ", "))
	}
	if len(t.AllowedLabels) > 0 {
		_, _ = fmt.Fprintf(out, "owners may set labels: %s\n", strings.Join(t.AllowedLabels, ", "))
	}
	if len(t.AllowedAnnotations) > 0 {
		_, _ = fmt.Fprintf(out, "owners may set annotations: %s\n", strings.Join(t.AllowedAnnotations, ", "))
	}
	ns := o.namespace
	if ns == "" {
		ns = "NAMESPACE"
	}
	for _, obj := range t.Render(ns) {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(out, "---\n%s", b)
	}
	if o.namespace != "" {
		if p := namespacetemplate.Reserved(o.namespace); p != "" {
			return &exitError{code: 1, err: fmt.Errorf("namespace %q is reserved (%s): only admins may create it", o.namespace, p)}
		}
		if !t.NameAllowed(o.namespace, c) {
			return &exitError{code: 1, err: fmt.Errorf("namespace %q is not allowed by template %q; allowed names for you: %s", o.namespace, t.Name, strings.Join(t.AllowedNames(c), ", "))}
		}
		_, _ = fmt.Fprintf(out, "# namespace %q is allowed\n", o.namespace)
	}
	return nil
}

func limits(t *namespacetemplate.Template) string {
	per, all := "unlimited", "unlimited"
	if t.MaxNamespacesPerUser != nil {
		per = fmt.Sprint(*t.MaxNamespacesPerUser)
	}
	if t.MaxNamespaces != nil {
		all = fmt.Sprint(*t.MaxNamespaces)
	}
	return fmt.Sprintf("%s per user, %s in all", per, all)
}
