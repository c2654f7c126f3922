package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/octogate/octogate/internal/nodeapi"
)

// StandInLabel marks the Node objects StartNode registers.
const StandInLabel = "node.octogate.dev/stand-in"

// StandInImage is the image of RunPod's containers; nothing pulls it.
const StandInImage = "octogate.invalid/stand-in:v1"

// leaseDuration and leaseRenew are the kubelet's defaults (nodeLeaseDurationSeconds 40,
// renewed every quarter of it).
const (
	leaseDuration = 40 * time.Second
	leaseRenew    = 10 * time.Second
)

// Node is a stand-in kubelet registered with a kube-apiserver: a Node object whose kubelet
// endpoint is a nodeapi.Server on 127.0.0.1, its Lease kept fresh, and a loop that does a
// kubelet's part for every Pod bound to it (spec.nodeName): the pod runs in the nodeapi
// server, its status becomes Running and Ready, and a deleted pod is removed at once (a
// graceful deletion would otherwise wait for a kubelet forever, and so would a namespace
// being deleted).
//
// kube-apiserver reaches it with its default kubelet client settings: the address is the
// Node's only address, InternalIP 127.0.0.1 (the default --kubelet-preferred-address-types
// prefers Hostname and InternalDNS, which the Node does not report), the port is
// status.daemonEndpoints.kubeletEndpoint.Port, the serving certificate is not verified
// without --kubelet-certificate-authority, and no client certificate is presented without
// --kubelet-client-certificate (pkg/kubelet/client in kubernetes 1.37). No kube-apiserver flag
// is needed.
type Node struct {
	Name string
	// API is the node's streaming server.
	API *nodeapi.Server
	// LogPath is the node's log: one line per node API request and per pod it ran.
	LogPath string

	cs         kubernetes.Interface
	registered bool // the Node object is ours to delete
	log        *slog.Logger
	logFile    *os.File
	cancel     context.CancelFunc
	queue      workqueue.TypedRateLimitingInterface[string]
	factory    informers.SharedInformerFactory
	pods       cache.Indexer
	wg         sync.WaitGroup
}

// StartNode starts a stand-in node named name (a DNS label) against the kube-apiserver that
// admin (a system:masters configuration) reaches, logging to workDir/node-NAME.log. It returns
// once the Node is registered and Ready and its pod loop has synced. Stop undoes it.
func StartNode(ctx context.Context, admin *rest.Config, name, workDir string) (n *Node, err error) {
	if admin == nil || name == "" || workDir == "" {
		return nil, errors.New("cluster: StartNode needs an admin configuration, a name and a work directory")
	}
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, err
	}
	logPath := filepath.Join(workDir, "node-"+name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logFile, nil)).With("node", name)
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	api, err := nodeapi.Start(nodeapi.Config{Logger: log})
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n = &Node{
		Name: name, API: api, LogPath: logPath,
		cs: cs, log: log, logFile: logFile, cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "stand-in-node-" + name}),
	}
	defer func() {
		if err != nil {
			_ = n.Stop()
			n = nil
		}
	}()

	node, err := cs.CoreV1().Nodes().Create(ctx, n.nodeObject(), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("register Node %s: %w", name, err)
	}
	n.registered = true
	// Status sent with a create is kept for Nodes today; setting it again makes that no
	// assumption.
	node.Status = n.nodeObject().Status
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("Node %s status: %w", name, err)
	}
	if err := n.renewLease(ctx, node); err != nil {
		return nil, err
	}

	n.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + name
	}))
	podInformer := n.factory.Core().V1().Pods().Informer()
	n.pods = podInformer.GetIndexer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.enqueue,
		UpdateFunc: func(_, obj any) { n.enqueue(obj) },
		DeleteFunc: n.enqueue,
	}); err != nil {
		return nil, err
	}
	n.factory.Start(runCtx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), podInformer.HasSynced) {
		return nil, fmt.Errorf("node %s: pod cache did not sync: %w", name, syncCtx.Err())
	}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		for n.processNext(runCtx) {
		}
	}()
	go func() {
		defer n.wg.Done()
		n.keepLease(runCtx, node)
	}()
	return n, nil
}

func (n *Node) nodeObject() *corev1.Node {
	now := metav1.Now()
	condition := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname": n.Name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     runtime.GOARCH,
				StandInLabel:             "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "stand-in kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "stand-in kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "stand-in kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "stand-in kubelet is posting ready status"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.API.Port())}}, //nolint:gosec // a TCP port
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				KubeletVersion:          "v1.37.2",
				ContainerRuntimeVersion: "octogate-stand-in://1",
				OSImage:                 "octogate stand-in node",
			},
		},
	}
}

