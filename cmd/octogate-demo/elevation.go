package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/cluster"
)

// demoPolicy is the stand-in demo's policy: the example policy, a rule that lets acme members
// file AccessRequests, and elevation payments-debug (docs/elevation.md): an acme member may
// read namespace payments' Secrets for up to an hour, with a reason, once a platform admin
// approves.
const demoPolicy = cluster.ExamplePolicy + `- name: members-request-elevations
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [create, get, list, watch, patch], apiGroups: [octogate.dev], resources: [accessrequests]}]
elevations:
- name: payments-debug
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/platform-admins"}]
  namespaces: [payments]
  resourceRules: [{verbs: [get, list], apiGroups: [""], resources: [secrets]}]
  maxDuration: 1h
  requireReason: true
`

// elevationNamespace is the namespace payments-debug covers; it holds Secret db.
const elevationNamespace = "payments"

// prepareElevation creates, in the demo's cluster (admin: a system:masters client), namespace
// payments with a Secret db, for the elevation tour. The AccessRequest CRD and webhooks are
// installed by cluster.Start (Config.AccessRequestCRD).
func prepareElevation(ctx context.Context, admin *rest.Config) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elevationNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = cs.CoreV1().Secrets(elevationNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"password": "not-a-real-one"},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	return err
}
