package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestNFSVolumeLife runs an ontap-nas volume through its life on the real
// NFS client and server: CreateVolume, ControllerPublishVolume (the
// volume's export policy gets a rule for the node's address, which nfsd
// exports at once), NodeStage, NodePublish read-write and read-only, a
// write that lands in the volume, the same export over NFSv3,
// ControllerExpandVolume, NodeGetVolumeStats, NodeUnpublish, NodeUnstage,
// ControllerUnpublish (the export goes, a mount is denied), DeleteVolume.
// No NFS mount or export may be left.
func TestNFSVolumeLife(t *testing.T) {
	roots := plugintest.NewRoots(t)
	s := startSim(t, roots.Root)
	p := startPlugin(t, roots, s.writeBackend(t, roots.Root, "ontap-nas", map[string]any{"autoExportPolicy": true}))
	l := p.createAndPublish(t, "pvc-nfs-1", "ontap-nas", 1<<30, mountCap("nfs", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))
	export := l.pc["nfsServerIp"] + ":" + l.pc["nfsPath"]
	if etab := run(t, "exportfs", "-v"); !strings.Contains(etab, l.pc["nfsPath"]) || !strings.Contains(etab, nodeIP) {
		t.Fatalf("after ControllerPublishVolume nfsd does not export %s to %s:\n%s", l.pc["nfsPath"], nodeIP, etab)
	}

	l.stageAndPublish()
	if got := mountsOfType(t, "nfs4"); len(got) != 2 {
		t.Fatalf("NFSv4 mounts %v, want the two publishes", got)
	}
	l.writeAndReadBack("hello.txt", []byte("hello over NFS\n"))
	// On the "storage": the file is in the volume's directory.
	if found, _ := filepath.Glob(filepath.Join(s.dataDir, "volumes", "*", "hello.txt")); len(found) != 1 {
		t.Fatalf("the file is not in the simulator's volume: %v", found)
	}
	v3 := filepath.Join(roots.Root, "v3")
	if err := os.Mkdir(v3, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "nfs", "-o", "vers=3", export, v3)
	got, err := os.ReadFile(filepath.Join(v3, "hello.txt"))
	run(t, "umount", v3)
	if err != nil || string(got) != "hello over NFS\n" {
		t.Fatalf("read over NFSv3: %q, %v", got, err)
	}

	l.expand(2 << 30)
	l.unpublishAndUnstage()
	if got := append(mountsOfType(t, "nfs4"), mountsOfType(t, "nfs")...); len(got) > 0 {
		t.Fatalf("NFS mounts left: %v", got)
	}
	l.controllerUnpublish()
	if etab := run(t, "exportfs", "-v"); strings.Contains(etab, nodeIP) {
		t.Fatalf("after ControllerUnpublishVolume nfsd still exports to the node:\n%s", etab)
	}
	if out, err := exec.Command("mount", "-t", "nfs", "-o", "vers=4.1", export, v3).CombinedOutput(); err == nil {
		run(t, "umount", v3)
		t.Fatal("the node still mounts the volume after ControllerUnpublishVolume")
	} else if !strings.Contains(string(out), "access denied") {
		t.Fatalf("mount after ControllerUnpublishVolume: %v: %s, want access denied", err, out)
	}
	l.delete()
	if etab := strings.TrimSpace(run(t, "exportfs", "-v")); etab != "" {
		t.Fatalf("exports left after DeleteVolume:\n%s", etab)
	}
}
