package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
	"github.com/ontap-csi/ontap-csi/node/tracking"
	"github.com/ontap-csi/ontap-csi/node/volumelock"
)

func mountCapability(fs string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

const snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code %v (%v), want %v", got, err, code)
	}
}

func (ts *testService) stageISCSI(t *testing.T, vol, fs string) string {
	t.Helper()
	staging := ts.staging(t, vol)
	_, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: staging, VolumeCapability: mountCapability(fs, snw),
		PublishContext: with(iscsiContext, "iscsiLunSerial", "serial-"+vol),
	})
	if err != nil {
		t.Fatalf("stage: %v", err)
	}
	return staging
}

// TestUnstageUnmountsUnderTheDeadMapWatch: the unmount of a staged LUN
// writes, and waits for ever on a map that queues I/O with no path (a LUN
// unmapped on ONTAP): it runs under the initiator's watch of the LUN's
// maps (ReleaseDeadMapsDuring), which gets it the staging mount, then the
// detach runs.
func TestUnstageUnmountsUnderTheDeadMapWatch(t *testing.T) {
	ts := newTestService(t)
	staging := ts.stageISCSI(t, "pvc-1", "ext4")
	var released []string
	ts.ini.onRelease = func(tgt iscsi.Target) {
		if ts.host.mountedAt(staging) == nil {
			t.Error("the unmount ran before the watch began")
		}
		released = append(released, tgt.Serial)
	}
	if _, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if len(released) != 1 || released[0] != "serial-pvc-1" || ts.ini.detach != 1 || ts.host.mountedAt(staging) != nil {
		t.Fatalf("watched %v, %d detaches, staging mounted: %v", released, ts.ini.detach, ts.host.mountedAt(staging) != nil)
	}
}

func TestStageISCSIFormatsOnceAndIsIdempotent(t *testing.T) {
	ts := newTestService(t)
	staging := ts.stageISCSI(t, "pvc-1", "xfs")
	ts.stageISCSI(t, "pvc-1", "xfs")
	if n := ts.host.count("mkfs.xfs"); n != 1 {
		t.Fatalf("mkfs ran %d times", n)
	}
	if m := ts.host.mountedAt(staging); m == nil || m.fsType != "xfs" {
		t.Fatalf("staging mount %+v", m)
	}
	if n := ts.host.count("mount"); n != 1 {
		t.Fatalf("%d mounts for two stages", n)
	}
	info, err := ts.state.Read("pvc-1")
	if err != nil || info.Device() == "" || info.FilesystemType != "xfs" || info.StagingTargetPath != staging {
		t.Fatalf("state %+v, %v", info, err)
	}
	// Staged as xfs, asked again as ext4: the spec's "incompatible".
	_, err = ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: mountCapability("ext4", snw),
		PublishContext: with(iscsiContext, "iscsiLunSerial", "serial-pvc-1"),
	})
	wantCode(t, err, codes.AlreadyExists)
}

// The emptiness rule: a device is formatted only when blkid finds nothing
// and its first and last MiB are zeros.
func TestStageNeverFormatsADeviceThatIsNotProvablyEmpty(t *testing.T) {
	tests := []struct {
		name  string
		setup func(dev string, h *fakeHost)
	}{
		{"data in the first MiB", func(dev string, _ *fakeHost) { writeAt(t, dev, 4096, "LVM2 001") }},
		{"data in the last MiB", func(dev string, _ *fakeHost) { writeAt(t, dev, (4<<20)-512, "EFI PART") }},
		{"another file system", func(dev string, h *fakeHost) { h.fs[dev] = "xfs" }},
		{"a partition table", func(dev string, h *fakeHost) { h.fs[dev] = "PTTYPE=gpt" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService(t)
			dev, _ := ts.ini.Attach(context.Background(), iscsiTarget(&tracking.PublishInfo{IscsiLunSerial: "serial-pvc-1"}))
			tc.setup(dev.Path, ts.host)
			staging := ts.staging(t, "pvc-1")
			_, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
				VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: mountCapability("ext4", snw),
				PublishContext: with(iscsiContext, "iscsiLunSerial", "serial-pvc-1"),
			})
			wantCode(t, err, codes.FailedPrecondition)
			if n := ts.host.count("mkfs.ext4"); n != 0 {
				t.Fatal("formatted a device that was not provably empty")
			}
			if ts.host.mountedAt(staging) != nil {
				t.Fatal("mounted it anyway")
			}
		})
	}
}

