package server

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Identity implements the CSI Identity service for every role.
type Identity struct {
	csi.UnimplementedIdentityServer

	name         string
	version      string
	capabilities []*csi.PluginCapability
}

// NewIdentity answers GetPluginInfo with name and version and
// GetPluginCapabilities with caps.
func NewIdentity(name, version string, caps []*csi.PluginCapability) *Identity {
	return &Identity{name: name, version: version, capabilities: caps}
}

func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: i.version}, nil
}

func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: i.capabilities}, nil
}

// Probe answers ready, in every role, as soon as the process serves CSI,
// and never fails. CSI lets a plugin that is still initializing answer
// ready=false; once our socket serves, nothing is left that Probe should
// wait for:
//
//   - node: not kubelet registration. Probe reaches whichever process owns
//     the endpoint E, and E moves between plugin generations during a
//     handover (I3), so it cannot speak for one pod's registration. That
//     readiness is the pod's own: /readyz on its health socket (`ontap-csi
//     probe`, an exec probe), on --metrics-address, and Trident's /readiness.
//   - controller: not backends. Trident answers ready while it still
//     initializes, backends or none, and the sidecars wait at start until
//     Probe says ready: waiting on TridentBackendConfigs would hold all of
//     them, though calls have meaningful answers without a backend
//     (CreateVolume Unavailable, GetCapacity zero, DeleteVolume of an
//     unknown volume OK).
//
// A start that fails does not serve at all: the process exits, where Trident
// would answer FailedPrecondition after a failed bootstrap.
func (i *Identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// ServiceCapability is a shorthand for a plugin service capability.
func ServiceCapability(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
	return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: t},
	}}
}

// OnlineExpansionCapability advertises that volumes can grow while in use.
func OnlineExpansionCapability() *csi.PluginCapability {
	return &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
		VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE},
	}}
}
