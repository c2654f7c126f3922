// Package cluster runs a real Kubernetes control plane on loopback wired to octogate: etcd and
// kube-apiserver (through controller-runtime's envtest), kube-controller-manager, and the
// octogate binary as a subprocess with its own certificates.
//
// It speaks the kube-apiserver's configuration formats: the webhook token authenticator
// kubeconfig (--authentication-token-webhook-config-file), AuthorizationConfiguration
// (apiserver.config.k8s.io/v1, --authorization-config), AdmissionConfiguration with a
// WebhookAdmissionConfiguration (--admission-control-config-file), and
// admissionregistration.k8s.io/v1 webhook configurations. The end-to-end tests (test/e2e) and
// the demo (cmd/octogate-demo) both start their clusters with it.
//
// There are no kubelets: StartNode registers a stand-in node (internal/nodeapi) whose pods,
// made with RunPod, answer kubectl exec, attach, logs, port-forward and cp.
//
// Binaries come from bin/k8s (tools/build.sh); see DESIGN.md "Real kube-apiserver in tests"
// for the kube-apiserver 1.37 behaviour the wiring relies on.
package cluster
