package subjectaccessreview

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/octogate/octogate/internal/jsonv1"
)

// FuzzDecodeSubjectAccessReview: any body either decodes to a review this webhook answers
// (a known apiVersion, exactly one kind of attributes) or fails as a bad review; it never
// panics, and a decoded review can be evaluated and encoded.
func FuzzDecodeSubjectAccessReview(f *testing.F) {
	p := mustLoad(f, "testdata/rbac-table-policy.yaml")
	f.Fuzz(func(t *testing.T, body []byte) {
		// The fast decoder leaves what encoding/json leaves, with the same error.
		var fast, std reviewRequest
		if errFast, errStd := jsonv1.Unmarshal(body, &fast), json.Unmarshal(body, &std); fmt.Sprint(errFast) != fmt.Sprint(errStd) || !reflect.DeepEqual(fast, std) {
			t.Fatalf("body %q: decoded %+v (%v), encoding/json %+v (%v)", body, fast, errFast, std, errStd)
		}
		version, attrs, err := decodeReview(body)
		if err != nil {
			if !errors.Is(err, errBadReview) {
				t.Fatalf("error %v does not wrap errBadReview", err)
			}
			return
		}
		if version != APIVersionV1 && version != APIVersionV1beta1 {
			t.Fatalf("decoded unknown apiVersion %q", version)
		}
		if !attrs.ResourceRequest && (attrs.Resource != "" || attrs.Namespace != "") {
			t.Fatalf("non-resource request with resource attributes: %+v", attrs)
		}
		d := p.Authorize(&attrs)
		if (d.Verdict == NoOpinion) != (d.Rule == "") {
			t.Fatalf("decision %+v: a rule decides exactly when the verdict is Allow or Deny", d)
		}
		if _, err := encodeReview(version, d); err != nil {
			t.Fatalf("encode: %v", err)
		}
	})
}

// FuzzLoadPolicy: any document is either refused with an error or compiles into a policy
// that evaluates without panicking; the loader never panics.
func FuzzLoadPolicy(f *testing.F) {
	probes := []Attributes{
		res("github:alice", []string{"github:acme", "github:acme/admins"}, "get", "", "pods", "log", "team-a-dev", "web"),
		res("system:serviceaccount:ci:deployer", nil, "create", "apps", "deployments", "", "", ""),
		nonRes("github:bob", []string{"github:acme"}, "get", "/apis/apps/v1"),
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			if p != nil {
				t.Fatal("Parse returned a policy with an error")
			}
			return
		}
		here := p.InCluster("prod-eu-1")
		for _, name := range p.ElevationNames() {
			if e, _ := p.Elevation(name); len(e.Clusters) == 0 && !here.ElevationHere(name) {
				t.Fatalf("elevation %q names no clusters but does not apply on prod-eu-1", name)
			}
		}
		for i := range probes {
			here.ElevationsAllowing(&probes[i])
			d := p.Authorize(&probes[i])
			if d.Verdict != NoOpinion && d.Rule == "" {
				t.Fatalf("decision without a rule: %+v", d)
			}
			for _, name := range p.ElevationNames() {
				if _, ok := p.Elevation(name); !ok {
					t.Fatalf("elevation %q listed but not found", name)
				}
				p.ElevationAllows(name, probes[i].Namespace, &probes[i])
				p.MayRequest(name, probes[i].User, probes[i].Groups)
				p.MayApprove(name, probes[i].User, probes[i].Groups)
			}
			p.ElevationsAllowing(&probes[i])
		}
	})
}
