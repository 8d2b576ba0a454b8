package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestMaliciousRequests sends requests a compromised or buggy CO could send
// and checks each gets its code and changes nothing on disk: no file,
// directory, mount or tracking file appears, moves or goes.
func TestMaliciousRequests(t *testing.T) {
	r := newRig(t, rigOptions{})
	p := r.startPlugin(pluginOptions{})
	ctx := ctxT(t)

	// A legitimately staged volume, so publishes reach past "not staged".
	vol := r.makeNFSVolume("pvc-good", nfsClientIP)
	staging := r.makeStaging(vol.id)
	okCap := mountCap("", snw)
	if _, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: okCap, PublishContext: vol.context,
	}); err != nil {
		t.Fatal(err)
	}
	outside, podDir, target := r.decoys(t)
	longID := strings.Repeat("a", 200)
	longPath := r.KubeletDir + "/pods/" + strings.Repeat("x/", 2500)
	ctxWith := func(kv ...string) map[string]string { return withKeys(vol.context, kv...) }
	iscsiCtx := map[string]string{
		"protocol": "block", "iscsiTargetIqn": "iqn.1992-08.com.netapp:sn.1:vs.2", "iscsiLunNumber": "0",
		"iscsiTargetPortalCount": "1", "p1": "127.0.0.11", "iscsiLunSerial": "abc", "useCHAP": "false",
	}
	iscsiWith := func(kv ...string) map[string]string { return withKeys(iscsiCtx, kv...) }
	newStaging := r.stagingPath("pvc-new")
	stage := func(id, path string, vc *csi.VolumeCapability, pc map[string]string) func() error {
		return func() error {
			_, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: path, VolumeCapability: vc, PublishContext: pc})
			return err
		}
	}
	publish := func(id, stagingPath, targetPath string, vc *csi.VolumeCapability, pc map[string]string) func() error {
		return func() error {
			_, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
				VolumeId: id, StagingTargetPath: stagingPath, TargetPath: targetPath, VolumeCapability: vc, PublishContext: pc,
			})
			return err
		}
	}

	tests := []struct {
		name string
		call func() error
		code codes.Code
	}{
		// Volume ids.
		{"stage without volume id", stage("", newStaging, okCap, vol.context), codes.InvalidArgument},
		{"stage with traversal id", stage("../../../etc/passwd", newStaging, okCap, vol.context), codes.InvalidArgument},
		{"stage with slash id", stage("pvc/../../x", newStaging, okCap, vol.context), codes.InvalidArgument},
		{"stage with oversized id", stage(longID, newStaging, okCap, vol.context), codes.InvalidArgument},
		{"stage with NUL in id", stage("pvc\x00x", newStaging, okCap, vol.context), codes.InvalidArgument},
		// Staging paths.
		{"stage without staging path", stage("pvc-new", "", okCap, vol.context), codes.InvalidArgument},
		{"stage outside the kubelet dir", stage("pvc-new", filepath.Join(outside, "stage"), okCap, vol.context), codes.InvalidArgument},
		{"stage with traversal path", stage("pvc-new", r.KubeletDir+"/plugins/../../outside", okCap, vol.context), codes.InvalidArgument},
		{"stage with relative path", stage("pvc-new", "plugins/pv/globalmount", okCap, vol.context), codes.InvalidArgument},
		{"stage through a symlink out", stage("pvc-new", filepath.Join(podDir, "escape", "stage"), okCap, vol.context), codes.InvalidArgument},
		{"stage on the kubelet dir", stage("pvc-new", r.KubeletDir, okCap, vol.context), codes.InvalidArgument},
		{"stage with oversized path", stage("pvc-new", longPath, okCap, vol.context), codes.InvalidArgument},
		// Capabilities.
		{"stage without capability", stage("pvc-new", newStaging, nil, vol.context), codes.InvalidArgument},
		{"stage with bind flag", stage("pvc-new", newStaging, mountCap("", snw, "bind"), vol.context), codes.InvalidArgument},
		{"stage with smuggled remount", stage("pvc-new", newStaging, mountCap("", snw, "hard,remount"), vol.context), codes.InvalidArgument},
		{"stage with x-mount option", stage("pvc-new", newStaging, mountCap("", snw, "X-mount.mkdir=0777"), vol.context), codes.InvalidArgument},
		{"stage with flag as option", stage("pvc-new", newStaging, mountCap("", snw, "--bind"), vol.context), codes.InvalidArgument},
		{"stage with newline flag", stage("pvc-new", newStaging, mountCap("", snw, "ro\n/dev/sda /mnt"), vol.context), codes.InvalidArgument},
		{"stage with fs type injection", stage("pvc-new", newStaging, mountCap("ext4,bind", snw), vol.context), codes.InvalidArgument},
		{"stage NFS as raw block", stage("pvc-new", newStaging, blockCap(snw), vol.context), codes.InvalidArgument},
		{"stage with access mode 99", stage("pvc-new", newStaging, mountCap("", 99), vol.context), codes.InvalidArgument},
		{"stage with access mode UNKNOWN", stage("pvc-new", newStaging, mountCap("", csi.VolumeCapability_AccessMode_UNKNOWN), vol.context), codes.InvalidArgument},
		// Publish contexts.
		{"unknown protocol", stage("pvc-new", newStaging, okCap, ctxWith("protocol", "smb")), codes.InvalidArgument},
		{"no protocol", stage("pvc-new", newStaging, okCap, ctxWith("protocol", "")), codes.InvalidArgument},
		{"no publish context", stage("pvc-new", newStaging, okCap, nil), codes.InvalidArgument},
		{"mountOptions with second source", stage("pvc-new", newStaging, okCap, ctxWith("mountOptions", "-o vers=4 10.0.0.66:/etc")), codes.InvalidArgument},
		{"mountOptions with comma-smuggled bind", stage("pvc-new", newStaging, okCap, ctxWith("mountOptions", "vers=4,bind")), codes.InvalidArgument},
		{"mountOptions redirecting the server", stage("pvc-new", newStaging, okCap, ctxWith("mountOptions", "addr=10.0.0.66")), codes.InvalidArgument},
		{"nfsServerIp with a path", stage("pvc-new", newStaging, okCap, ctxWith("nfsServerIp", "10.0.0.66:/etc")), codes.InvalidArgument},
		{"nfsPath with a comma", stage("pvc-new", newStaging, okCap, ctxWith("nfsPath", "/vol,bind")), codes.InvalidArgument},
		{"nfsPath traversal", stage("pvc-new", newStaging, okCap, ctxWith("nfsPath", "/vol/../../etc")), codes.InvalidArgument},
		{"nfsServerIp missing", stage("pvc-new", newStaging, okCap, ctxWith("nfsServerIp", "")), codes.Internal},
		{"iscsi lun not a number", stage("pvc-new", newStaging, okCap, iscsiWith("iscsiLunNumber", "0; reboot")), codes.Internal},
		{"iscsi portal missing", stage("pvc-new", newStaging, okCap, iscsiWith("iscsiTargetPortalCount", "2")), codes.Internal},
		{"iscsi portal count garbage", stage("pvc-new", newStaging, okCap, iscsiWith("iscsiTargetPortalCount", "-1")), codes.Internal},
		{"iscsi useCHAP garbage", stage("pvc-new", newStaging, okCap, iscsiWith("useCHAP", "sure")), codes.Internal},
		{"iscsi iqn as an option", stage("pvc-new", newStaging, okCap, iscsiWith("iscsiTargetIqn", "--op=delete")), codes.InvalidArgument},
		{"iscsi portal as a host list", stage("pvc-new", newStaging, okCap, iscsiWith("p1", "10.0.0.1,10.0.0.2")), codes.InvalidArgument},
		{"iscsi unsupported fs", stage("pvc-new", newStaging, mountCap("btrfs", snw), iscsiCtx), codes.InvalidArgument},
		{"iscsi raw fs with mount capability", stage("pvc-new", newStaging, okCap, iscsiWith("filesystemType", "raw")), codes.InvalidArgument},
		// Publish.
		{"publish outside the kubelet dir", publish(vol.id, staging, filepath.Join(outside, "etc"), okCap, nil), codes.InvalidArgument},
		{"publish onto /etc", publish(vol.id, staging, "/etc", okCap, nil), codes.InvalidArgument},
		{"publish through a symlink out", publish(vol.id, staging, filepath.Join(podDir, "escape", "etc"), okCap, nil), codes.InvalidArgument},
		{"publish through a symlink to /", publish(vol.id, staging, filepath.Join(podDir, "root", "etc"), okCap, nil), codes.InvalidArgument},
		{"publish with traversal", publish(vol.id, staging, target+"/../../../../../../outside", okCap, nil), codes.InvalidArgument},
		{"publish on the staging path", publish(vol.id, staging, staging, okCap, nil), codes.InvalidArgument},
		{"publish without target", publish(vol.id, staging, "", okCap, nil), codes.InvalidArgument},
		{"publish without capability", publish(vol.id, staging, target, nil, nil), codes.InvalidArgument},
		{"publish with bind flag", publish(vol.id, staging, target, mountCap("", snw, "rbind"), nil), codes.InvalidArgument},
		{"publish with access mode 99", publish(vol.id, staging, target, mountCap("", 99), nil), codes.InvalidArgument},
		{"publish with injected context", publish(vol.id, staging, target, okCap, ctxWith("mountOptions", "remount")), codes.InvalidArgument},
		{"publish without staging path", publish(vol.id, "", target, okCap, nil), codes.FailedPrecondition},
		{"publish a volume not staged", publish("pvc-unknown", staging, target, okCap, nil), codes.FailedPrecondition},
		{"publish with oversized id", publish(longID, staging, target, okCap, nil), codes.InvalidArgument},
		// Unpublish, unstage.
		{"unpublish outside", func() error {
			_, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: filepath.Join(outside, "etc")})
			return err
		}, codes.InvalidArgument},
		{"unpublish through a symlink", func() error {
			_, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: filepath.Join(podDir, "escape", "etc")})
			return err
		}, codes.InvalidArgument},
		{"unpublish without id", func() error {
			_, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{TargetPath: target})
			return err
		}, codes.InvalidArgument},
		{"unstage outside", func() error {
			_, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: outside})
			return err
		}, codes.InvalidArgument},
		{"unstage traversal id", func() error {
			_, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "../tracking/pvc-good", StagingTargetPath: staging})
			return err
		}, codes.InvalidArgument},
		// Stats and expand: a path that is not the volume's is NotFound.
		{"stats outside", func() error {
			_, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.id, VolumePath: "/etc"})
			return err
		}, codes.NotFound},
		{"stats of another path", func() error {
			_, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.id, VolumePath: podDir})
			return err
		}, codes.NotFound},
		{"stats without id", func() error {
			_, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumePath: staging})
			return err
		}, codes.InvalidArgument},
		{"expand traversal", func() error {
			_, err := p.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol.id, VolumePath: staging + "/../../../../outside"})
			return err
		}, codes.NotFound},
		{"expand bad range", func() error {
			_, err := p.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol.id, VolumePath: staging, CapacityRange: &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 5}})
			return err
		}, codes.OutOfRange},
	}

	before := snapshot(t, r.Root)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { r.checkRefused(t, tc.call, tc.code, before) })
	}
	// The legitimate volume is still staged and unharmed.
	if _, err := p.Node.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	r.assertClean(vol.id)
}