// A stage that died in mkfs left its record saying so: the retry formats
// the LUN again, although the interrupted mkfs left data that makes it look
// used. The record must name this LUN; any other leaves the rule intact.
func TestStageResumesAnInterruptedFormat(t *testing.T) {
	for _, tc := range []struct {
		name, marker string
		want         codes.Code
	}{
		{"this LUN's format", "serial-pvc-1", codes.OK},
		{"another LUN's format", "serial-other", codes.FailedPrecondition},
		{"no format recorded", "", codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService(t)
			dev, _ := ts.ini.Attach(context.Background(), iscsiTarget(&tracking.PublishInfo{IscsiLunSerial: "serial-pvc-1"}))
			writeAt(t, dev.Path, 1024, "half a superblock") // what mkfs left when it was killed
			staging := ts.staging(t, "pvc-1")
			pc := with(iscsiContext, "iscsiLunSerial", "serial-pvc-1")
			rec := &tracking.Info{PublishInfo: tracking.PublishInfo{IscsiLunSerial: "serial-pvc-1", DevicePath: dev.Path},
				StagingTargetPath: staging, FormattingSerial: tc.marker}
			if err := ts.state.Write("pvc-1", rec); err != nil {
				t.Fatal(err)
			}
			_, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
				VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: mountCapability("ext4", snw), PublishContext: pc,
			})
			wantCode(t, err, tc.want)
			if formatted := ts.host.count("mkfs.ext4") == 1; formatted != (tc.want == codes.OK) {
				t.Fatalf("mkfs ran %d times", ts.host.count("mkfs.ext4"))
			}
			info, err := ts.state.Read("pvc-1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == codes.OK && (info.FormattingSerial != "" || ts.host.mountedAt(staging) == nil) {
				t.Fatalf("after the stage: record %+v, mounted %v", info, ts.host.mountedAt(staging))
			}
		})
	}
}

func writeAt(t *testing.T, path string, off int64, data string) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		t.Fatal(err)
	}
}

func (ts *testService) publish(vol, staging, target string, mode csi.VolumeCapability_AccessMode_Mode, ro bool) error {
	_, err := ts.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: vol, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCapability("", mode), Readonly: ro,
	})
	return err
}

func TestPublishISCSI(t *testing.T) {
	ts := newTestService(t)
	staging := ts.stageISCSI(t, "pvc-1", "ext4")
	a, b := ts.target(t, "pod-a", "pvc-1"), ts.target(t, "pod-b", "pvc-1")

	for i := 0; i < 2; i++ {
		if err := ts.publish("pvc-1", staging, a, snw, false); err != nil {
			t.Fatal(err)
		}
	}
	if m := ts.host.mountedAt(a); m == nil || m.ro || m.minor != ts.host.mountedAt(staging).minor {
		t.Fatalf("target mount %+v is not a bind of the staging mount", m)
	}
	// Read-only and read-write publishes of one file system coexist (they
	// would not with Trident's direct device mounts).
	if err := ts.publish("pvc-1", staging, b, snw, true); err != nil {
		t.Fatal(err)
	}
	if m := ts.host.mountedAt(b); m == nil || !m.ro {
		t.Fatalf("read-only target %+v", m)
	}
	// The same target asked read-write now: incompatible.
	wantCode(t, ts.publish("pvc-1", staging, b, snw, false), codes.AlreadyExists)

	// Unstage refuses while published, then works once unpublished.
	_, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging})
	wantCode(t, err, codes.FailedPrecondition)
	for _, tp := range []string{a, b, a} {
		if _, err := ts.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: tp}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("target %s left: %v", tp, err)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
	}
	if ts.host.mountedAt(staging) != nil || len(ts.ini.devices) != 0 {
		t.Fatal("unstage left a mount or a device")
	}
	if _, err := ts.state.Read("pvc-1"); !errors.Is(err, tracking.ErrNotFound) {
		t.Fatalf("tracking file left: %v", err)
	}
}

