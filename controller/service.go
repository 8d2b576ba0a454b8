// Package controller implements the CSI Controller service: argument and
// capability checks, volume and snapshot IDs, placement on backends and
// pools, idempotency and the mapping of failures to gRPC codes. What is
// specific to a storage system sits behind backends.Backend.
//
// The service keeps no state of its own. Volume IDs are the CSI names
// (Trident: the PV name) and are resolved by asking every backend; what a
// volume must remember lives on the storage system. A restarted controller,
// or a second replica, sees exactly the same world.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/internal/keymutex"
)

// Config is what the controller serves.
type Config struct {
	// Backends in configuration order; the order breaks ties when several
	// backends see the same volume and none owns it.
	Backends []backends.Backend
	// BackendSource, if set, adds backends that come and go at run time
	// (Trident's TridentBackendConfig resources). They follow Backends; one
	// whose name a static backend already has is skipped.
	BackendSource BackendSource
	// Nodes answers who a node is (iSCSI IQN, IP addresses).
	Nodes NodeRegistry
	// Claims, if set, reads the claim a CreateVolume is for (named by
	// csi-provisioner's --extra-create-metadata), for Trident's
	// trident.netapp.io annotations.
	Claims ClaimReader
	// Records, if set, says where volumes whose ONTAP name is not the
	// naming rule's live.
	Records VolumeRecords
	// NodeStates, if set, reads Nodes for fencing (fencing.go), and
	// ForceDetach is Trident's --enable_force_detach.
	NodeStates  NodeStates
	ForceDetach bool
}

// BackendSource supplies backends that change at run time.
type BackendSource interface {
	// Backends returns the backends to serve now, in a stable order. A
	// non-nil error means the set may lack backends that hold volumes (not
	// loaded yet, or a configuration that worked before fails now): the
	// controller still uses what it got, but never concludes from it that a
	// volume does not exist.
	Backends() ([]backends.Backend, error)
}

// Service implements csi.ControllerServer and csi.GroupControllerServer.
type Service struct {
	csi.UnimplementedControllerServer
	csi.UnimplementedGroupControllerServer

	static []backends.Backend
	source BackendSource
	nodes  NodeRegistry
	claims ClaimReader
	// records and what was read from them (records.go).
	records     VolumeRecords
	recordCache sync.Map
	locks       keymutex.Mutex // keys in locks.go
	nodeStates  NodeStates
	forceDetach bool
}

// New returns a controller serving cfg's backends. With none it still
// serves (capabilities, Probe) and answers volume creation Unavailable, as
// Trident does before its first backend is added.
func New(cfg Config) (*Service, error) {
	if cfg.Nodes == nil {
		return nil, errors.New("controller: no node registry")
	}
	seen := map[string]bool{}
	for _, b := range cfg.Backends {
		if seen[b.Name()] {
			return nil, fmt.Errorf("controller: two backends are named %q; backendName must be unique", b.Name())
		}
		seen[b.Name()] = true
	}
	return &Service{
		static:  append([]backends.Backend(nil), cfg.Backends...),
		source:  cfg.BackendSource,
		nodes:   cfg.Nodes,
		claims:  cfg.Claims,
		records: cfg.Records,

		nodeStates:  cfg.NodeStates,
		forceDetach: cfg.ForceDetach,
	}, nil
}

// backendSet returns the backends one call works with: a snapshot, so that
// a backend replaced meanwhile serves the rest of the call. incomplete is
// an ErrUnavailable error while the set may lack a backend that holds
// volumes (BackendSource).
func (s *Service) backendSet() (bs []backends.Backend, incomplete error) {
	if s.source == nil {
		return s.static, nil
	}
	dynamic, err := s.source.Backends()
	if err != nil {
		incomplete = backends.Errorf(backends.ErrUnavailable, "not every backend is loaded: %w", err)
	}
	bs = append(make([]backends.Backend, 0, len(s.static)+len(dynamic)), s.static...)
	for _, b := range dynamic {
		if !slices.ContainsFunc(s.static, func(x backends.Backend) bool { return x.Name() == b.Name() }) {
			bs = append(bs, b)
		}
	}
	return bs, incomplete
}

// Backends returns the backends served now: the configured ones, then
// those of the BackendSource.
func (s *Service) Backends() []backends.Backend {
	bs, _ := s.backendSet()
	return bs
}

// capabilities are the controller RPCs this service implements. Not
// advertised:
//   - PUBLISH_READONLY, as in Trident: read-only is the node's mount
//     (NodePublishVolume readonly, which kubelet sets for a read-only PV or
//     pod volume, and reader-only access modes). ONTAP has no read-only LUN
//     map, so ontap-san could not honour it on the array; ontap-nas could
//     only with autoExportPolicy (a read-only rule for the node), since
//     without it publish changes no rule. A readonly ControllerPublishVolume
//     is refused (InvalidArgument), never silently ignored.
//   - GET_VOLUME: one volume's publications would cost the listings of a
//     whole ListVolumes page; the attacher does not call it.
var capabilities = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	// Published nodes come from ONTAP's state (listvolumes.go).
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
}

// ControllerGetCapabilities advertises only what this service implements.
func (s *Service) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, c := range capabilities {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}
