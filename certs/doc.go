// Package certs owns the X.509 material octogate and kube-apiserver use to talk to each other,
// and the kubeconfig files kube-apiserver reads to reach the webhooks.
//
// It issues, from two ECDSA P-256 CAs, a short-lived serving certificate for the webhook server
// (SANs split into IP addresses and DNS names) from the serving CA, and a long-lived client
// certificate that kube-apiserver presents (ExtKeyUsage clientAuth) from a client CA used for
// nothing else. It writes them as PEM files named the way a Kubernetes TLS Secret names them
// (tls.crt, tls.key) next to ca.crt/ca.key, client-ca.crt/client-ca.key and
// client.crt/client.key, and renews them when due (RenewDir, CA.RenewServing).
//
// Kubeconfigs are rendered in the kubeconfig v1 format (k8s.io/client-go/tools/clientcmd) for
// the three ways kube-apiserver calls a webhook:
//   - authentication: --authentication-token-webhook-config-file
//     (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#webhook-token-authentication)
//   - authorization: --authorization-webhook-config-file or an AuthorizationConfiguration's
//     kubeConfigFile (https://kubernetes.io/docs/reference/access-authn-authz/webhook/)
//   - admission: the kubeConfigFile of a WebhookAdmissionConfiguration passed with
//     --admission-control-config-file, whose users are matched by the webhook's host:port
//     (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#authenticate-apiservers)
package certs