// decoys makes what hostile paths aim at: a directory outside the kubelet
// dir, a pod volume directory with symlinks out of it (to that directory
// and to /), and a target path below it.
func (r *rig) decoys(t *testing.T) (outside, podDir, target string) {
	t.Helper()
	outside = filepath.Join(r.Root, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	podDir = filepath.Join(r.KubeletDir, "pods", "pod-evil", "volumes", "kubernetes.io~csi")
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(podDir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(podDir, "root")); err != nil {
		t.Fatal(err)
	}
	target = filepath.Join(podDir, "pvc-good", "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	return outside, podDir, target
}

// withKeys is a copy of base with kv's pairs set, or removed where the
// value is empty.
func withKeys(base map[string]string, kv ...string) map[string]string {
	m := maps.Clone(base)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

// checkRefused runs a hostile call: it must get code and leave the disk
// below the rig's root as before.
func (r *rig) checkRefused(t *testing.T, call func() error, code codes.Code, before []string) {
	err := call()
	if got := status.Code(err); got != code {
		t.Fatalf("code %v (%v), want %v", got, err, code)
	}
	if after := snapshot(t, r.Root); !slices.Equal(before, after) {
		t.Fatalf("request changed the disk:\n%s\n%d vs %d entries", diff(before, after), len(before), len(after))
	}
}

// snapshot lists every file below root (but the simulator's own state and
// the socket) with its type and mode, and for files size and mtime, and
// every mount below it.
func snapshot(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "sim" || rel == "csi.sock" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, st.Mode())
		switch {
		case st.IsDir():
			// A directory's own mtime moves when a lock file comes and
			// goes; its entries are listed anyway.
		case st.Mode()&fs.ModeDevice != 0:
			// A raw block target is a bind mount of the device node. Its
			// identity is the device number; its mtime is udev's, which
			// touches the node on every change event of the device (a
			// multipath map reload, a path checker's verdict), whoever
			// caused it.
			rdev := st.Sys().(*syscall.Stat_t).Rdev
			line += fmt.Sprintf(" device %d:%d", unix.Major(rdev), unix.Minor(rdev))
		default:
			line += fmt.Sprintf(" %d %d", st.Size(), st.ModTime().UnixNano())
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			dest, _ := os.Readlink(p)
			line += " -> " + dest
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range plugintest.MountPointsBelow(t, root) {
		out = append(out, "mount "+mp)
	}
	slices.Sort(out)
	return out
}

func diff(a, b []string) string {
	var sb strings.Builder
	for _, l := range a {
		if !slices.Contains(b, l) {
			sb.WriteString("- " + l + "\n")
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			sb.WriteString("+ " + l + "\n")
		}
	}
	return sb.String()
}

// onTAP lists what the simulator holds, for "nothing changed in ONTAP".
func (r *rig) onTAP() []string {
	var out []string
	for _, v := range r.sim.Volumes() {
		out = append(out, fmt.Sprintf("volume %s %d %s %v", v.Name, v.Size, v.ExportPolicy, v.LargeSize))
	}
	for _, l := range r.sim.LUNs() {
		out = append(out, fmt.Sprintf("LUN %s %d", l.Path, l.Size))
	}
	for _, g := range r.sim.IGroups() {
		out = append(out, fmt.Sprintf("igroup %s %v", g.Name, g.Initiators))
	}
	for _, m := range r.sim.LUNMaps() {
		out = append(out, fmt.Sprintf("map %+v", m))
	}
	for _, p := range r.sim.ExportPolicies() {
		out = append(out, fmt.Sprintf("policy %s %+v", p.Name, p.Rules))
	}
	return out
}

// TestBadControllerInputChangesNothingInONTAP: the controller's refusals of
// docs/errors.md, through the real binary: each gets its code, with a
// message naming what is wrong, and ONTAP is as it was.
func TestBadControllerInputChangesNothingInONTAP(t *testing.T) {
	r := newRig(t, rigOptions{})
	p := r.startPlugin(pluginOptions{})
	ctx := ctxT(t)
	rwx := mountCap("", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	create := func(name string, size int64, vc *csi.VolumeCapability) func() error {
		return func() error {
			_, err := p.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
				Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapabilities: []*csi.VolumeCapability{vc},
			})
			return err
		}
	}
	if err := create("pvc-good", 1<<30, rwx)(); err != nil {
		t.Fatal(err)
	}
	publish := func(vc *csi.VolumeCapability, readonly bool) func() error {
		return func() error {
			_, err := p.Controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
				VolumeId: "pvc-good", NodeId: nodeID, VolumeCapability: vc, Readonly: readonly,
			})
			return err
		}
	}
	tests := []struct {
		name, says string
		call       func() error
		code       codes.Code
	}{
		{"CreateVolume of 1 EiB", "300 TiB", create("pvc-eib", 1<<60, rwx), codes.OutOfRange},
		{"CreateVolume of 301 TiB", "300 TiB", create("pvc-301", 301<<40, rwx), codes.OutOfRange},
		{"CreateVolume with a 2000-byte name", "name is 2000 bytes", create(strings.Repeat("n", 2000), 1<<30, rwx), codes.InvalidArgument},
		{"CreateVolume with a 129-byte name", "name is 129 bytes", create(strings.Repeat("n", 129), 1<<30, rwx), codes.InvalidArgument},
		{"CreateVolume with access mode 99", "access_mode", create("pvc-99", 1<<30, mountCap("", 99)), codes.InvalidArgument},
		{"CreateVolume with access mode UNKNOWN", "access_mode", create("pvc-0", 1<<30, mountCap("", 0)), codes.InvalidArgument},
		{"ControllerPublishVolume readonly", "PUBLISH_READONLY", publish(rwx, true), codes.InvalidArgument},
		{"ControllerPublishVolume with access mode 99", "access_mode", publish(mountCap("", 99), false), codes.InvalidArgument},
		{"ControllerExpandVolume to 1 EiB", "300 TiB", func() error {
			_, err := p.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
				VolumeId: "pvc-good", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 60}, VolumeCapability: rwx,
			})
			return err
		}, codes.OutOfRange},
	}
	before := r.onTAP()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if got := status.Code(err); got != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("code %v (%v), want %v saying %q", got, err, tc.code, tc.says)
			}
			if after := r.onTAP(); !slices.Equal(before, after) {
				t.Fatalf("the refusal changed ONTAP:\n%s", diff(before, after))
			}
		})
	}
	if _, err := p.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-good"}); err != nil {
		t.Fatal(err)
	}
	plugintest.AssertONTAPClean(t, r.sim.Simulator)
}
