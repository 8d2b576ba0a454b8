package kubenodes

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// States implements controller.NodeStates: the taints and the Ready
// condition of Node objects, read from the API server on every call
// (never from the Registry's cache: a fence decided on a stale taint or
// condition is the wrong one). The ServiceAccount needs get on nodes.
type States struct {
	nodes dynamic.NamespaceableResourceInterface
}

var _ controller.NodeStates = (*States)(nil)

// NewStates returns States reading Nodes through client. It does no I/O.
func NewStates(client dynamic.Interface) *States {
	return &States{nodes: client.Resource(nodeinfo.NodesGVR)}
}

// NodeState implements controller.NodeStates.
func (s *States) NodeState(ctx context.Context, nodeID string) (controller.NodeState, error) {
	obj, err := s.nodes.Get(ctx, nodeID, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return controller.NodeState{}, fmt.Errorf("node %q: %w (there is no Kubernetes Node of that name)", nodeID, controller.ErrNodeNotFound)
	}
	if err != nil {
		return controller.NodeState{}, fmt.Errorf("reading Node %s: %w", nodeID, err)
	}
	return stateOf(obj), nil
}

// stateOf reads spec.taints and status.conditions. Fields of the wrong
// shape count as absent: no taint, not Ready.
func stateOf(obj *unstructured.Unstructured) controller.NodeState {
	var st controller.NodeState
	taints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "taints")
	for _, t := range taints {
		if m, ok := t.(map[string]any); ok && m["key"] == controller.OutOfServiceTaint {
			st.OutOfService = true
		}
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			st.Ready = m["status"] == "True"
		}
	}
	return st
}
