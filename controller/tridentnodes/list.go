package tridentnodes

import (
	"context"
	"slices"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
)

var _ controller.NodeLister = (*Store)(nil)

// ListNodes implements controller.NodeLister: every TridentNode, named by
// its node's name (the CSI node ID), not by its object name.
func (s *Store) ListNodes(ctx context.Context) ([]backends.Node, error) {
	ns, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, backends.Node{Name: n.Name, IQN: n.IQN, IPs: slices.Clone(n.IPs)})
	}
	return out, nil
}
