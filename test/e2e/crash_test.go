package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestCrashDuringISCSIStageAndUnstage SIGKILLs the node plugin at each step
// of iSCSI NodeStage and NodeUnstage (the crash points of a plugin built
// with -tags crashpoints), starts a new plugin, retries the call as kubelet
// would, and checks that the retry completes the operation with the LUN
// attached once and mounted once — or, for unstage, nothing left.
func TestCrashDuringISCSIStageAndUnstage(t *testing.T) {
	r := newRig(t, rigOptions{iscsi: true})
	stageSteps, unstageSteps := discoverCrashPoints(t, r)
	if len(stageSteps) < 4 || len(unstageSteps) < 2 {
		t.Fatalf("crash points found: stage %v, unstage %v", stageSteps, unstageSteps)
	}
	t.Logf("stage steps %v, unstage steps %v", stageSteps, unstageSteps)
	capability := mountCap("ext4", snw)

	for i, step := range stageSteps {
		t.Run("stage/"+step, func(t *testing.T) {
			r := r.in(t)
			vol := r.makeISCSIVolume(fmt.Sprintf("pvc-crash-stage-%d", i), 64<<20, "ext4")
			staging := r.makeStaging(vol.id)
			stage := &csi.NodeStageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context}

			p := r.startPlugin(pluginOptions{crashAt: step})
			if _, err := p.Node.NodeStageVolume(ctxT(t), stage); err == nil {
				t.Fatal("the call survived its crash point")
			}
			p.WaitKilled(t)
			if step == "NodeStageVolume/formatting" {
				// What an mkfs killed half way leaves: data, and no
				// file system blkid knows yet.
				scribble(t, readTracking(t, r.TrackingFile(vol.id)))
			}

			p = r.startPlugin(pluginOptions{})
			if _, err := p.Node.NodeStageVolume(ctxT(t), stage); err != nil {
				t.Fatalf("retried NodeStageVolume: %v", err)
			}
			r.iscsi.attachedOnce(t, vol.lun.Serial, len(r.iscsi.portals))
			if n := plugintest.MountsAt(t, staging); n != 1 {
				t.Fatalf("staging path mounted %d times", n)
			}
			// The file system is usable.
			if err := os.WriteFile(filepath.Join(staging, "after-crash"), []byte("ok"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Node.NodeUnstageVolume(ctxT(t), &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
				t.Fatal(err)
			}
			r.assertClean(vol.id)
			p.Stop()
		})
	}

	for i, step := range unstageSteps {
		t.Run("unstage/"+step, func(t *testing.T) {
			r := r.in(t)
			vol := r.makeISCSIVolume(fmt.Sprintf("pvc-crash-unstage-%d", i), 64<<20, "ext4")
			staging := r.makeStaging(vol.id)
			p := r.startPlugin(pluginOptions{})
			if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
				VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context,
			}); err != nil {
				t.Fatal(err)
			}
			p.Stop()
			unstage := &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}

			p = r.startPlugin(pluginOptions{crashAt: step})
			if _, err := p.Node.NodeUnstageVolume(ctxT(t), unstage); err == nil {
				t.Fatal("the call survived its crash point")
			}
			p.WaitKilled(t)

			p = r.startPlugin(pluginOptions{})
			if _, err := p.Node.NodeUnstageVolume(ctxT(t), unstage); err != nil {
				t.Fatalf("retried NodeUnstageVolume: %v", err)
			}
			r.assertClean(vol.id)
			p.Stop()
		})
	}
}

// scribble writes into the first MiB of the device the tracking record
// names, where mkfs writes first.
func scribble(t *testing.T, rec map[string]any) {
	t.Helper()
	dev, _ := rec["devicePath"].(string)
	if dev == "" || rec["ontapCsiFormatting"] == nil {
		t.Fatalf("the record of a stage killed in its format names no device or no format: %v", rec)
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(strings.Repeat("mkfs was here ", 300)), 8192); err != nil {
		t.Fatal(err)
	}
}

// discoverCrashPoints runs one stage and unstage with a plugin that logs the
// crash points it passes, and returns them in order.
func discoverCrashPoints(t *testing.T, r *rig) (stage, unstage []string) {
	t.Helper()
	logFile := filepath.Join(r.Root, "crashpoints.log")
	vol := r.makeISCSIVolume("pvc-crash-discover", 64<<20, "ext4")
	staging := r.makeStaging(vol.id)
	p := r.startPlugin(pluginOptions{crashLog: logFile})
	if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: mountCap("ext4", snw), PublishContext: vol.context,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Node.NodeUnstageVolume(ctxT(t), &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	r.assertClean(vol.id)
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range strings.Fields(string(data)) {
		switch {
		case strings.HasPrefix(step, "NodeStageVolume/") && !slices.Contains(stage, step):
			stage = append(stage, step)
		case strings.HasPrefix(step, "NodeUnstageVolume/") && !slices.Contains(unstage, step):
			unstage = append(unstage, step)
		}
	}
	return stage, unstage
}
