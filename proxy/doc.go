// Package proxy is octogate's impersonating front door to kube-apiserver, for clusters whose
// kube-apiserver flags cannot be set (EKS, GKE, AKS): kubectl talks to the proxy in place of
// kube-apiserver, and the proxy
//
//  1. authenticates the request's bearer token with the decision of /authenticate
//     (tokenreview.Handler.Authenticate: GitHub tokens, sessions and Actions tokens, the same
//     cache, revocations and reason codes); no token or a refused one is answered 401;
//  2. refuses a client's own Impersonate-* headers (kubectl --as) with 403;
//  3. decides with the decision of /authorize (subjectaccessreview.Authorizer.Decide: the
//     policy, then the owner rules) over the request's attributes, parsed by kube-apiserver's
//     own RequestInfoFactory: Deny is answered 403 as kube-apiserver words it; Allow adds the
//     group only the proxy asserts (subjectaccessreview.Decision.Group), which the ownership
//     controller's RBAC grants what the rule grants; NoOpinion leaves the request to the
//     cluster's RBAC;
//  4. evaluates, with the same decision, the checks kube-apiserver will make inside the request
//     that the proxy can foresee (EnforcedSecondChecks: create on a WebSocket exec, attach or
//     port-forward, bind and escalate on RBAC writes, approve and sign on CSRs): a Deny is
//     answered 403, an Allow adds that rule's group too, so that RBAC, which kube-apiserver
//     asks alone, cannot grant through the proxy's groups what the policy denies;
//  5. forwards the request as the proxy's own ServiceAccount with Impersonate-User, -Uid,
//     -Group and -Extra-* (client-go's impersonating transport), streaming bodies and watch
//     events as they come and upgraded connections (exec, attach, port-forward over SPDY or
//     websockets) through apimachinery's upgrade-aware proxy.
//
// SelfSubjectAccessReviews (kubectl auth can-i) are answered with the same decision, so they
// agree with what the proxy then does. Limits: in-flight requests and long-running requests
// (watches, exec, attach, port-forward, followed logs) per user and in all; over a limit the
// answer is 429 with Retry-After, as kube-apiserver's API Priority and Fairness answers.
//
// Answers are kube-apiserver's: a metav1.Status with the code and reason it would give.
// References: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation
// and https://kubernetes.io/docs/reference/access-authn-authz/authorization/#review-your-request-attributes.
package proxy
