package elevation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestCRDHasNoSubresources: the AccessRequest webhooks' rules name the resource
// accessrequests alone, and isAccessRequest admits nothing else. A status (or scale)
// subresource would be a write path no octogate webhook sees, where anyone allowed to update
// it would write an approval: adding one needs the webhooks' rules and checks first.
func TestCRDHasNoSubresources(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "charts", "octogate", "crds", "accessrequests.octogate.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Group    string                  `json:"group"`
			Names    struct{ Plural string } `json:"names"`
			Versions []struct {
				Name         string         `json:"name"`
				Subresources map[string]any `json:"subresources"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != Group || crd.Spec.Names.Plural != Resource || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != Version {
		t.Fatalf("CRD %+v is not %s/%s %s", crd.Spec, Group, Version, Resource)
	}
	if s := crd.Spec.Versions[0].Subresources; len(s) != 0 {
		t.Fatalf("the CRD declares subresources %v, which the AccessRequest webhooks do not see", s)
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "charts", "octogate", "templates", "webhooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(tmpl), "resources: [accessrequests]"); n != 2 {
		t.Fatalf("webhooks.yaml names resources [accessrequests] %d times, want 2 (mutating and validating)", n)
	}
}

// TestCRDPrintsFutureTimesAsTimes: kubectl prints a printer column of type date as an age
// (now minus the time), which is "<invalid>" for a time in the future such as an active
// request's endTime. Only times in the past may be date columns.
// https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#additional-printer-columns
func TestCRDPrintsFutureTimesAsTimes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "charts", "octogate", "crds", "accessrequests.octogate.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Columns []struct {
					Name     string `json:"name"`
					Type     string `json:"type"`
					JSONPath string `json:"jsonPath"`
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	past := map[string]bool{".metadata.creationTimestamp": true, ".status.requestedAt": true, ".status.startTime": true}
	var ends, age bool
	for _, c := range crd.Spec.Versions[0].Columns {
		if c.Type == "date" && !past[c.JSONPath] {
			t.Errorf("column %s (%s) is a date, printed as an age: <invalid> while it is in the future", c.Name, c.JSONPath)
		}
		ends = ends || (c.JSONPath == ".status.endTime" && c.Type == "string")
		age = age || (c.Name == "Age" && c.Type == "date" && c.JSONPath == ".metadata.creationTimestamp")
	}
	if !ends || !age {
		t.Errorf("want the end time as a string column (%v) and Age as a date (%v)", ends, age)
	}
}
