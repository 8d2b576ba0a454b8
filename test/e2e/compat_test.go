package e2e

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"text/template"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
	"github.com/ontap-csi/ontap-csi/node/tracking"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// fixtureValues fill the Trident state templates of testdata.
type fixtureValues struct {
	Staging, Target, TrackingFile string
	ClientIP                      string
	NFSServer, NFSPath            string
	HostIQN, TargetIQN, Portal    string
	OtherPortals                  []string // 26.06: iscsiPortals
	Igroup, Serial, Device        string
	FSType                        string
	LUN                           int
}

// The templates are built into the test binary: it also runs in the VM of
// test/vm, away from this directory.
//
//go:embed testdata
var testdata embed.FS

func writeFixture(t testing.TB, tmpl, dest string, v fixtureValues) {
	t.Helper()
	tp, err := template.ParseFS(testdata, "testdata/"+tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dest, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tridentState writes the node state Trident of the given version leaves
// for a staged volume published at target.
func (r *rig) tridentState(version, kind, volumeID string, v fixtureValues) {
	r.t.Helper()
	v.TrackingFile = r.TrackingFile(volumeID)
	switch version {
	case "20.10":
		writeFixture(r.t, "trident-20.10/tracking.json.tmpl", v.TrackingFile, v)
		writeFixture(r.t, "trident-20.10/volumePublishInfo-"+kind+".json.tmpl", filepath.Join(v.Staging, tracking.LegacyPublishInfoFile), v)
	case "23.01", "26.06":
		writeFixture(r.t, "trident-"+version+"/tracking-"+kind+".json.tmpl", v.TrackingFile, v)
	default:
		r.t.Fatalf("no fixtures for Trident %s", version)
	}
}

// hostTool runs a host tool as Trident's node would have run it: the test
// shim of that name, or on a real kernel the host's own.
func (r *rig) hostTool(name string, args ...string) {
	r.t.Helper()
	cmd := exec.Command(name, args...)
	if !plugintest.RealKernel() {
		cmd = exec.Command(filepath.Join(plugintest.NFSShimDir(r.t), name), args...)
		cmd.Env = append(os.Environ(), "ONTAP_SIM_URL="+r.sim.URL, "ONTAP_SIM_CA="+r.sim.CAFile, "NFS_SHIM_CLIENT_IP="+nfsClientIP)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// tridentVersions are the Trident releases whose node state is taken over:
// 20.10 (the publish info in the staging path), 23.01 (the first tracking
// file layout) and 26.06 (the current one: omitted zero values — LUN 0 has
// no iscsiLunNumber —, SANType, volumeMode, iscsiPortals, accessMode).
var tridentVersions = []string{"20.10", "23.01", "26.06"}

// adoptedVersions are the versions a test takes over: on a real kernel
// (the VM, where each costs half a minute) the oldest and the newest
// layout; 23.01's differs from 26.06's only in fields 26.06 omits or adds.
func adoptedVersions() []string {
	if plugintest.RealKernel() {
		return []string{"20.10", "26.06"}
	}
	return tridentVersions
}

// TestTridentNFSStateIsAdopted: after an image swap from one of
// tridentVersions, a volume Trident staged and published is unpublished, published
// again, watched and unstaged by ontap-csi, and nothing of it is left.
func TestTridentNFSStateIsAdopted(t *testing.T) {
	for _, version := range adoptedVersions() {
		t.Run(version, func(t *testing.T) {
			r := newRig(t, rigOptions{})
			vol := r.makeNFSVolume("pvc-2a1c0d6e-5b8f-4c1e-9f2a-6d7e8f9a0b1c", nfsClientIP)
			staging := r.makeStaging(vol.id)
			oldTarget := r.makeTargetParent("pod-old", vol.id)
			if err := os.Mkdir(oldTarget, 0o750); err != nil {
				t.Fatal(err)
			}
			// What Trident left: its NFS mount on the pod's target and its
			// state files.
			r.hostTool("mount", "-t", "nfs", "-o", "nfsvers=3", vol.context["nfsServerIp"]+":"+vol.junction, oldTarget)
			r.tridentState(version, "nas", vol.id, fixtureValues{
				Staging: staging, Target: oldTarget, ClientIP: nfsClientIP,
				NFSServer: vol.context["nfsServerIp"], NFSPath: vol.junction,
			})

			p := r.startPlugin(pluginOptions{})
			ctx := ctxT(t)
			// kubelet polls stats of the running pod's volume.
			stats, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.id, VolumePath: oldTarget})
			if err != nil {
				t.Fatalf("stats of Trident's target: %v", err)
			}
			checkStats(t, stats, 0)
			// The pod moves: its target Trident mounted goes...
			if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: oldTarget}); err != nil {
				t.Fatalf("unpublish Trident's target: %v", err)
			}
			if isMountPoint(t, oldTarget) {
				t.Fatal("Trident's target still mounted")
			}
			// ...and a new pod gets the volume from the state Trident wrote.
			newTarget := r.makeTargetParent("pod-new", vol.id)
			capability := mountCap("", snw)
			if _, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
				VolumeId: vol.id, StagingTargetPath: staging, TargetPath: newTarget, VolumeCapability: capability, PublishContext: vol.context,
			}); err != nil {
				t.Fatalf("publish from Trident's state: %v", err)
			}
			if err := os.WriteFile(filepath.Join(newTarget, "data"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(r.backingDir(vol), "data")); err != nil {
				t.Fatalf("write did not reach the volume: %v", err)
			}
			// The state is now Trident's 23.01 layout, which a 23.01+ Trident
			// reads after a rollback.
			rec := readTracking(t, r.TrackingFile(vol.id))
			if rec["nfsPath"] != vol.junction || rec["stagingTargetPath"] != staging {
				t.Fatalf("state after adoption: %v", rec)
			}
			if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: newTarget}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
				t.Fatalf("unstage Trident's volume: %v", err)
			}
			r.assertClean(vol.id)
			// kubelet removes the staging directory next; it must be empty.
			if err := os.Remove(staging); err != nil {
				t.Fatalf("kubelet could not remove the staging directory: %v", err)
			}
			if _, err := os.Stat(filepath.Join(staging, tracking.LegacyPublishInfoFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("legacy publish info left")
			}
		})
	}
}