func TestPublishConflicts(t *testing.T) {
	ts := newTestService(t)
	staging := ts.stageISCSI(t, "pvc-1", "ext4")
	other := ts.stageISCSI(t, "pvc-2", "ext4")
	// Targets not named after pvc-1, as kubelet would name them, so only
	// the record and the mount can tell whose they are.
	a, b := ts.target(t, "pod-a", "shared"), ts.target(t, "pod-b", "pvc-1")

	// Another volume is mounted at the target: a conflict between volumes
	// (AlreadyExists is this volume's own incompatible publish).
	if err := ts.publish("pvc-2", other, a, snw, false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, ts.publish("pvc-1", staging, a, snw, false), codes.FailedPrecondition)

	// SINGLE_NODE_SINGLE_WRITER at a second target.
	ssw := csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	if err := ts.publish("pvc-1", staging, b, ssw, false); err != nil {
		t.Fatal(err)
	}
	c := ts.target(t, "pod-c", "pvc-1")
	wantCode(t, ts.publish("pvc-1", staging, c, ssw, false), codes.FailedPrecondition)
	if _, err := os.Stat(c); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("refused publish created the target")
	}

	// Not staged, staged elsewhere, no staging path.
	wantCode(t, ts.publish("pvc-3", staging, c, snw, false), codes.FailedPrecondition)
	wantCode(t, ts.publish("pvc-1", other, c, snw, false), codes.FailedPrecondition)
	wantCode(t, ts.publish("pvc-1", "", c, snw, false), codes.FailedPrecondition)
}

// A crash between the bind mount and its read-only remount leaves a
// writable bind; the retried publish makes it read-only.
func TestPublishRepairsInterruptedReadOnlyBind(t *testing.T) {
	ts := newTestService(t)
	staging := ts.stageISCSI(t, "pvc-1", "ext4")
	target := ts.target(t, "pod-a", "pvc-1")
	info, _ := ts.state.Read("pvc-1")
	info.AddPublished(target)
	if err := ts.state.Write("pvc-1", info); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(target, 0o750)
	if _, err := ts.host.Run(context.Background(), "mount", "-o", "bind", staging, target); err != nil {
		t.Fatal(err)
	}
	if err := ts.publish("pvc-1", staging, target, snw, true); err != nil {
		t.Fatal(err)
	}
	if m := ts.host.mountedAt(target); m == nil || !m.ro {
		t.Fatalf("target %+v still writable", m)
	}
}

// A volume Trident 20.10 staged: legacy tracking file, publish info in the
// staging directory, device attached, staging path not mounted.
func TestTridentStagedVolumeIsAdopted(t *testing.T) {
	ts := newTestService(t)
	staging := ts.staging(t, "pvc-t")
	pi := tracking.PublishInfo{
		Localhost: true, FilesystemType: "ext4", IscsiTargetIQN: iscsiContext["iscsiTargetIqn"], IscsiLunNumber: 3,
		IscsiTargetPortal: "10.193.108.21", IscsiLunSerial: "serial-t", IscsiInterface: "default",
	}
	dev, _ := ts.ini.Attach(context.Background(), iscsiTarget(&pi))
	ts.host.fs[dev.Path] = "ext4"
	pi.DevicePath = dev.Path
	data, _ := json.Marshal(pi)
	os.WriteFile(filepath.Join(staging, tracking.LegacyPublishInfoFile), data, 0o600)
	legacy, _ := json.Marshal(map[string]string{"stagingTargetPath": staging})
	os.WriteFile(filepath.Join(ts.state.Dir(), "pvc-t.json"), legacy, 0o600)

	target := ts.target(t, "pod-a", "pvc-t")
	if err := ts.publish("pvc-t", staging, target, snw, false); err != nil {
		t.Fatal(err)
	}
	if ts.host.mountedAt(staging) == nil || ts.host.mountedAt(target) == nil {
		t.Fatal("publish did not mount the staging path and the target")
	}
	if n := ts.host.count("mkfs"); n != 0 {
		t.Fatal("adoption formatted the device")
	}
	info, err := ts.state.Read("pvc-t")
	if err != nil || info.Legacy || !info.IsPublishedAt(target) || info.IscsiLunSerial != "serial-t" {
		t.Fatalf("state after adoption %+v, %v", info, err)
	}

	ts.ini.size = 8 << 20
	resp, err := ts.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{
		VolumeId: "pvc-t", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20},
	})
	if err != nil || resp.GetCapacityBytes() != 8<<20 || ts.host.count("resize2fs") != 1 {
		t.Fatalf("expand: %v, %v", resp, err)
	}

	if _, err := ts.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-t", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-t", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if ts.ini.detach != 1 || len(ts.ini.devices) != 0 {
		t.Fatal("unstage did not detach the LUN")
	}
	if entries, _ := os.ReadDir(staging); len(entries) != 0 {
		t.Fatalf("staging directory not empty for kubelet to remove: %v", entries)
	}
}

