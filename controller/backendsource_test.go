package controller

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

// fakeSource is a BackendSource whose set the test changes.
type fakeSource struct {
	mu         sync.Mutex
	bs         []backends.Backend
	incomplete error
}

func (f *fakeSource) Backends() ([]backends.Backend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]backends.Backend(nil), f.bs...), f.incomplete
}

func (f *fakeSource) set(incomplete error, bs ...backends.Backend) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bs, f.incomplete = bs, incomplete
}

func TestDynamicBackends(t *testing.T) {
	ctx := context.Background()
	static := newFake("static", "ontap-nas", backends.ProtocolFile)
	dyn := newFake("dyn", "ontap-nas", backends.ProtocolFile)
	shadow := newFake("static", "ontap-san", backends.ProtocolBlock) // same name as a static one
	src := &fakeSource{}
	s, err := New(Config{Backends: []backends.Backend{static}, BackendSource: src, Nodes: NewNodes()})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) error {
		_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{
			Name: name, VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
			Parameters: map[string]string{"storagePools": "dyn:aggr1"},
		})
		return err
	}
	deleteVol := func(id string) codes.Code {
		_, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
		return code(err)
	}

	// Before the source has the backend, its pool is unknown.
	if c := code(create("pvc-1")); c != codes.InvalidArgument {
		t.Fatalf("create on a backend not yet added: %v, want InvalidArgument", c)
	}
	src.set(nil, dyn, shadow)
	if err := create("pvc-1"); err != nil {
		t.Fatalf("create after the backend was added: %v", err)
	}
	if len(dyn.creates) != 1 {
		t.Fatalf("dynamic backend got %d creates, want 1", len(dyn.creates))
	}
	vols, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(vols.Entries) != 1 {
		t.Fatalf("ListVolumes = %v, %v; want the one volume", vols, err)
	}
	if len(shadow.creates) != 0 {
		t.Fatal("a dynamic backend named like a static one was used")
	}

	// A backend that may hold volumes but is not loaded: nothing is
	// reported gone, listing refuses, placement on the loaded ones works.
	notLoaded := errors.New(`TridentBackendConfig "nas" was Bound but fails now`)
	src.set(notLoaded)
	if c := deleteVol("pvc-1"); c != codes.Unavailable {
		t.Fatalf("DeleteVolume while the backend holding it is not loaded: %v, want Unavailable (never success)", c)
	}
	if _, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{}); code(err) != codes.Unavailable {
		t.Fatalf("ListVolumes with an incomplete set: %v, want Unavailable", err)
	}
	if _, err := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{}); code(err) != codes.Unavailable {
		t.Fatalf("ListSnapshots with an incomplete set: %v, want Unavailable", err)
	}
	if _, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "pvc-1", NodeId: "n", VolumeCapability: mountCap(rwo, "")}); code(err) != codes.Unavailable {
		t.Fatalf("ControllerPublishVolume with an incomplete set: %v, want Unavailable", err)
	}
	if _, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-2", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
	}); code(err) != codes.Unavailable {
		// pvc-2 may already exist on the backend that is not loaded.
		t.Fatalf("CreateVolume with an incomplete set: %v, want Unavailable", err)
	}

	// Loaded again: the volume is found and deleted; then it is gone.
	src.set(nil, dyn)
	if c := deleteVol("pvc-1"); c != codes.OK {
		t.Fatalf("DeleteVolume after the backend came back: %v", c)
	}
	if len(dyn.vols) != 0 {
		t.Fatal("the volume was not deleted on its backend")
	}
	// Removed from the source with nothing pending: absence is certain.
	src.set(nil)
	if c := deleteVol("pvc-1"); c != codes.OK {
		t.Fatalf("DeleteVolume of a volume that is gone: %v, want OK", c)
	}
}

func TestNoBackendYetFromSource(t *testing.T) {
	src := &fakeSource{}
	src.set(errors.New("TridentBackendConfigs are not listed yet"))
	s, err := New(Config{BackendSource: src, Nodes: NewNodes()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
	})
	if code(err) != codes.Unavailable {
		t.Fatalf("CreateVolume before the source loaded: %v, want Unavailable", err)
	}
	if _, err := s.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); code(err) != codes.Unavailable {
		t.Fatalf("DeleteVolume before the source loaded: %v, want Unavailable", err)
	}
}
