// Package kubenodes is the controller's node registry in ontap-csi's own
// install: each node plugin publishes its node info (IQN, IPs) as an
// annotation on its Kubernetes Node object (nodeinfo.AnnotationKey, written
// by package node/kubenode), and the controller reads the Node on
// ControllerPublishVolume. Under Trident's Deployment (--crd_persistence)
// TridentNode objects are used instead (package controller/tridentnodes).
package kubenodes

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// DefaultTTL is how long a node's info is reused. The attacher publishes
// every volume of a starting pod at once, one call each; a few seconds
// turn that burst into one GET, and are short enough that a node plugin
// restarted with a new IQN is seen almost at once.
const DefaultTTL = 5 * time.Second

// Registry implements controller.NodeRegistry from Node annotations. Only
// nodes that were found are cached: a node plugin that has just reported
// must be seen by the next call. The ServiceAccount needs get on nodes.
type Registry struct {
	nodes dynamic.NamespaceableResourceInterface
	ttl   time.Duration
	now   func() time.Time

	mu        sync.Mutex
	cache     map[string]entry
	lastSweep time.Time
}

type entry struct {
	info    backends.Node
	expires time.Time
}

var _ controller.NodeRegistry = (*Registry)(nil)

// New returns a registry reading Nodes through client, caching found nodes
// for ttl (DefaultTTL if 0; negative: no cache). It does no I/O.
func New(client dynamic.Interface, ttl time.Duration) *Registry {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	return &Registry{nodes: client.Resource(nodeinfo.NodesGVR), ttl: ttl, now: time.Now, cache: map[string]entry{}}
}

// Node implements controller.NodeRegistry. A Node that does not exist, or
// whose annotation is missing or unreadable, is an error wrapping
// controller.ErrNodeNotFound that says why; any other API error is
// returned as it is.
func (r *Registry) Node(ctx context.Context, nodeID string) (*backends.Node, error) {
	if n, ok := r.cached(nodeID); ok {
		return n, nil
	}
	obj, err := r.nodes.Get(ctx, nodeID, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %q: %w (there is no Kubernetes Node of that name, so its node plugin has not reported)",
			nodeID, controller.ErrNodeNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Node %s: %w", nodeID, err)
	}
	n, why := infoOf(obj)
	if why != "" {
		return nil, fmt.Errorf("node %q: %w (%s)", nodeID, controller.ErrNodeNotFound, why)
	}
	r.store(n)
	n.IPs = slices.Clone(n.IPs)
	return &n, nil
}

// infoOf is the node info a Node's node plugin reported in its
// annotation; why says what is wrong when there is none usable.
func infoOf(obj *unstructured.Unstructured) (n backends.Node, why string) {
	value, ok := obj.GetAnnotations()[nodeinfo.AnnotationKey]
	if !ok {
		return n, fmt.Sprintf("the Node has no %s annotation: its node plugin has not reported; is the ontap-csi node pod running there?", nodeinfo.AnnotationKey)
	}
	n, err := nodeinfo.ParseAnnotation(value)
	if err != nil {
		return n, fmt.Sprintf("its %s annotation is not node info: %v; its node plugin has not reported usable info", nodeinfo.AnnotationKey, err)
	}
	if n.Name != obj.GetName() {
		// Copied from another Node, or hand-edited: not this node's IQN.
		return n, fmt.Sprintf("its %s annotation names node %q: its node plugin has not reported", nodeinfo.AnnotationKey, n.Name)
	}
	return n, ""
}

func (r *Registry) cached(nodeID string) (*backends.Node, bool) {
	if r.ttl < 0 {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[nodeID]
	if !ok || !r.now().Before(e.expires) {
		return nil, false
	}
	n := e.info
	n.IPs = slices.Clone(n.IPs)
	return &n, true
}

func (r *Registry) store(n backends.Node) {
	if r.ttl < 0 {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	// Drop expired entries now and then, so that nodes that left the
	// cluster do not stay in memory.
	if now.Sub(r.lastSweep) >= r.ttl {
		for k, e := range r.cache {
			if !now.Before(e.expires) {
				delete(r.cache, k)
			}
		}
		r.lastSweep = now
	}
	r.cache[n.Name] = entry{info: n, expires: now.Add(r.ttl)}
}