func TestUnstageWithoutUsableState(t *testing.T) {
	ts := newTestService(t)
	staging := ts.staging(t, "pvc-1")
	unstage := func() error {
		_, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging})
		return err
	}
	// Never staged.
	if err := unstage(); err != nil {
		t.Fatal(err)
	}
	// An unreadable tracking file must not loop kubelet (Trident #706):
	// unstage cleans up what it can and keeps the file for the operator.
	path, _ := ts.state.Path("pvc-1")
	os.WriteFile(path, []byte("{truncated"), 0o600)
	if _, err := ts.host.Run(context.Background(), "mount", "-t", "ext4", "/dev/fake", staging); err != nil {
		t.Fatal(err)
	}
	if err := unstage(); err != nil {
		t.Fatal(err)
	}
	if ts.host.mountedAt(staging) != nil {
		t.Fatal("staging path still mounted")
	}
	if _, err := os.Stat(path + ".unreadable"); err != nil {
		t.Fatalf("unreadable file not kept aside: %v", err)
	}
}

func TestStatsAndExpandLookups(t *testing.T) {
	ts := newTestService(t)
	staging := ts.stageISCSI(t, "pvc-1", "ext4")
	target := ts.target(t, "pod-a", "pvc-1")
	if err := ts.publish("pvc-1", staging, target, snw, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		vol, path string
		code      codes.Code
	}{
		{"pvc-1", target, codes.OK},
		{"pvc-1", staging, codes.OK},
		{"", target, codes.InvalidArgument},
		{"pvc-1", "", codes.InvalidArgument},
		{"pvc-unknown", target, codes.NotFound},
		{"pvc-1", "some/path", codes.NotFound},
		{"pvc-1", "/etc", codes.NotFound},
		{"pvc-1", ts.kubelet + "/pods/other", codes.NotFound},
	} {
		_, err := ts.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: tc.vol, VolumePath: tc.path})
		if status.Code(err) != tc.code {
			t.Errorf("stats(%q, %q) = %v, want %v", tc.vol, tc.path, err, tc.code)
		}
		_, err = ts.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: tc.vol, VolumePath: tc.path})
		if status.Code(err) != tc.code {
			t.Errorf("expand(%q, %q) = %v, want %v", tc.vol, tc.path, err, tc.code)
		}
	}
	resp, err := ts.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-1", VolumePath: target})
	if err != nil || resp.GetVolumeCondition().GetAbnormal() {
		t.Fatalf("healthy volume: %v, %v", resp, err)
	}
	// The LUN vanishes: the condition says so.
	delete(ts.ini.devices, "serial-pvc-1")
	resp, err = ts.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-1", VolumePath: target})
	if err != nil || !resp.GetVolumeCondition().GetAbnormal() || !strings.Contains(resp.GetVolumeCondition().GetMessage(), "no longer attached") {
		t.Fatalf("volume without its LUN: %v, %v", resp, err)
	}
}

func TestNFSPublishErrors(t *testing.T) {
	for stderr, code := range map[string]codes.Code{
		"mount.nfs: access denied by server while mounting 10.0.0.1:/v": codes.PermissionDenied,
		"mount.nfs: an incorrect mount option was specified":            codes.InvalidArgument,
		"mount.nfs: Connection timed out":                               codes.Internal,
	} {
		ts := newTestService(t)
		staging := ts.staging(t, "pvc-1")
		if _, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
			VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: mountCapability("", snw), PublishContext: nfsContext,
		}); err != nil {
			t.Fatal(err)
		}
		ts.host.fail["mount"] = &hostexec.ExitError{Name: "mount", Code: 32, Stderr: stderr}
		target := ts.target(t, "pod-a", "pvc-1")
		wantCode(t, ts.publish("pvc-1", staging, target, snw, false), code)
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("failed publish left the target")
		}
	}
}

