package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

// fakeRecords is an in-memory VolumeRecords.
type fakeRecords struct {
	recs  map[string]VolumeRecord
	err   error
	reads int
}

func (f *fakeRecords) Record(_ context.Context, id string) (VolumeRecord, error) {
	f.reads++
	return f.recs[id], f.err
}

// A volume whose ONTAP name its records give (a nameTemplate's, an import
// kept under its own name) is found there; Trident's unmanaged import is
// served but never changed on ONTAP; records that cannot be read fail the
// call (Unavailable) rather than call the volume gone.
func TestVolumeRecords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		own          string // the volume's own ONTAP name; "" the naming rule's
		rec          VolumeRecord
		recErr       error
		expand       codes.Code
		snapshot     codes.Code
		deleteCode   codes.Code
		deletedOnONT bool
	}{
		{"naming rule", "", VolumeRecord{}, nil, codes.OK, codes.OK, codes.OK, true},
		{"own name recorded", "apps_data", VolumeRecord{InternalName: "apps_data"}, nil, codes.OK, codes.OK, codes.OK, true},
		{"own name not recorded", "apps_data", VolumeRecord{}, nil, codes.NotFound, codes.NotFound, codes.OK, false},
		{"unmanaged import", "legacy", VolumeRecord{InternalName: "legacy", NotManaged: true}, nil,
			codes.FailedPrecondition, codes.FailedPrecondition, codes.OK, false},
		{"records unreadable", "", VolumeRecord{}, errors.New("connection refused"),
			codes.Unavailable, codes.Unavailable, codes.Unavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, _ := newService(t)
			fr := &fakeRecords{recs: map[string]VolumeRecord{"pvc-1": tc.rec}, err: tc.recErr}
			s.records = fr
			nas.vols["pvc-1"] = &backends.Volume{ID: "pvc-1", Backend: "nas1", SizeBytes: 1 << 30,
				AccessType: backends.AccessMount, Context: map[string]string{fakeOwnName: tc.own}}
			_, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-1",
				CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}})
			if code(err) != tc.expand {
				t.Errorf("expand: %v, want %v", err, tc.expand)
			}
			_, err = s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "pvc-1"})
			if code(err) != tc.snapshot {
				t.Errorf("snapshot: %v, want %v", err, tc.snapshot)
			}
			if err == nil {
				delete(nas.snaps, "pvc-1/snap-1")
			}
			_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"})
			if code(err) != tc.deleteCode {
				t.Errorf("delete: %v, want %v", err, tc.deleteCode)
			}
			if _, there := nas.vols["pvc-1"]; there == tc.deletedOnONT {
				t.Errorf("on the backend after delete: %v", there)
			}
		})
	}
}

// A record is read once per volume, until the volume is deleted.
func TestVolumeRecordsCached(t *testing.T) {
	s, nas, _ := newService(t)
	fr := &fakeRecords{recs: map[string]VolumeRecord{"pvc-1": {InternalName: "apps_data"}}}
	s.records = fr
	nas.vols["pvc-1"] = &backends.Volume{ID: "pvc-1", Backend: "nas1", SizeBytes: 1 << 30,
		AccessType: backends.AccessMount, Context: map[string]string{fakeOwnName: "apps_data"}}
	ctx := context.Background()
	for range 3 {
		if _, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-1",
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	if fr.reads != 1 {
		t.Errorf("%d record reads for 3 calls", fr.reads)
	}
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil || fr.reads != 2 {
		t.Errorf("after delete: %v, %d reads (the record is read again)", err, fr.reads)
	}
}
