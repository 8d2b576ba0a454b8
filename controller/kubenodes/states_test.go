package kubenodes

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/controller"
)

func nodeWith(name string, taints []any, conditions []any) *unstructured.Unstructured {
	n := nodeObject(name, nil)
	if taints != nil {
		n.Object["spec"] = map[string]any{"taints": taints}
	}
	if conditions != nil {
		n.Object["status"] = map[string]any{"conditions": conditions}
	}
	return n
}

func TestNodeState(t *testing.T) {
	ready := map[string]any{"type": "Ready", "status": "True"}
	notReady := map[string]any{"type": "Ready", "status": "Unknown"}
	oos := map[string]any{"key": controller.OutOfServiceTaint, "value": "nodeshutdown", "effect": "NoExecute"}
	oosNoSchedule := map[string]any{"key": controller.OutOfServiceTaint, "effect": "NoSchedule"}
	other := map[string]any{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
	for _, tc := range []struct {
		name string
		node *unstructured.Unstructured
		want controller.NodeState
	}{
		{"Ready, untainted", nodeWith("n", nil, []any{map[string]any{"type": "DiskPressure", "status": "False"}, ready}), controller.NodeState{Ready: true}},
		{"NotReady, unreachable", nodeWith("n", []any{other}, []any{notReady}), controller.NodeState{}},
		{"out of service", nodeWith("n", []any{other, oos}, []any{notReady}), controller.NodeState{OutOfService: true}},
		// The attach-detach controller checks the key, not the effect.
		{"out of service, other effect", nodeWith("n", []any{oosNoSchedule}, []any{ready}), controller.NodeState{OutOfService: true, Ready: true}},
		{"no status", nodeWith("n", nil, nil), controller.NodeState{}},
		{"malformed fields", nodeWith("n", []any{"x", int64(3)}, []any{"y"}), controller.NodeState{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake(tc.node)
			st, err := NewStates(c).NodeState(context.Background(), "n")
			if err != nil || st != tc.want {
				t.Errorf("got %+v, %v; want %+v", st, err, tc.want)
			}
		})
	}

	// Every call reads the API server: a taint added meanwhile is seen.
	c := newFake(nodeWith("n", nil, []any{ready}))
	s := NewStates(c)
	for range 2 {
		if _, err := s.NodeState(context.Background(), "n"); err != nil {
			t.Fatal(err)
		}
	}
	if n := gets(c); n != 2 {
		t.Errorf("%d GETs for 2 calls, want 2 (no cache)", n)
	}

	if _, err := s.NodeState(context.Background(), "gone"); !errors.Is(err, controller.ErrNodeNotFound) {
		t.Errorf("missing Node: %v, want ErrNodeNotFound", err)
	}
	down := newFake()
	down.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd")
	})
	_, err := NewStates(down).NodeState(context.Background(), "n")
	if err == nil || errors.Is(err, controller.ErrNodeNotFound) || !apierrors.IsServiceUnavailable(errors.Unwrap(err)) {
		t.Errorf("API failure: %v, want the API's error, not ErrNodeNotFound", err)
	}
}
