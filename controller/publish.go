package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// ControllerPublishVolume gives a node access to a volume (per-node igroup
// and LUN map, or an export rule) and returns Trident's publish_context.
func (s *Service) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	pc, err := s.publish(ctx, req)
	return reply(&csi.ControllerPublishVolumeResponse{PublishContext: pc}, err)
}

func (s *Service) publish(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (map[string]string, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if err := requireString("volume_id", id, maxStringBytes); err != nil {
		return nil, err
	}
	if err := requireString("node_id", nodeID, maxNodeIDBytes); err != nil {
		return nil, err
	}
	if req.GetVolumeCapability() == nil {
		return nil, invalidArg("volume capability is required")
	}
	if req.GetReadonly() {
		// The CO MUST send false without PUBLISH_READONLY (CSI spec,
		// ControllerPublishVolumeRequest.readonly); Kubernetes does. See
		// the capabilities in service.go for why it is not advertised.
		return nil, invalidArg("readonly: this plugin does not advertise PUBLISH_READONLY; a read-only volume is published read-only by the node (NodePublishVolume readonly)")
	}
	use, err := parseCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()})
	if err != nil {
		return nil, err
	}
	unlock, ok := s.locks.TryLock(volumeKey(id))
	if !ok {
		return nil, pending(id)
	}
	defer unlock()
	f, err := s.findVolumeCached(ctx, id)
	if err != nil {
		return nil, err
	}
	node, err := s.node(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	if err := use.fitsVolume(f.backend.Protocol(), f.vol); err != nil {
		return nil, invalidArg("%v", err)
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "node": nodeID, "backend": f.backend.Name()}).Info("publishing volume")
	return f.backend.Publish(ctx, f.vol, &backends.PublishRequest{
		Node:         *node,
		AccessType:   use.access,
		ReadOnly:     req.GetReadonly(),
		MountOptions: mountOptions(use.mountFlags),
		FSType:       use.fsType,
	})
}

// mountOptions flattens mount flags, which StorageClasses give either one
// per entry or comma-joined.
func mountOptions(flags []string) []string {
	var out []string
	for _, f := range flags {
		for _, o := range strings.Split(f, ",") {
			if o = strings.TrimSpace(o); o != "" {
				out = append(out, o)
			}
		}
	}
	return out
}

// ControllerUnpublishVolume revokes a node's access. A volume that is gone
// is unpublished; a node that is gone is handled by name (Trident #691).
// A node that must be fenced is cut off and ONTAP confirms it before OK
// (fencing.go, docs/design/fencing.md §3.1).
func (s *Service) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return reply(&csi.ControllerUnpublishVolumeResponse{}, s.unpublish(ctx, req))
}

func (s *Service) unpublish(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) error {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if err := requireString("volume_id", id, maxStringBytes); err != nil {
		return err
	}
	if err := checkString("node_id", nodeID, maxNodeIDBytes); err != nil {
		return err
	}
	unlock, ok := s.locks.TryLock(volumeKey(id))
	if !ok {
		return pending(id)
	}
	defer unlock()
	d, err := s.mustFence(ctx, nodeID)
	if err != nil {
		return err
	}
	// A fence must see where the volume is on ONTAP now (fencing.go):
	// neither the controller's records nor the backend's identity cache.
	var f *found
	if d.fence {
		s.recordCache.Delete(id)
		f, err = s.findVolume(ctx, id)
	} else {
		f, err = s.findVolumeCached(ctx, id)
	}
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if d.fence {
		return s.fence(ctx, f, nodeID, d)
	}
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "node": nodeID, "backend": f.backend.Name()})
	var node *backends.Node
	if nodeID != "" {
		node, err = s.node(ctx, nodeID)
		switch {
		case errors.Is(err, ErrNodeNotFound):
			log.Info("node is not registered; unpublishing by its name only")
		case err != nil:
			return err
		}
	}
	log.Info("unpublishing volume")
	return f.backend.Unpublish(ctx, f.vol, nodeID, node)
}

// node asks the registry who a node is. An unknown node stays
// ErrNodeNotFound; any other failure is the registry's (the Kubernetes API
// did not answer), which a retry may get past: Unavailable.
func (s *Service) node(ctx context.Context, nodeID string) (*backends.Node, error) {
	n, err := s.nodes.Node(ctx, nodeID)
	switch {
	case errors.Is(err, ErrNodeNotFound):
		return nil, fmt.Errorf("node %s was not found: %w", nodeID, err)
	case err != nil:
		return nil, backends.Errorf(backends.ErrUnavailable, "looking up node %s: %w", nodeID, err)
	}
	return n, nil
}