// --max-volumes-per-node reaches kubelet through NodeGetInfo; 0 leaves the
// field unset, which kubelet reads as no limit.
func TestNodeGetInfoMaxVolumes(t *testing.T) {
	for _, max := range []int64{0, 1, 64} {
		ts := newTestService(t)
		ts.cfg.MaxVolumesPerNode = max
		info, err := ts.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
		if err != nil || info.GetMaxVolumesPerNode() != max {
			t.Errorf("max %d: NodeGetInfo %v, %v", max, info, err)
		}
	}
}

func TestNodeGetInfoAndCapabilities(t *testing.T) {
	ts := newTestService(t)
	ts.cfg.Topology = map[string]string{"topology.kubernetes.io/zone": "z1"}
	info, err := ts.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != "node-1" || info.GetAccessibleTopology().GetSegments()["topology.kubernetes.io/zone"] != "z1" {
		t.Fatalf("NodeGetInfo %v, %v", info, err)
	}
	// The advertised set, written out, so that a change to it fails here.
	caps, _ := ts.NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
	var got []string
	for _, c := range caps.GetCapabilities() {
		got = append(got, c.GetRpc().GetType().String())
	}
	want := []string{"STAGE_UNSTAGE_VOLUME", "EXPAND_VOLUME", "GET_VOLUME_STATS", "VOLUME_CONDITION", "SINGLE_NODE_MULTI_WRITER"}
	if !slices.Equal(got, want) {
		t.Fatalf("advertised %v, want %v", got, want)
	}
}

