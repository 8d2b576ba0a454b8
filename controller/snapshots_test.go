package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

func TestSnapshots(t *testing.T) {
	s, nas, san := newService(t)
	ctx := context.Background()
	nas.vols["v1"] = &backends.Volume{ID: "v1", SizeBytes: gib}
	san.vols["v2"] = &backends.Volume{ID: "v2", SizeBytes: gib}

	for _, tc := range []struct {
		name string
		req  *csi.CreateSnapshotRequest
		want codes.Code
	}{
		{"no name", &csi.CreateSnapshotRequest{SourceVolumeId: "v1"}, codes.InvalidArgument},
		{"no source", &csi.CreateSnapshotRequest{Name: "s"}, codes.InvalidArgument},
		{"unknown source", &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "x"}, codes.NotFound},
		{"create", &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "v1"}, codes.OK},
		{"again", &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "v1"}, codes.OK},
		{"same name on another volume", &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "v2"}, codes.AlreadyExists},
		{"second", &csi.CreateSnapshotRequest{Name: "s2", SourceVolumeId: "v2"}, codes.OK},
	} {
		resp, err := s.CreateSnapshot(ctx, tc.req)
		if code(err) != tc.want {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if err == nil && resp.Snapshot.SnapshotId != tc.req.SourceVolumeId+"/"+tc.req.Name {
			t.Errorf("%s: ID %s", tc.name, resp.Snapshot.SnapshotId)
		}
	}
	if n := len(nas.snaps) + len(san.snaps); n != 2 {
		t.Errorf("%d snapshots, want 2", n)
	}

	list := func(req *csi.ListSnapshotsRequest) []string {
		t.Helper()
		resp, err := s.ListSnapshots(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range resp.Entries {
			ids = append(ids, e.Snapshot.SnapshotId)
		}
		return ids
	}
	for _, tc := range []struct {
		req  *csi.ListSnapshotsRequest
		want string
	}{
		{&csi.ListSnapshotsRequest{}, "[v1/s1 v2/s2]"},
		{&csi.ListSnapshotsRequest{SnapshotId: "v2/s2"}, "[v2/s2]"},
		{&csi.ListSnapshotsRequest{SnapshotId: "v2/nope"}, "[]"},
		{&csi.ListSnapshotsRequest{SnapshotId: "garbage"}, "[]"},
		{&csi.ListSnapshotsRequest{SourceVolumeId: "v1"}, "[v1/s1]"},
		{&csi.ListSnapshotsRequest{SourceVolumeId: "unknown"}, "[]"},
		{&csi.ListSnapshotsRequest{SnapshotId: "v1/s1", SourceVolumeId: "v2"}, "[]"},
		{&csi.ListSnapshotsRequest{MaxEntries: 1}, "[v1/s1]"},
	} {
		if got := fmt.Sprint(list(tc.req)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.req, got, tc.want)
		}
	}
	first, _ := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 1})
	if got := fmt.Sprint(list(&csi.ListSnapshotsRequest{StartingToken: first.NextToken})); got != "[v2/s2]" {
		t.Errorf("second page %s", got)
	}
	if _, err := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "invalid-token"}); code(err) != codes.Aborted {
		t.Errorf("bad token: %v", err)
	}

	if _, err := s.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: "v1/s1"}); err != nil {
		t.Errorf("get: %v", err)
	}
	for _, id := range []string{"v1/none", "none/s1", "garbage"} {
		if _, err := s.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: id}); code(err) != codes.NotFound {
			t.Errorf("get %s: %v", id, err)
		}
	}
	for _, id := range []string{"reallyfakesnapshotid", "v1/none", "none/s1", "v1/s1", "v1/s1"} {
		if _, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id}); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	}
	if _, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{}); code(err) != codes.InvalidArgument {
		t.Errorf("delete without ID: %v", err)
	}
	if got := fmt.Sprint(list(&csi.ListSnapshotsRequest{})); got != "[v2/s2]" {
		t.Errorf("after delete: %s", got)
	}
}

// A snapshot is not cut while another operation holds its source volume
// (a delete, an expand, a snapshot delete): the CO retries on Aborted.
func TestCreateSnapshotWaitsForItsVolume(t *testing.T) {
	s, nas, _ := newService(t)
	nas.vols["v1"] = &backends.Volume{ID: "v1", SizeBytes: gib}
	req := &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "v1"}
	unlock, ok := s.locks.TryLock(volumeKey("v1"))
	if !ok {
		t.Fatal("volume lock taken")
	}
	if _, err := s.CreateSnapshot(context.Background(), req); code(err) != codes.Aborted {
		t.Fatalf("snapshot of a busy volume: %v, want Aborted", err)
	}
	if len(nas.snaps) != 0 {
		t.Fatalf("snapshot cut while the volume was busy: %v", nas.snaps)
	}
	unlock()
	if _, err := s.CreateSnapshot(context.Background(), req); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestParseSnapshotID(t *testing.T) {
	for _, tc := range []struct {
		id, vol, snap string
		ok            bool
	}{
		{"pvc-1/snapshot-2", "pvc-1", "snapshot-2", true},
		{"a/b/c", "a/b", "c", true},
		{"noslash", "", "", false},
		{"/snap", "", "", false},
		{"vol/", "", "", false},
		{"", "", "", false},
	} {
		vol, snap, ok := parseSnapshotID(tc.id)
		if vol != tc.vol || snap != tc.snap || ok != tc.ok {
			t.Errorf("%q: %q %q %v", tc.id, vol, snap, ok)
		}
	}
}
