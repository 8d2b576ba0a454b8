// Package node implements the CSI Node service.
package node

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Config is what the node service knows about its node.
type Config struct {
	// NodeID is --csi_node_name, the Kubernetes node name, as in Trident.
	NodeID string
	// Topology is reported as the node's accessible topology.
	Topology map[string]string
}

// Service implements csi.NodeServer.
type Service struct {
	csi.UnimplementedNodeServer
	cfg Config
}

// New returns a node service for cfg.
func New(cfg Config) *Service {
	return &Service{cfg: cfg}
}

// NodeGetInfo answers from local state only and never fails: kubelet calls it
// during registration, and an error there drops the driver by name (K5, I6).
func (s *Service) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: s.cfg.NodeID}
	if len(s.cfg.Topology) > 0 {
		segments := make(map[string]string, len(s.cfg.Topology))
		for k, v := range s.cfg.Topology {
			segments[k] = v
		}
		resp.AccessibleTopology = &csi.Topology{Segments: segments}
	}
	return resp, nil
}

// NodeGetCapabilities advertises only what this service implements.
func (s *Service) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}
