package fleet

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/internal/fielderr"
)

// The clusters document's type, as written in its apiVersion and kind fields.
const (
	APIVersion = "octogate.dev/v1alpha1"
	Kind       = "SessionClusters"
)

// Accepts says how a cluster accepts the issuer's sessions (docs/sessions.md).
type Accepts string

// The three ways a cluster accepts sessions.
const (
	// AcceptsWebhook: the cluster's own octogate verifies sessions at /authenticate (mode (a)).
	AcceptsWebhook Accepts = "webhook"
	// AcceptsAPIServer: kube-apiserver's JWT authenticator verifies them (mode (b)).
	AcceptsAPIServer Accepts = "apiserver"
	// AcceptsProxy: octogate's impersonating proxy in front of a managed cluster verifies them.
	AcceptsProxy Accepts = "proxy"
)

// SessionClusters is the clusters file as written.
type SessionClusters struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Clusters   []Cluster `json:"clusters"`
}

// Cluster is one cluster sessions are minted for.
type Cluster struct {
	// Name is the cluster's name and the audience (aud) of its sessions: lowercase letters,
	// digits, '-' and '.', at most 253 characters (a DNS subdomain, so that it is also a
	// valid kubeconfig context name everywhere).
	Name string `json:"name"`
	// Server is the https URL kubectl reaches the cluster at: kube-apiserver, or the proxy.
	Server string `json:"server"`
	// CertificateAuthorityData is the base64 of the PEM CA bundle of Server's certificate
	// (kubeconfig's certificate-authority-data); empty: the system roots.
	CertificateAuthorityData string `json:"certificateAuthorityData,omitempty"`
	// Accepts is webhook, apiserver or proxy.
	Accepts Accepts `json:"accepts"`
	// Labels are Kubernetes labels (env: prod), for people and tools choosing clusters.
	Labels map[string]string `json:"labels,omitempty"`
	// Subjects are who may have sessions for this cluster: rbac/v1 Subjects of kind User or
	// Group, matched like the policy's (exact, or a prefix when the name ends in "*").
	// Absent (nil): every person the issuer accepts (every allowed org member). An explicitly
	// empty list is a configuration error: a cluster nobody may use.
	Subjects []rbacv1.Subject `json:"subjects,omitempty"`
}

// FieldError is one problem at a field path such as "clusters[1].subjects[0].kind".
type FieldError = fielderr.FieldError

// InvalidError is a clusters document that parses but is wrong (or has unknown fields), with
// every problem at its field path.
type InvalidError struct {
	Problems []FieldError
}

func (e *InvalidError) Error() string { return fielderr.Join("invalid session clusters", e.Problems) }

// Parse decodes a YAML (or JSON) SessionClusters document strictly and validates it. Unknown
// fields and wrong types are *InvalidError naming their paths; a document that is not YAML,
// or sets a key twice, is an error saying so.
func Parse(data []byte) (*SessionClusters, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &InvalidError{Problems: []FieldError{{Detail: "empty document: expected a " + Kind}}}
	}
	// sigs.k8s.io/yaml reads the first YAML document only: clusters after a "---" would be
	// dropped without a word.
	if documents(data) > 1 {
		return nil, &InvalidError{Problems: []FieldError{{Detail: "the file holds more than one YAML document: a clusters file is one " + Kind + "; put every cluster in its clusters list"}}}
	}
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("not valid YAML: %s", oneLine(err))
	}
	if problems := fielderr.CheckShape("", generic, reflect.TypeFor[SessionClusters]()); len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	doc := &SessionClusters{}
	if err := yaml.UnmarshalStrict(data, doc); err != nil {
		// What CheckShape lets through: a key set twice.
		return nil, &InvalidError{Problems: []FieldError{{Detail: oneLine(err)}}}
	}
	if problems := validate(doc); len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return doc, nil
}

// documents counts the non-empty YAML documents of data, up to 2 and up to the first syntax
// error (which the decoder that follows reports).
func documents(data []byte) int {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	n := 0
	for n < 2 {
		var node yamlv3.Node
		if err := dec.Decode(&node); err != nil {
			return n
		}
		if node.Kind == yamlv3.DocumentNode && len(node.Content) == 1 && node.Content[0].Tag == "!!null" {
			continue // "---" with nothing after it
		}
		n++
	}
	return n
}

func oneLine(err error) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	return strings.Join(strings.Fields(msg), " ")
}

