// Package nodeapi is a stand-in kubelet's node API for tests: an HTTPS server on loopback that
// answers the streaming requests kube-apiserver sends to a node's kubelet, so that
// `kubectl exec`, `attach`, `logs -f`, `port-forward` and `cp` work against a test
// kube-apiserver that has no real nodes or container runtimes.
//
// Routes (the paths kube-apiserver builds in pkg/registry/core/pod/strategy.go, on the port a
// Node publishes in status.daemonEndpoints.kubeletEndpoint):
//
//	/exec/{namespace}/{pod}/{container}?command=...&input=1&output=1&error=1&tty=1
//	/attach/{namespace}/{pod}/{container}?input=1&output=1&error=1&tty=1
//	/containerLogs/{namespace}/{pod}/{container}?follow=true&tailLines=N&timestamps=true&limitBytes=N
//	/portForward/{namespace}/{pod}
//
// The streaming protocols are virtual-kubelet's copy of the kubelet's own server code
// (github.com/virtual-kubelet/virtual-kubelet/node/api): SPDY/3.1 with remotecommand
// v1 to v5.channel.k8s.io and portforward.k8s.io, and the legacy websocket remotecommand
// protocols (channel.k8s.io, base64.channel.k8s.io, v4.channel.k8s.io, v4.base64.channel.k8s.io).
// Not served: v5.channel.k8s.io over websockets and websocket port forwarding; kube-apiserver
// 1.37 translates kubectl's websockets to SPDY towards any node that does not declare
// ExtendWebSocketsToKubelet in status.declaredFeatures, which a stand-in node never does.
//
// Pods are in-process fakes registered with AddPod. Their containers run no programs: exec
// runs a small built-in command set over a per-container in-memory filesystem (see Commands),
// attach echoes stdin, logs are a fixed set of lines plus, when followed, one more line every
// FollowInterval, and port forwarding reaches handlers inside this process (port 80: HTTP
// "hello from POD", port 7: echo; every other port is refused). Nothing dials out.
//
// The serving certificate is self-signed (client-go's cert.GenerateSelfSignedCertKey, as a
// kubelet without --tls-cert-file makes one); kube-apiserver without
// --kubelet-certificate-authority does not verify it. Client certificates are requested but
// not required or verified; Requests reports which one each caller presented.
package nodeapi
