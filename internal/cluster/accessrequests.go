package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/elevation"
)

// AccessRequestCRD is the chart's AccessRequest CRD, relative to the repository root.
const AccessRequestCRD = "charts/octogate/crds/accessrequests.octogate.dev.yaml"

// InstallAccessRequestCRD creates the AccessRequest CRD from file (the chart's
// AccessRequestCRD) and returns once it is Established (within 30 s).
func InstallAccessRequestCRD(ctx context.Context, cfg *rest.Config, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := dc.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the AccessRequest CRD: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil && established(got) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("the AccessRequest CRD is not Established (last error %w): %w", err, ctx.Err())
			}
			return fmt.Errorf("the AccessRequest CRD is not Established: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RegisterAccessRequestWebhooks registers, as the chart does, the webhooks that send every
// AccessRequest CREATE and UPDATE to baseURL's /mutate/accessrequests and
// /validate/accessrequests (failurePolicy Fail, no exception for system:masters).
func RegisterAccessRequestWebhooks(ctx context.Context, cfg *rest.Config, baseURL string, caBundle []byte) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(5)
	never := admissionregistrationv1.NeverReinvocationPolicy
	base := strings.TrimSuffix(baseURL, "/")
	mutate, validate := base+"/mutate/accessrequests", base+"/validate/accessrequests"
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{elevation.Group}, APIVersions: []string{elevation.Version}, Resources: []string{elevation.Resource}},
	}}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "octogate-accessrequests"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "accessrequests.mutate.octogate.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &mutate, CABundle: caBundle},
			Rules: rules, FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &never,
		}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the AccessRequest MutatingWebhookConfiguration: %w", err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "octogate-accessrequests"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "accessrequests.validate.octogate.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &validate, CABundle: caBundle},
			Rules: rules, FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the AccessRequest ValidatingWebhookConfiguration: %w", err)
	}
	return nil
}

// established reports whether a CRD's status has condition Established True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
