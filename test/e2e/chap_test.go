package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestISCSICHAP stages LUNs behind CHAP. One-way: the SVM requires the
// node's user and secret (a publish context with useCHAP and no target
// credentials, as a Trident controller of another setup may hand over); a
// wrong secret is PermissionDenied and leaves nothing, the right one
// stages. Mutual: a backend with useCHAP, whose controller sets the SVM's
// inbound and outbound credentials and publishes all four; the node
// authenticates the target too.
func TestISCSICHAP(t *testing.T) {
	t.Run("one-way", func(t *testing.T) {
		r := newRig(t, rigOptions{iscsi: true})
		p := r.startPlugin(pluginOptions{})
		r.setCHAP(map[string]any{"inbound": map[string]any{"user": "node-user", "password": "node-secret-0123"}})
		vol := r.makeISCSIVolume("pvc-chap-one-way", 64<<20, "ext4")
		vol.context["useCHAP"] = "true"
		vol.context["iscsiUsername"] = "node-user"
		vol.context["iscsiInitiatorSecret"] = "wrong-secret-0123"
		staging := r.makeStaging(vol.id)
		stage := &csi.NodeStageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: mountCap("ext4", snw), PublishContext: vol.context}
		if _, err := p.Node.NodeStageVolume(ctxT(t), stage); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("NodeStageVolume with a wrong CHAP secret: %v, want PermissionDenied", err)
		}
		if _, err := p.Node.NodeUnstageVolume(ctxT(t), &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
			t.Fatalf("NodeUnstageVolume after the refused stage: %v", err)
		}
		r.assertClean(vol.id)

		vol.context["iscsiInitiatorSecret"] = "node-secret-0123"
		r.stageWriteUnstage(p, vol.id, staging, stage.VolumeCapability, vol.context)
	})
	t.Run("mutual", func(t *testing.T) {
		r := newRig(t, rigOptions{iscsi: true})
		r.backend = plugintest.WriteBackendConfig(t, r.Root, r.sim.Simulator, config.DriverONTAPSAN, map[string]any{
			"useCHAP": true, "chapUsername": "node-user", "chapInitiatorSecret": "node-secret-0123",
			"chapTargetUsername": "target-user", "chapTargetInitiatorSecret": "target-secret-0123",
		})
		p := r.startPlugin(pluginOptions{})
		capability := mountCap("ext4", snw)
		vol, pc := r.createAndPublish(p, "pvc-chap-mutual", 64<<20, capability)
		if pc["useCHAP"] != "true" || pc["iscsiTargetUsername"] != "target-user" || pc["iscsiTargetSecret"] == "" {
			t.Fatalf("publish context of a useCHAP backend: %v", pc)
		}
		r.stageWriteUnstage(p, vol, r.makeStaging(vol), capability, pc)
		r.unpublishAndDelete(p, vol)
	})
}

// setCHAP sets the SVM's iSCSI security for the node's initiator.
func (r *rig) setCHAP(chap map[string]any) {
	r.t.Helper()
	code, out, err := r.sim.Do("POST", "/api/protocols/san/iscsi/credentials", map[string]any{
		"svm": map[string]any{"name": r.sim.Info().SVM}, "initiator": r.iscsi.iqn, "authentication_type": "chap", "chap": chap,
	})
	if err != nil || code >= 300 {
		r.t.Fatalf("iSCSI credentials: %d %v %v", code, out, err)
	}
}

// stageWriteUnstage stages the volume, writes to its file system, and
// unstages it: nothing may be left.
func (r *rig) stageWriteUnstage(p *plugintest.Plugin, vol, staging string, capability *csi.VolumeCapability, pc map[string]string) {
	r.t.Helper()
	if _, err := p.Node.NodeStageVolume(ctxT(r.t), &csi.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc,
	}); err != nil {
		r.t.Fatalf("NodeStageVolume: %v", err)
	}
	r.iscsi.attachedOnce(r.t, pc["iscsiLunSerial"], len(r.iscsi.portals))
	if err := os.WriteFile(filepath.Join(staging, "data"), []byte("behind CHAP"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if _, err := p.Node.NodeUnstageVolume(ctxT(r.t), &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
		r.t.Fatalf("NodeUnstageVolume: %v", err)
	}
	r.assertClean(vol)
}
