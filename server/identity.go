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
	ready        func() bool
}

// NewIdentity answers GetPluginInfo with name and version, GetPluginCapabilities
// with caps, and Probe with ready() (nil means always ready).
func NewIdentity(name, version string, caps []*csi.PluginCapability, ready func() bool) *Identity {
	if ready == nil {
		ready = func() bool { return true }
	}
	return &Identity{name: name, version: version, capabilities: caps, ready: ready}
}

func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: i.version}, nil
}

func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: i.capabilities}, nil
}

// Probe never fails while the process serves: like Trident, a plugin that is
// still initializing answers ready=false rather than an error, so sidecars
// wait instead of restarting it.
func (i *Identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(i.ready())}, nil
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
