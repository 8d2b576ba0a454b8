package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// groupService serves two NAS volumes and a SAN one.
func groupService(t *testing.T) (*Service, *fakeBackend, *fakeBackend) {
	t.Helper()
	s, nas, san := newService(t)
	for _, v := range []struct{ name, backendType string }{{"a", "ontap-nas"}, {"b", "ontap-nas"}, {"c", "ontap-san"}} {
		if err := createOn(t, s, v.name, v.backendType, nil); err != nil {
			t.Fatal(err)
		}
	}
	return s, nas, san
}

func TestCreateVolumeGroupSnapshot(t *testing.T) {
	long := strings.Repeat("x", 129)
	many := make([]string, maxGroupMembers+1)
	for i := range many {
		many[i] = "v" + strings.Repeat("1", i+1)
	}
	for _, tc := range []struct {
		name   string
		req    *csi.CreateVolumeGroupSnapshotRequest
		want   codes.Code
		groups int // group snapshots the backend takes
	}{
		{"no name", &csi.CreateVolumeGroupSnapshotRequest{SourceVolumeIds: []string{"a"}}, codes.InvalidArgument, 0},
		{"name too long", &csi.CreateVolumeGroupSnapshotRequest{Name: long, SourceVolumeIds: []string{"a"}}, codes.InvalidArgument, 0},
		{"no volumes", &csi.CreateVolumeGroupSnapshotRequest{Name: "g"}, codes.InvalidArgument, 0},
		{"too many volumes", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: many}, codes.InvalidArgument, 0},
		{"volume twice", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a", "a"}}, codes.InvalidArgument, 0},
		{"empty volume ID", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a", ""}}, codes.InvalidArgument, 0},
		{"unknown parameter", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a"}, Parameters: map[string]string{"x": "y"}}, codes.InvalidArgument, 0},
		{"unknown volume", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a", "nope"}}, codes.NotFound, 0},
		{"two backends", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a", "c"}}, codes.InvalidArgument, 0},
		{"two volumes", &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"b", "a"},
			Parameters: map[string]string{"csi.storage.k8s.io/volumegroupsnapshot/name": "g"}}, codes.OK, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, san := groupService(t)
			resp, err := s.CreateVolumeGroupSnapshot(context.Background(), tc.req)
			if code(err) != tc.want {
				t.Fatalf("got %v (%v), want %v", code(err), err, tc.want)
			}
			if nas.groups+san.groups != tc.groups {
				t.Fatalf("%d group snapshots taken, want %d", nas.groups+san.groups, tc.groups)
			}
			if err != nil {
				return
			}
			g := resp.GroupSnapshot
			if g.GroupSnapshotId != "g" || !g.ReadyToUse || len(g.Snapshots) != 2 || g.Snapshots[0].SnapshotId != "a/g" ||
				g.Snapshots[1].SnapshotId != "b/g" || g.Snapshots[0].GroupSnapshotId != "g" || g.CreationTime == nil {
				t.Fatalf("group snapshot %v", g)
			}
		})
	}
}

// TestGroupSnapshotLifecycle: a repeated create returns the group, the same
// name on other volumes is AlreadyExists, Get and Delete find the members
// by the group's ID and check the snapshot IDs the CO sends, and a member
// restores like any snapshot.
func TestGroupSnapshotLifecycle(t *testing.T) {
	s, nas, _ := groupService(t)
	ctx := context.Background()
	create := func(ids ...string) (*csi.CreateVolumeGroupSnapshotResponse, error) {
		return s.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: ids})
	}
	for range 2 {
		if _, err := create("a", "b"); err != nil {
			t.Fatal(err)
		}
	}
	if nas.groups != 1 {
		t.Errorf("%d group snapshots taken for one group", nas.groups)
	}
	if _, err := create("a"); code(err) != codes.AlreadyExists {
		t.Errorf("same name, other volumes: %v, want AlreadyExists", err)
	}
	for _, tc := range []struct {
		name string
		id   string
		sids []string
		want codes.Code
	}{
		{"no ID", "", nil, codes.InvalidArgument},
		{"unknown group", "nope", nil, codes.NotFound},
		{"members as the CO knows them", "g", []string{"a/g", "b/g"}, codes.OK},
		{"a snapshot that is not a member", "g", []string{"a/g", "c/g"}, codes.InvalidArgument},
	} {
		_, err := s.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: tc.id, SnapshotIds: tc.sids})
		if code(err) != tc.want {
			t.Errorf("get, %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "b/g"}}}})
	if err != nil {
		t.Fatalf("restore from a member: %v", err)
	}
	if _, err := s.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"x/g"}}); code(err) != codes.InvalidArgument {
		t.Errorf("delete naming a non-member: %v, want InvalidArgument", err)
	}
	if len(nas.snaps) != 2 {
		t.Fatalf("a refused delete removed snapshots: %v", nas.snaps)
	}
	for range 2 {
		if _, err := s.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"a/g", "b/g"}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(nas.snaps) != 0 {
		t.Fatalf("snapshots left: %v", nas.snaps)
	}
	if _, err := s.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "g"}); code(err) != codes.NotFound {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}
