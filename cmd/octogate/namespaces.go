package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/namespacetemplate"
)

func newNamespacesCmd() *cobra.Command {
	var kubeconfig, kubeContext string
	cmd := &cobra.Command{
		Use:   "namespaces",
		Short: "List the namespaces you created",
		Long: `Ask the cluster who you are (SelfSubjectReview) and list the namespaces whose label
octogate.dev/creator-uid is your uid: the same as
  kubectl get namespaces -l octogate.dev/creator-uid=<your uid>
which octogate's authorizer allows for your own uid only. Columns: NAME, STATUS, TEMPLATE
(the octogate.dev/template annotation) and AGE; with none, a line on standard error says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			if kubeconfig != "" {
				rules.ExplicitPath = kubeconfig
			}
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			self, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("SelfSubjectReview: %w", err)
			}
			uid := self.Status.UserInfo.UID
			if uid == "" {
				return fmt.Errorf("the cluster knows %s without a uid: no namespaces are recorded by uid", self.Status.UserInfo.Username)
			}
			list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: namespacetemplate.LabelCreatorUID + "=" + uid})
			if err != nil {
				return err
			}
			if len(list.Items) == 0 {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "No namespaces created by %s (label %s=%s).\n",
					self.Status.UserInfo.Username, namespacetemplate.LabelCreatorUID, uid)
				return nil
			}
			// kubectl's table layout (its printers' tabwriter settings).
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 6, 4, 3, ' ', 0)
			_, _ = fmt.Fprintln(tw, "NAME\tSTATUS\tTEMPLATE\tAGE")
			for _, ns := range list.Items {
				template := ns.Annotations[namespacetemplate.AnnotationTemplate]
				if template == "" {
					template = "<none>"
				}
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ns.Name, ns.Status.Phase, template,
					duration.HumanDuration(time.Since(ns.CreationTimestamp.Time)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	return cmd
}
