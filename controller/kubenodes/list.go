package kubenodes

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
)

var _ controller.NodeLister = (*Registry)(nil)

// ListNodes implements controller.NodeLister: the Nodes whose node plugin
// has reported, in one list request (the controller's role has list on
// nodes). A Node without usable node info is left out, as Node refuses it.
func (r *Registry) ListNodes(ctx context.Context) ([]backends.Node, error) {
	list, err := r.nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	out := make([]backends.Node, 0, len(list.Items))
	for i := range list.Items {
		if n, why := infoOf(&list.Items[i]); why == "" {
			out = append(out, n)
		}
	}
	return out, nil
}