// renewLease creates or renews the node's Lease in kube-node-lease (owned by the Node, as
// the kubelet's is).
func (n *Node) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := n.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: n.Name, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.Name),
				LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
	} else if err == nil {
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("node %s lease: %w", n.Name, err)
	}
	return nil
}

func (n *Node) keepLease(ctx context.Context, node *corev1.Node) {
	tick := time.NewTicker(leaseRenew)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := n.renewLease(callCtx, node); err != nil && ctx.Err() == nil {
			n.log.Warn("lease renewal failed", "err", err)
		}
		cancel()
	}
}

func (n *Node) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		n.queue.Add(key)
	}
}

// maxPodRetries bounds the retries of one pod's sync before it is given up (and logged).
const maxPodRetries = 5

func (n *Node) processNext(ctx context.Context) bool {
	key, shutdown := n.queue.Get()
	if shutdown {
		return false
	}
	defer n.queue.Done(key)
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := n.syncPod(callCtx, key)
	switch {
	case err == nil:
		n.queue.Forget(key)
	case ctx.Err() != nil:
	case n.queue.NumRequeues(key) < maxPodRetries:
		n.queue.AddRateLimited(key)
	default:
		n.log.Error("pod sync failed, giving up", "pod", key, "err", err)
		n.queue.Forget(key)
	}
	return true
}

// syncPod does the kubelet's part for one pod key.
func (n *Node) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	obj, exists, err := n.pods.GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		n.API.RemovePod(ns, name)
		return nil
	}
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		n.API.RemovePod(ns, name)
		err := n.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		n.log.Info("pod deleted", "pod", key)
		return nil
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	containers := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		containers = append(containers, c.Name)
	}
	if err := n.API.AddPod(ns, name, containers...); err != nil {
		return err
	}
	if podRunning(pod) {
		return nil
	}
	running := pod.DeepCopy()
	setRunning(running)
	if _, err := n.cs.CoreV1().Pods(ns).UpdateStatus(ctx, running, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pod %s status: %w", key, err)
	}
	n.log.Info("pod running", "pod", key, "containers", containers)
	return nil
}

// podRunning reports whether pod's status says Running with every container ready.
func podRunning(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready {
			return false
		}
	}
	return true
}

// setRunning writes the status a kubelet reports for a pod whose containers all started:
// phase Running, the pod conditions True, each container running and ready. The pod shares
// the node's loopback address; nothing routes to it but port-forward.
func setRunning(pod *corev1.Pod) {
	now := metav1.Now()
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	st.PodIP, st.PodIPs = "127.0.0.1", []corev1.PodIP{{IP: "127.0.0.1"}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image,
			ContainerID: "octogate-stand-in://" + pod.Namespace + "/" + pod.Name + "/" + c.Name,
			Ready:       true,
			Started:     ptr.To(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// RunPod creates Pod namespace/name bound to this node (spec.nodeName; there is no
// scheduler) with the given containers (default one named "app"), each with the nodeapi
// ports 80 ("http") and 7 ("echo") and stdin open, and waits up to 30 s until it is Running
// and Ready.
func (n *Node) RunPod(ctx context.Context, namespace, name string, containers ...string) error {
	if len(containers) == 0 {
		containers = []string{"app"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:  c,
			Image: StandInImage,
			Stdin: true,
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: nodeapi.HTTPPort, Protocol: corev1.ProtocolTCP},
				{Name: "echo", ContainerPort: nodeapi.EchoPort, Protocol: corev1.ProtocolTCP},
			},
		})
	}
	if _, err := n.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", namespace, name, err)
	}
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := n.cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		last = p
		return podRunning(p) && n.API.HasPod(namespace, name), nil
	})
	if err != nil {
		phase := corev1.PodPhase("unknown")
		if last != nil {
			phase = last.Status.Phase
		}
		return fmt.Errorf("pod %s/%s not running on node %s (phase %s): %w", namespace, name, n.Name, phase, err)
	}
	return nil
}

// Stop stops the pod loop and the lease, deletes (with no grace period) the pods still bound
// to the node, the Node and its Lease, and closes the node API. Each call to the
// kube-apiserver is bounded by 10 s; every error is returned.
func (n *Node) Stop() error {
	if n == nil {
		return nil
	}
	n.cancel()
	n.queue.ShutDown()
	if n.factory != nil {
		n.factory.Shutdown()
	}
	n.wg.Wait()
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n.pods != nil {
		for _, obj := range n.pods.List() {
			pod := obj.(*corev1.Pod)
			err := n.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		}
	}
	if n.registered {
		if err := n.cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Node %s: %w", n.Name, err))
		}
		if err := n.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Lease %s: %w", n.Name, err))
		}
	}
	errs = append(errs, n.API.Close(), n.logFile.Close())
	return errors.Join(errs...)
}
