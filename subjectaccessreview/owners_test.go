package subjectaccessreview

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/octogate/octogate/namespacetemplate"
)

type fakeOwners map[string][2]string // name -> creator uid, team

func (f fakeOwners) NamespaceOwners(name string) (string, []string, bool) {
	o, ok := f[name]
	if !ok {
		return "", nil, false
	}
	var teams []string
	if o[1] != "" {
		teams = []string{o[1]}
	}
	return o[0], teams, true
}

// fakeCreators lets a creator create namespaces named <login>-*.
type fakeCreators struct{}

func (fakeCreators) MayCreateNamespace(name string, c namespacetemplate.Creator) bool {
	return c.Login != "" && strings.HasPrefix(name, c.Login+"-")
}

func TestOwnersListGetAndDeleteTheirNamespaces(t *testing.T) {
	owners := fakeOwners{"bob-a": {"1002", ""}, "alice-a": {"1001", "acme/sre"}, "bob-taken": {"1001", ""}}
	bob := Attributes{User: "github:bob:1002", UID: "1002", Login: "bob", Groups: []string{"github:acme"}, ResourceRequest: true, Resource: "namespaces"}
	sre := Attributes{User: "github:erin:1005", UID: "1005", Groups: []string{"github:acme/sre"}, ResourceRequest: true, Resource: "namespaces"}
	pin := func(key, op string, values ...string) []LabelRequirement {
		return []LabelRequirement{{Key: "env", Operator: "Exists"}, {Key: key, Operator: op, Values: values}}
	}
	with := func(a Attributes, verb, name string, reqs []LabelRequirement) Attributes {
		a.Verb, a.Name, a.LabelRequirements = verb, name, reqs
		return a
	}
	tests := []struct {
		name  string
		attrs Attributes
		allow bool
	}{
		{"list pinned to own uid with In", with(bob, "list", "", pin(labelCreatorUID, "In", "1002")), true},
		{"watch pinned to own uid", with(bob, "watch", "", pin(labelCreatorUID, "In", "1002")), true},
		{"list pinned to another uid", with(bob, "list", "", pin(labelCreatorUID, "In", "1001")), false},
		{"list with two values", with(bob, "list", "", pin(labelCreatorUID, "In", "1002", "1001")), false},
		{"list with NotIn", with(bob, "list", "", pin(labelCreatorUID, "NotIn", "1001")), false},
		{"list without selector", with(bob, "list", "", nil), false},
		{"list by co-owner team label", with(sre, "list", "", pin("octogate.dev/owner-team.acme.sre", "Exists")), true},
		{"list by a team one is not in", with(bob, "list", "", pin("octogate.dev/owner-team.acme.sre", "Exists")), false},
		{"get own namespace", with(bob, "get", "bob-a", nil), true},
		{"delete own namespace", with(bob, "delete", "bob-a", nil), true},
		{"delete someone else's namespace", with(bob, "delete", "alice-a", nil), false},
		{"co-owner team deletes", with(sre, "delete", "alice-a", nil), true},
		{"patch own namespace (the webhook limits it to owner-teams)", with(bob, "patch", "bob-a", nil), true},
		{"co-owner team updates", with(sre, "update", "alice-a", nil), true},
		{"patch someone else's namespace", with(bob, "patch", "alice-a", nil), false},
		{"create is not granted by ownership", with(bob, "create", "bob-a", nil), false},
		{"watch own namespace by name (kubectl delete waits so)", with(bob, "watch", "bob-a", nil), true},
		{"list someone else's namespace by name", with(bob, "list", "alice-a", nil), false},
		{"deletecollection is not granted", with(bob, "deletecollection", "", nil), false},
		{"unknown namespace", with(bob, "get", "nope", nil), false},
		{"get of a missing namespace bob may create (kubectl apply reads first)", with(bob, "get", "bob-new", nil), true},
		{"get of an existing namespace named like bob's, owned by another", with(bob, "get", "bob-taken", nil), false},
		{"delete of a missing namespace bob may create", with(bob, "delete", "bob-new", nil), false},
		{"patch of a missing namespace bob may create", with(bob, "patch", "bob-new", nil), false},
		{"watch of a missing namespace bob may create", with(bob, "watch", "bob-new", nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := ownerDecision(&tc.attrs, owners, fakeCreators{}, "github:")
			if ok != tc.allow || (ok && d.Verdict != Allow) {
				t.Errorf("decision %+v ok=%v, want allow=%v", d, ok, tc.allow)
			}
		})
	}
}

func TestAuthorizerReadsTheLabelSelectorNotTheRawSelector(t *testing.T) {
	a, err := New(Config{OwnerRules: true, Owners: fakeOwners{}, UsernamePrefix: "github:"})
	if err != nil {
		t.Fatal(err)
	}
	review := func(selector string) bool {
		body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"github:bob:1002","uid":"1002","groups":["github:acme"],
			"resourceAttributes":{"verb":"list","version":"v1","resource":"namespaces",` + selector + `}}}`
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/authorize", bytes.NewBufferString(body)))
		var resp struct {
			Status struct{ Allowed bool } `json:"status"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatal(err, w.Body.String())
		}
		return resp.Status.Allowed
	}
	if !review(`"labelSelector":{"requirements":[{"key":"octogate.dev/creator-uid","operator":"In","values":["1002"]}]}`) {
		t.Error("requirements pinning the caller's uid: not allowed")
	}
	if review(`"labelSelector":{"rawSelector":"octogate.dev/creator-uid=1002"}`) {
		t.Error("rawSelector alone: allowed")
	}
	if review(`"labelSelector":{"requirements":[{"key":"octogate.dev/creator-uid","operator":"In","values":["1001"]}]}`) {
		t.Error("another uid: allowed")
	}
}

// TestCreatorsLoginComesFromExtra: the login the name patterns use is read from
// userInfo.extra of the review; without it nothing is granted.
func TestCreatorsLoginComesFromExtra(t *testing.T) {
	a, err := New(Config{OwnerRules: true, Owners: fakeOwners{}, Creators: fakeCreators{}, UsernamePrefix: "github:"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		extra string
		allow bool
	}{
		{`,"extra":{"octogate.dev/github-login":["bob"],"other":["x"]}`, true},
		{`,"extra":{"other":["bob"]}`, false},
		{``, false},
	} {
		body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"github:bob:1002","uid":"1002","groups":["github:acme"]` + tc.extra + `,
			"resourceAttributes":{"verb":"get","version":"v1","resource":"namespaces","name":"bob-new"}}}`
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/authorize", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		a.ServeHTTP(w, r)
		var got struct {
			Status struct{ Allowed bool } `json:"status"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if got.Status.Allowed != tc.allow {
			t.Errorf("extra %s: allowed %v, want %v (%s)", tc.extra, got.Status.Allowed, tc.allow, w.Body)
		}
	}
}