// TestTridentISCSIStateIsAdopted: a LUN Trident attached, formatted and
// mounted directly on a pod's target (it never mounted the staging path) is
// watched, unpublished, published again (ontap-csi mounts the staging path
// then), expanded and unstaged — detached and logged out — by ontap-csi.
func TestTridentISCSIStateIsAdopted(t *testing.T) {
	for _, version := range adoptedVersions() {
		t.Run(version, func(t *testing.T) {
			r := newRig(t, rigOptions{iscsi: true})
			const size = 512 << 20
			vol := r.makeISCSIVolume("pvc-8d7c5f2e-1b3a-4c6d-9e8f-0a1b2c3d4e5f", size, "xfs")
			staging := r.makeStaging(vol.id)
			oldTarget := r.makeTargetParent("pod-old", vol.id)
			if err := os.Mkdir(oldTarget, 0o750); err != nil {
				t.Fatal(err)
			}
			// Trident's stage and publish: attach, format, mount the device
			// on the target.
			if shim := r.iscsi.host.Shim; shim != nil {
				shim.Setenv(t)
			}
			client, err := iscsi.New(iscsi.Config{
				Exec: &hostexec.Host{}, DevDir: r.iscsi.host.DevDir, SysRoot: r.iscsi.host.SysRoot, LockDir: filepath.Join(r.Root, "trident-locks"),
				DeviceTimeout: 2 * time.Minute, // udev and multipathd under TCG on a real kernel
			})
			if err != nil {
				t.Fatal(err)
			}
			target := iscsi.Target{IQN: r.iscsi.target, Portals: r.iscsi.portals, LUN: int32(vol.lunID), Serial: vol.lun.Serial}
			dev, err := client.Attach(context.Background(), target)
			if err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"mkfs.xfs", "-f", dev.Path}, {"mount", "-t", "xfs", dev.Path, oldTarget}} {
				if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %v\n%s", cmd, err, out)
				}
			}
			if err := os.WriteFile(filepath.Join(oldTarget, "written-under-trident"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			r.tridentState(version, "san", vol.id, fixtureValues{
				Staging: staging, Target: oldTarget, ClientIP: nfsClientIP, HostIQN: r.iscsi.iqn,
				TargetIQN: r.iscsi.target, Portal: r.iscsi.portals[0], OtherPortals: r.iscsi.portals[1:], Igroup: r.iscsi.igroup,
				Serial: vol.lun.Serial, Device: dev.Path, FSType: "xfs", LUN: vol.lunID,
			})
			p := r.startPlugin(pluginOptions{})
			ctx := ctxT(t)
			stats, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.id, VolumePath: oldTarget})
			if err != nil {
				t.Fatalf("stats of Trident's target: %v", err)
			}
			checkStats(t, stats, 1)

			newTarget := r.makeTargetParent("pod-new", vol.id)
			capability := mountCap("xfs", snw)
			if _, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
				VolumeId: vol.id, StagingTargetPath: staging, TargetPath: newTarget, VolumeCapability: capability,
			}); err != nil {
				t.Fatalf("publish from Trident's state: %v", err)
			}
			if _, err := os.Stat(filepath.Join(newTarget, "written-under-trident")); err != nil {
				t.Fatalf("data written under Trident: %v", err)
			}
			if !isMountPoint(t, staging) {
				t.Fatal("the staging path was not mounted on adoption")
			}
			if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: oldTarget}); err != nil {
				t.Fatalf("unpublish Trident's target: %v", err)
			}
			r.resizeLUN(vol.lun, 2*size)
			nodeExpandAndCheck(t, p, vol.id, newTarget, capability, size, nil)
			if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: newTarget}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
				t.Fatalf("unstage Trident's volume: %v", err)
			}
			r.assertClean(vol.id)
			if err := os.Remove(staging); err != nil {
				t.Fatalf("kubelet could not remove the staging directory: %v", err)
			}
		})
	}
}
