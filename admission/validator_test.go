package admission

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
)

func TestValidatorProtectsCreatorAnnotations(t *testing.T) {
	const (
		owned = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\"]","team":"a"}}}`
		creatorRemoved = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator-uid":"583231","octogate.dev/creator-groups":"[\"github:acme\"]","team":"a"}}}`
		groupsChanged = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"system:masters\"]","team":"a"}}}`
		allRemoved   = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":null}}`
		otherChanged = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\"]","team":"b"},"labels":{"x":"y"}}}`
		unowned       = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`
		claimed       = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{"octogate.dev/creator":"github:mallory"}}}`
		deletingNoAnn = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","deletionTimestamp":"2026-01-02T03:04:05Z"}}`
	)
	mallory := authenticationv1.UserInfo{Username: "github:mallory", Groups: []string{"github:acme", "system:authenticated"}}
	master := authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}
	admin := authenticationv1.UserInfo{Username: "github:root", Groups: []string{"github:acme/platform-admins"}}
	tests := []struct {
		name        string
		op          admissionv1.Operation
		subresource string
		old, new    string
		user        authenticationv1.UserInfo
		wantAllowed bool
		wantInMsg   []string // each must appear in a denial
	}{
		{name: "normal user removing creator is denied", op: admissionv1.Update, old: owned, new: creatorRemoved, user: mallory,
			wantInMsg: []string{`annotation octogate.dev/creator of namespace "team-a"`, `"github:mallory"`, "system:masters, github:acme/platform-admins"}},
		{name: "normal user changing creator-groups is denied", op: admissionv1.Update, old: owned, new: groupsChanged, user: mallory,
			wantInMsg: []string{"annotation octogate.dev/creator-groups "}},
		{name: "normal user removing all three is denied naming all three", op: admissionv1.Update, old: owned, new: allRemoved, user: mallory,
			wantInMsg: []string{"annotations octogate.dev/creator, octogate.dev/creator-groups, octogate.dev/creator-uid "}},
		{name: "normal user claiming an unowned namespace is denied", op: admissionv1.Update, old: unowned, new: claimed, user: mallory,
			wantInMsg: []string{"annotation octogate.dev/creator "}},
		{name: "system:masters removing creator is allowed", op: admissionv1.Update, old: owned, new: creatorRemoved, user: master, wantAllowed: true},
		{name: "admin group removing creator is allowed", op: admissionv1.Update, old: owned, new: creatorRemoved, user: admin, wantAllowed: true},
		{name: "normal user changing other annotations and labels is allowed", op: admissionv1.Update, old: owned, new: otherChanged, user: mallory, wantAllowed: true},
		{name: "update of a namespace being deleted is allowed", op: admissionv1.Update, old: owned, new: deletingNoAnn, user: mallory, wantAllowed: true},
		{name: "finalize subresource is allowed", op: admissionv1.Update, subresource: "finalize", old: owned, new: allRemoved, user: mallory, wantAllowed: true},
		{name: "status subresource is allowed", op: admissionv1.Update, subresource: "status", old: owned, new: allRemoved, user: mallory, wantAllowed: true},
		{name: "DELETE is allowed", op: admissionv1.Delete, old: owned, user: mallory, wantAllowed: true},
		{name: "CREATE is allowed", op: admissionv1.Create, new: claimed, user: mallory, wantAllowed: true},
	}
	for _, tc := range tests {
		for _, version := range []string{v1, v1beta1} {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				h, out := testValidator(t)
				req := namespaceRequest(tc.op, tc.new, tc.old, tc.user)
				req.SubResource = tc.subresource
				resp := review(t, h, version, req)
				if resp.Allowed != tc.wantAllowed {
					t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
				}
				if len(resp.Patch) != 0 {
					t.Errorf("validating webhook answered with a patch: %s", resp.Patch)
				}
				wantDecision := "admit"
				if !tc.wantAllowed {
					wantDecision = "reject"
					if resp.Result == nil || resp.Result.Code != 403 {
						t.Fatalf("result %+v, want code 403", resp.Result)
					}
					for _, s := range tc.wantInMsg {
						if !strings.Contains(resp.Result.Message, s) {
							t.Errorf("denial %q does not contain %q", resp.Result.Message, s)
						}
					}
				}
				if got := out.last(t); got.Decision != wantDecision || got.User != tc.user.Username {
					t.Errorf("recorded %+v, want decision %s for %s", got, wantDecision, tc.user.Username)
				}
			})
		}
	}
}
