package controller

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

func TestControllerPublishVolume(t *testing.T) {
	s, nas, san := newService(t)
	nas.vols["file"] = &backends.Volume{ID: "file"}
	san.vols["lun"] = &backends.Volume{ID: "lun", AccessType: backends.AccessMount, FSType: "ext4"}
	for _, tc := range []struct {
		name string
		req  *csi.ControllerPublishVolumeRequest
		want codes.Code
	}{
		{"no volume", &csi.ControllerPublishVolumeRequest{NodeId: "node-1", VolumeCapability: mountCap(rwo, "")}, codes.InvalidArgument},
		{"no node", &csi.ControllerPublishVolumeRequest{VolumeId: "file", VolumeCapability: mountCap(rwo, "")}, codes.InvalidArgument},
		{"no capability", &csi.ControllerPublishVolumeRequest{VolumeId: "file", NodeId: "node-1"}, codes.InvalidArgument},
		{"unknown volume", &csi.ControllerPublishVolumeRequest{VolumeId: "x", NodeId: "node-1", VolumeCapability: mountCap(rwo, "")}, codes.NotFound},
		{"unknown node", &csi.ControllerPublishVolumeRequest{VolumeId: "file", NodeId: "node-9", VolumeCapability: mountCap(rwo, "")}, codes.NotFound},
		{"capability the volume cannot serve", &csi.ControllerPublishVolumeRequest{VolumeId: "lun", NodeId: "node-1", VolumeCapability: blockCap(rwo)}, codes.InvalidArgument},
		{"file", &csi.ControllerPublishVolumeRequest{VolumeId: "file", NodeId: "node-1", VolumeCapability: mountCap(rwx, "")}, codes.OK},
		{"lun", &csi.ControllerPublishVolumeRequest{VolumeId: "lun", NodeId: "node-1", VolumeCapability: mountCap(rwo, "ext4")}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ControllerPublishVolume(context.Background(), tc.req)
			if code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err == nil && (resp.PublishContext["node"] != "node-1" || resp.PublishContext["iqn"] == "") {
				t.Errorf("the backend did not get the node's info: %v", resp.PublishContext)
			}
		})
	}
}

func TestControllerUnpublishVolume(t *testing.T) {
	s, nas, _ := newService(t)
	ctx := context.Background()
	nas.vols["file"] = &backends.Volume{ID: "file"}
	nas.published["file"] = []string{"node-1", "gone-node"}
	if _, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{NodeId: "node-1"}); code(err) != codes.InvalidArgument {
		t.Errorf("no volume ID: %v", err)
	}
	if _, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "gone", NodeId: "node-1"}); err != nil {
		t.Errorf("deleted volume: %v, want OK", err)
	}
	// A node that left the cluster is unpublished by name (Trident #691).
	if _, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "file", NodeId: "gone-node"}); err != nil {
		t.Errorf("unknown node: %v, want OK", err)
	}
	if _, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "file", NodeId: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if got := nas.published["file"]; len(got) != 0 {
		t.Errorf("still published to %v", got)
	}
}

func TestMountOptions(t *testing.T) {
	got := mountOptions([]string{"nfsvers=4.1", " hard, timeo=600 ", ""})
	if want := []string{"nfsvers=4.1", "hard", "timeo=600"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNodes(t *testing.T) {
	n := NewNodes()
	ips := []string{"10.0.0.1"}
	n.Set(backends.Node{Name: "a", IQN: "iqn.x", IPs: ips})
	ips[0] = "changed"
	info, err := n.Node(context.Background(), "a")
	if err != nil || info.IPs[0] != "10.0.0.1" {
		t.Fatalf("registry shares the caller's slice: %v %v", info, err)
	}
	n.Remove("a")
	if _, err := n.Node(context.Background(), "a"); code(toStatus(err)) != codes.NotFound {
		t.Errorf("removed node: %v", err)
	}
}
