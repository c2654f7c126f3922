package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
)

// The ExecCredential API versions this plugin answers. v1 is what `octogate kubeconfig user`
// writes; v1beta1 has the same status fields and is still accepted by kubectl.
const (
	ExecAPIVersionV1      = "client.authentication.k8s.io/v1"
	ExecAPIVersionV1beta1 = "client.authentication.k8s.io/v1beta1"
)

// ErrExecInfo is wrapped by every error about KUBERNETES_EXEC_INFO (undecodable, wrong kind,
// unsupported apiVersion).
var ErrExecInfo = errors.New("KUBERNETES_EXEC_INFO")

// ExecInfo is what kubectl tells the plugin in KUBERNETES_EXEC_INFO.
type ExecInfo struct {
	// APIVersion is the ExecCredential apiVersion kubectl expects back.
	APIVersion string
	// Interactive is true when kubectl passed its standard input through.
	Interactive bool
}

// ParseExecInfo decodes the KUBERNETES_EXEC_INFO value (a JSON ExecCredential without status).
// An empty value, as when the plugin is run by hand, means client.authentication.k8s.io/v1.
// Errors wrap ErrExecInfo; an apiVersion other than v1 or v1beta1 is refused because its
// wire format is unknown to this plugin.
// Source: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#input-and-output-formats
func ParseExecInfo(value string) (ExecInfo, error) {
	if strings.TrimSpace(value) == "" {
		return ExecInfo{APIVersion: ExecAPIVersionV1}, nil
	}
	var in struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Interactive bool `json:"interactive"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(value), &in); err != nil {
		return ExecInfo{}, fmt.Errorf("%w is not a JSON ExecCredential: %w", ErrExecInfo, err)
	}
	if in.Kind != "" && in.Kind != "ExecCredential" {
		return ExecInfo{}, fmt.Errorf("%w has kind %q, want ExecCredential", ErrExecInfo, in.Kind)
	}
	switch in.APIVersion {
	case ExecAPIVersionV1, ExecAPIVersionV1beta1:
	default:
		return ExecInfo{}, fmt.Errorf("%w asks for apiVersion %q; octogate credential speaks %s and %s (set exec.apiVersion in the kubeconfig)",
			ErrExecInfo, in.APIVersion, ExecAPIVersionV1, ExecAPIVersionV1beta1)
	}
	return ExecInfo{APIVersion: in.APIVersion, Interactive: in.Spec.Interactive}, nil
}

// WriteExecCredential writes the ExecCredential answer for info with tok's value and expiry
// (status.expirationTimestamp, RFC 3339 in UTC, so kubectl runs the plugin again after it) to
// w as one JSON document. v1 and v1beta1 share the status fields, so one shape serves both.
func WriteExecCredential(w io.Writer, info ExecInfo, tok Token) error {
	if tok.Value == "" {
		return errors.New("no token to write")
	}
	out := clientauthv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: info.APIVersion, Kind: "ExecCredential"},
		Spec:     clientauthv1.ExecCredentialSpec{Interactive: info.Interactive},
		Status:   &clientauthv1.ExecCredentialStatus{Token: tok.Value},
	}
	if !tok.Expiry.IsZero() {
		exp := metav1.NewTime(tok.Expiry.UTC().Truncate(time.Second))
		out.Status.ExpirationTimestamp = &exp
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