func TestReportNodeInfoInTheBackground(t *testing.T) {
	ts := newTestService(t)
	iqnFile := filepath.Join(ts.cfg.HostRoot, "etc/iscsi/initiatorname.iscsi")
	os.MkdirAll(filepath.Dir(iqnFile), 0o755)
	os.WriteFile(iqnFile, []byte("## generated\nInitiatorName=iqn.1993-08.org.debian:01:abcdef\n"), 0o644)
	var calls atomic.Int32
	got := make(chan backends.Node, 1)
	ts.cfg.Reporter = ReporterFunc(func(_ context.Context, info backends.Node) error {
		if calls.Add(1) == 1 {
			return errors.New("controller not there yet")
		}
		got <- info
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts.Start(ctx) // must return at once
	select {
	case info := <-got:
		if info.Name != "node-1" || info.IQN != "iqn.1993-08.org.debian:01:abcdef" {
			t.Fatalf("reported %v", info)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node info never reported")
	}
}

func TestDefaultRoutes(t *testing.T) {
	v4 := []byte("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"eth0\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n" +
		"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n")
	if got := parseDefaultRoutesV4(v4); len(got) != 1 || got[0] != "eth0" {
		t.Fatalf("v4 default routes %v", got)
	}
	zero := strings.Repeat("0", 32)
	v6 := []byte(zero + " 00 " + zero + " 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 ens5\n" +
		zero + " 00 " + zero + " 00 " + zero + " ffffffff 00000001 00000000 00200200 lo\n" +
		"fd208b1eb2582000000000000000000 40 " + zero + " 00 " + zero + " 00000100 00000001 00000000 00000001 ens5\n")
	if got := parseDefaultRoutesV6(v6); len(got) != 1 || got[0] != "ens5" {
		t.Fatalf("v6 default routes %v", got)
	}
}

// A tracking file left unreadable (truncated by a power loss, edited by
// hand) does not stop a stage: the stage carries all the state anyway.
func TestStageReplacesUnreadableState(t *testing.T) {
	ts := newTestService(t)
	path, _ := ts.state.Path("pvc-1")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, nil, 0o600)
	ts.stageISCSI(t, "pvc-1", "ext4")
	info, err := ts.state.Read("pvc-1")
	if err != nil || info.IscsiLunSerial != "serial-pvc-1" {
		t.Fatalf("state after stage: %+v, %v", info, err)
	}
	if _, err := os.Stat(path + ".unreadable"); err != nil {
		t.Fatalf("unreadable file not kept aside: %v", err)
	}
}

func TestMountOptionsFromTridentState(t *testing.T) {
	for _, tc := range []struct {
		stored string
		flags  []string
		want   string
		ok     bool
	}{
		{"-o nfsvers=3", []string{"hard"}, "nfsvers=3,hard", true},
		{"nfsvers=4.1", nil, "nfsvers=4.1", true},
		{"", []string{"noatime,nodiratime"}, "noatime,nodiratime", true},
		{"-o nfsvers=3,bind", nil, "", false}, // a tampered tracking file is checked too
	} {
		got, err := mountOptions(tc.stored, tc.flags)
		if (err == nil) != tc.ok || strings.Join(got, ",") != tc.want {
			t.Errorf("mountOptions(%q, %q) = %q, %v", tc.stored, tc.flags, got, err)
		}
	}
}

func TestIsKubeletPathOf(t *testing.T) {
	ts := newTestService(t)
	k := ts.kubelet
	for p, want := range map[string]bool{
		k + "/pods/uid-1/volumes/kubernetes.io~csi/pvc-1/mount":            true,
		k + "/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/uid-1": true,
		k + "/pods/uid-1/volumes/kubernetes.io~csi/pvc-2/mount":            false,
		k + "/pods/uid-1/volumes/kubernetes.io~csi/pvc-1/mount/sub":        false,
		k + "/pods/uid-1/volumes/kubernetes.io~nfs/pvc-1/mount":            false,
		k + "/plugins/kubernetes.io/csi/pv/pvc-1/globalmount":              false,
		"/elsewhere/pods/uid-1/volumes/kubernetes.io~csi/pvc-1/mount":      false,
	} {
		if got := ts.isKubeletPathOf("pvc-1", p); got != want {
			t.Errorf("isKubeletPathOf(%s) = %v", p, got)
		}
	}
}

// Every call that changes a volume on the node takes its cross-process lock
// (I8): while another process (here, a second locker on the same files)
// holds it, each call ends Aborted at its deadline and runs no host tool.
func TestEveryVolumeCallTakesTheVolumeLock(t *testing.T) {
	ts := newTestService(t)
	other, err := volumelock.New(ts.cfg.LockDir)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := other.Lock(context.Background(), "pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	staging, target := ts.staging(t, "pvc-1"), ts.target(t, "pod-a", "pvc-1")
	pc := with(iscsiContext, "iscsiLunSerial", "serial-pvc-1")
	capability := mountCapability("ext4", snw)
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"NodeStageVolume", func(ctx context.Context) error {
			_, err := ts.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc})
			return err
		}},
		{"NodePublishVolume", func(ctx context.Context) error {
			_, err := ts.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: pc})
			return err
		}},
		{"NodeExpandVolume", func(ctx context.Context) error {
			_, err := ts.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "pvc-1", VolumePath: target, StagingTargetPath: staging})
			return err
		}},
		{"NodeUnpublishVolume", func(ctx context.Context) error {
			_, err := ts.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target})
			return err
		}},
		{"NodeUnstageVolume", func(ctx context.Context) error {
			_, err := ts.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			wantCode(t, tc.call(ctx), codes.Aborted)
			if n := len(ts.host.calls); n != 0 {
				t.Fatalf("ran host tools while another process held the volume: %v", ts.host.calls)
			}
		})
	}
}

// The iSCSI client reads udev's database on the host only: an emulated
// sysfs (the shims') has devices udev never saw.
func TestUdevDataDir(t *testing.T) {
	for _, tc := range []struct {
		hostRoot, sysRoot, want string
	}{
		{"", "/sys", "/run/udev/data"},
		{"/host", "/sys", "/host/run/udev/data"},
		{"/host", "/sys/", "/host/run/udev/data"},
		{"", "/tmp/shim/sys", ""},
		{"/host", "/tmp/shim/sys", ""},
	} {
		if got := udevDataDir(Config{HostRoot: tc.hostRoot, SysRoot: tc.sysRoot}); got != tc.want {
			t.Errorf("host root %q, sys root %q: udev database %q, want %q", tc.hostRoot, tc.sysRoot, got, tc.want)
		}
	}
}
