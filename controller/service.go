// Package controller implements the CSI Controller service.
package controller

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Service implements csi.ControllerServer.
type Service struct {
	csi.UnimplementedControllerServer
}

// New returns a controller service.
func New() *Service { return &Service{} }

// ControllerGetCapabilities advertises only what this service implements.
func (s *Service) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{}, nil
}
