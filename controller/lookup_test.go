package controller

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends"
)

// rememberingFake is a fakeBackend with an identity cache
// (backends.IdentityCache).
type rememberingFake struct {
	*fakeBackend
	known      map[string]*backends.Volume
	remembered []string
}

func (r *rememberingFake) KnownVolume(id, _ string) (*backends.Volume, bool) {
	v, ok := r.known[id]
	return v, ok
}

func (r *rememberingFake) Remember(v *backends.Volume) {
	r.remembered = append(r.remembered, v.ID)
	r.known[v.ID] = v
}

// Publish, unpublish and delete take a volume a backend remembers from
// it, asking no backend; they look up one it does not remember and let
// its backend remember it. The other calls always look up.
func TestFindVolumeCached(t *testing.T) {
	ctx := context.Background()
	publish := func(s *Service) error {
		_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "node-1", VolumeCapability: mountCap(rwo, "")})
		return err
	}
	unpublish := func(s *Service) error {
		_, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: "node-1"})
		return err
	}
	remove := func(s *Service) error {
		_, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "v"})
		return err
	}
	expand := func(s *Service) error {
		_, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "v", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}})
		return err
	}
	for _, tc := range []struct {
		name       string
		call       func(*Service) error
		remembered bool
		// lookups of the two backends, and what the owner remembered
		lookups   int
		remembers int
	}{
		{"publish, remembered", publish, true, 0, 0},
		{"publish, not remembered", publish, false, 2, 1},
		{"unpublish, remembered", unpublish, true, 0, 0},
		{"unpublish, not remembered", unpublish, false, 2, 1},
		{"delete, remembered", remove, true, 0, 0},
		{"delete, not remembered", remove, false, 2, 1},
		{"expand, remembered: looked up all the same", expand, true, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nas := &rememberingFake{fakeBackend: newFake("nas1", "ontap-nas", backends.ProtocolFile), known: map[string]*backends.Volume{}}
			other := newFake("nas2", "ontap-nas", backends.ProtocolFile)
			nodes := NewNodes()
			nodes.Set(backends.Node{Name: "node-1", IQN: "iqn.2020-01.io.example:node-1", IPs: []string{"10.0.0.1"}})
			s, err := New(Config{Backends: []backends.Backend{nas, other}, Nodes: nodes})
			if err != nil {
				t.Fatal(err)
			}
			v := &backends.Volume{ID: "v", Backend: "nas1", Owner: "nas1", SizeBytes: 1 << 30, Context: map[string]string{"name": "v"}}
			nas.vols["v"] = v
			if tc.remembered {
				c := *v
				nas.known["v"] = &c
			}
			if err := tc.call(s); err != nil {
				t.Fatal(err)
			}
			if got := nas.lookups + other.lookups; got != tc.lookups {
				t.Errorf("%d lookups, want %d", got, tc.lookups)
			}
			if len(nas.remembered) != tc.remembers {
				t.Errorf("remembered %v, want %d", nas.remembered, tc.remembers)
			}
		})
	}
}
