package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/elevation"
)

// kubeFlags are kubectl's --kubeconfig and --context.
type kubeFlags struct{ kubeconfig, context string }

func (f *kubeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use")
}

// accessRequests is the AccessRequest client of the kubeconfig's context, and a discovery
// client of the same cluster for crdMissing.
func (f *kubeFlags) accessRequests() (dynamic.ResourceInterface, discovery.DiscoveryInterface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return dc.Resource(elevation.GVR), disc, nil
}

// errCRDMissing: the cluster serves no AccessRequest resource.
var errCRDMissing = errors.New("the AccessRequest CRD (accessrequests.octogate.dev) is not installed on this cluster: " +
	"install the chart's CRDs (kubectl apply -f charts/octogate/crds/, docs/elevation.md)")

// crdMissing is errCRDMissing when err is an answer of kube-apiserver (a Status: for a
// resource it does not serve, 404 "the server could not find the requested resource", or
// an authorizer's 403, which comes first) and the cluster's discovery lists no
// octogate.dev/v1alpha1 accessrequests; else err. A discovery that fails keeps err.
func crdMissing(disc discovery.DiscoveryInterface, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	list, derr := disc.ServerResourcesForGroupVersion(elevation.GVR.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(derr):
		return errCRDMissing
	case derr != nil:
		return err
	}
	for _, r := range list.APIResources {
		if r.Name == elevation.Resource {
			return err
		}
	}
	return errCRDMissing
}

func newRequestCmd() *cobra.Command {
	var kf kubeFlags
	var reason, namespace string
	var forDuration time.Duration
	cmd := &cobra.Command{
		Use:   "request ELEVATION --reason R --for D [--namespace N]",
		Short: "Ask for one of the policy's elevations (creates an AccessRequest)",
		Long: `Create an AccessRequest (octogate.dev/v1alpha1) for ELEVATION, one of the policy's
elevations, and print its name. octogate's admission webhooks record you, as the cluster
authenticated you, as its requester, and refuse the request when you may not ask for
ELEVATION, --for is longer than its maxDuration, --reason is missing where it is required, or
you already have too many open requests. An approver then runs "octogate approve NAME";
a break-glass elevation is active at once. See docs/elevation.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, disc, err := kf.accessRequests()
			if err != nil {
				return err
			}
			name, err := createRequest(cmd.Context(), client, args[0], reason, forDuration, namespace)
			if err != nil {
				return crdMissing(disc, err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), name)
			return err
		},
	}
	kf.add(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why you need it (an incident, a ticket)")
	cmd.Flags().DurationVar(&forDuration, "for", time.Hour, "how long, from approval (a Go duration: 30m, 1h)")
	cmd.Flags().StringVar(&namespace, "namespace", "", "narrow the grant to this namespace")
	return cmd
}

// createRequest creates an AccessRequest named ELEVATION-xxxxx and returns its name.
func createRequest(ctx context.Context, client dynamic.ResourceInterface, elevationName, reason string, d time.Duration, namespace string) (string, error) {
	spec := map[string]any{"elevation": elevationName, "duration": d.String()}
	if reason != "" {
		spec["reason"] = reason
	}
	if namespace != "" {
		spec["namespace"] = namespace
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetGroupVersionKind(elevation.GVK)
	obj.SetGenerateName(elevationName + "-")
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return created.GetName(), nil
}

func newStepCmd(action elevation.Action, short string) *cobra.Command {
	var kf kubeFlags
	var reason string
	cmd := &cobra.Command{
		Use:   string(action) + " NAME [--reason R]",
		Short: short,
		Long: short + `. The step is recorded in the AccessRequest's status with you, as the cluster
authenticated you, and the time; octogate's admission webhooks refuse it when you may not
take it (the requester never approves or denies their own request; only the elevation's
approvers approve or deny; the requester or an approver revokes). See docs/elevation.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, disc, err := kf.accessRequests()
			if err != nil {
				return err
			}
			phase, err := takeStep(cmd.Context(), client, args[0], action, reason)
			if err != nil {
				return crdMissing(disc, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "accessrequest %s %s: %s\n", args[0], pastTense(action), phase)
			return err
		},
	}
	kf.add(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the step)")
	return cmd
}

func pastTense(a elevation.Action) string {
	if a == elevation.ActionDeny {
		return "denied"
	}
	return string(a) + "d"
}

// takeStep asks for action on request name through its annotations (a JSON merge patch) and
// returns the request's phase afterwards.
func takeStep(ctx context.Context, client dynamic.ResourceInterface, name string, action elevation.Action, reason string) (elevation.Phase, error) {
	annotations := map[string]any{elevation.AnnotationAction: string(action)}
	if reason != "" {
		annotations[elevation.AnnotationActionReason] = reason
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return "", err
	}
	u, err := client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return "", err
	}
	ar, err := toAccessRequest(u)
	if err != nil {
		return "", err
	}
	return ar.EffectivePhase(time.Now()), nil
}

func toAccessRequest(u *unstructured.Unstructured) (*elevation.AccessRequest, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	return elevation.Decode(b)
}

func newRequestsCmd() *cobra.Command {
	var kf kubeFlags
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "List AccessRequests",
		Long: `List the cluster's AccessRequests, oldest first, with kubectl's columns: NAME, ELEVATION,
REQUESTER, NAMESPACE (the grant's, <all> when not narrowed), PHASE (Pending, Active, Denied,
Revoked, Expired: never approved in time, Ended: past its end time), APPROVED-BY, ENDS (time
left) and AGE. What you may list is what the cluster's authorization allows.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, disc, err := kf.accessRequests()
			if err != nil {
				return err
			}
			list, err := client.List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return crdMissing(disc, err)
			}
			var items []*elevation.AccessRequest
			for i := range list.Items {
				ar, err := toAccessRequest(&list.Items[i])
				if err != nil {
					return err
				}
				items = append(items, ar)
			}
			if len(items) == 0 {
				_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "No AccessRequests.")
				return nil
			}
			return printRequests(cmd.OutOrStdout(), items, time.Now())
		},
	}
	kf.add(cmd)
	return cmd
}

// printRequests writes items as kubectl's table printer would, oldest first.
func printRequests(w io.Writer, items []*elevation.AccessRequest, now time.Time) error {
	slices.SortStableFunc(items, func(a, b *elevation.AccessRequest) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tELEVATION\tREQUESTER\tNAMESPACE\tPHASE\tAPPROVED-BY\tENDS\tAGE")
	for _, ar := range items {
		ns := ar.Spec.Namespace
		if ns == "" {
			ns = "<all>"
		}
		phase := ar.EffectivePhase(now)
		var by []string
		for _, a := range ar.Status.Approvals {
			by = append(by, a.By)
		}
		approvedBy := strings.Join(by, ",")
		if ar.Status.BreakGlass {
			approvedBy = "<break-glass>"
		} else if approvedBy == "" {
			approvedBy = "<none>"
		}
		ends := "<none>"
		if phase == elevation.PhaseActive && ar.Status.EndTime != nil {
			ends = "in " + duration.HumanDuration(ar.Status.EndTime.Sub(now))
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ar.Name, ar.Spec.Elevation, ar.Status.Requester.Username,
			ns, phase, approvedBy, ends, duration.HumanDuration(now.Sub(ar.CreationTimestamp.Time)))
	}
	return tw.Flush()
}