var (
	nameRE         = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	subjectNameRE  = regexp.MustCompile(`^[^*\s]*\*?$`)
	rbacGroup      = rbacv1.GroupName
	errRequired    = "required"
	maxClusterName = 253
)

// ValidName says what is wrong with a cluster name, or nil.
func ValidName(name string) error {
	if name == "" || len(name) > maxClusterName || !nameRE.MatchString(name) {
		return fmt.Errorf("%q must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most %d characters", name, maxClusterName)
	}
	return nil
}

func validate(doc *SessionClusters) []FieldError {
	var problems []FieldError
	add := func(field, detail string) { problems = append(problems, FieldError{Field: field, Detail: detail}) }
	switch doc.APIVersion {
	case APIVersion:
	case "":
		add("apiVersion", errRequired)
	default:
		add("apiVersion", fmt.Sprintf("%q is not supported: expected %s", doc.APIVersion, APIVersion))
	}
	switch doc.Kind {
	case Kind:
	case "":
		add("kind", errRequired)
	default:
		add("kind", fmt.Sprintf("%q is not supported: expected %s", doc.Kind, Kind))
	}
	if len(doc.Clusters) == 0 {
		add("clusters", "required: name at least one cluster")
	}
	seen := map[string]int{}
	for i, c := range doc.Clusters {
		p := fmt.Sprintf("clusters[%d]", i)
		switch {
		case c.Name == "":
			add(p+".name", errRequired)
		case ValidName(c.Name) != nil:
			add(p+".name", ValidName(c.Name).Error())
		default:
			if j, dup := seen[c.Name]; dup {
				add(p+".name", fmt.Sprintf("%q duplicates clusters[%d].name", c.Name, j))
			} else {
				seen[c.Name] = i
			}
		}
		if c.Server == "" {
			add(p+".server", errRequired)
		} else if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			add(p+".server", fmt.Sprintf("%q must be an https URL without user info, query or fragment, such as https://kube.example.com:6443", c.Server))
		}
		if c.CertificateAuthorityData != "" {
			if err := checkCA(c.CertificateAuthorityData); err != nil {
				add(p+".certificateAuthorityData", err.Error())
			}
		}
		switch c.Accepts {
		case AcceptsWebhook, AcceptsAPIServer, AcceptsProxy:
		case "":
			add(p+".accepts", errRequired+": webhook, apiserver or proxy")
		default:
			add(p+".accepts", fmt.Sprintf("%q must be webhook, apiserver or proxy", c.Accepts))
		}
		for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
			lp := fielderr.Path(p+".labels", k)
			for _, msg := range validation.IsQualifiedName(k) {
				add(lp, fmt.Sprintf("key %q: %s", k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(c.Labels[k]) {
				add(lp, fmt.Sprintf("value %q: %s", c.Labels[k], msg))
			}
		}
		if c.Subjects != nil && len(c.Subjects) == 0 {
			add(p+".subjects", "empty: nobody could use this cluster; omit subjects to let every allowed org member use it, or remove the cluster")
		}
		for j, s := range c.Subjects {
			sp := fmt.Sprintf("%s.subjects[%d]", p, j)
			switch s.Kind {
			case rbacv1.UserKind, rbacv1.GroupKind:
			case "":
				add(sp+".kind", errRequired)
			case rbacv1.ServiceAccountKind:
				add(sp+".kind", "ServiceAccount: a session is never a service account; want User or Group")
			default:
				add(sp+".kind", fmt.Sprintf("%q must be User or Group", s.Kind))
			}
			switch {
			case s.Name == "":
				add(sp+".name", errRequired)
			case !subjectNameRE.MatchString(s.Name):
				add(sp+".name", fmt.Sprintf("%q: no spaces, and '*' only as the last character (prefix match)", s.Name))
			}
			if s.APIGroup != "" && s.APIGroup != rbacGroup {
				add(sp+".apiGroup", fmt.Sprintf("%q must be empty or %s", s.APIGroup, rbacGroup))
			}
			if s.Namespace != "" {
				add(sp+".namespace", "must be empty for kind User or Group")
			}
		}
	}
	return problems
}

// checkCA says what is wrong with base64 PEM CA data, or nil.
func checkCA(data string) error {
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return fmt.Errorf("not base64 (standard encoding, as in kubeconfig's certificate-authority-data)")
	}
	n := 0
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("holds no PEM certificate: want base64 of a PEM CA bundle")
	}
	return nil
}
