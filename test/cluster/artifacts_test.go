package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// artifacts are the built binaries and image archives.
type artifacts struct {
	kube     localcluster.KubeBinaries
	sidecars localcluster.Binaries
	bin      string
	archives []string
}

// buildArtifacts builds (or finds in the cache) the Kubernetes binaries and
// the CSI sidecars, builds ontap-csi, the ONTAP simulator, the NFS and iSCSI
// shims, the legacy registrar emulation, the sidecar stand-ins and this
// module's helpers, and writes the images.
func buildArtifacts(ctx context.Context, t *testing.T, repo, module string) (artifacts, error) {
	var a artifacts
	var err error
	a.kube, err = localcluster.BuildKube(ctx, filepath.Join(module, "kube"), localcluster.DefaultCacheDir(), t.Logf)
	if err != nil {
		return a, err
	}
	a.sidecars, err = localcluster.BuildSidecars(ctx, filepath.Join(module, "sidecars"), localcluster.DefaultCacheDir(), t.Logf)
	if err != nil {
		return a, err
	}
	a.bin = t.TempDir()
	start := time.Now()
	if err := localcluster.GoBuild(ctx, module, a.bin, "./cmd/nodens", "./cmd/pause", "./cmd/workload"); err != nil {
		return a, err
	}
	builds := map[string]struct{ module, pkg string }{
		"ontap-csi": {repo, "./cmd/ontap-csi"},
		"ontap-sim": {repo, "./cmd/ontap-sim"},
		// test/shims/nfs stands in for the node's NFS client (nfs-common's
		// mount.nfs helper, which mount(8) runs for -t nfs), the iSCSI shim
		// for iscsiadm, multipath and multipathd and the kernel's iSCSI
		// initiator (test/shims/iscsi/README.md).
		"mount.nfs":  {repo, "./test/shims/nfs"},
		"iscsi-shim": {repo, "./test/shims/iscsi/cmd/iscsi-shim"},
		// The stand-ins for the sidecars the module proxy does not serve.
		"csi-provisioner": {filepath.Join(module, "sidecars"), "./cmd/csi-provisioner"},
		"csi-resizer":     {filepath.Join(module, "sidecars"), "./cmd/csi-resizer"},
		// node-driver-registrar as Trident's DaemonSet runs it (S8 of
		// docs/design/registration.md), from test/kubelet's module.
		"legacyregistrar": {filepath.Join(repo, "test", "kubelet"), "./cmd/legacyregistrar"},
		// Trident's node plugin without registration of its own, for the
		// seed baseline.
		"tridentmain": {filepath.Join(repo, "test", "kubelet"), "./cmd/tridentmain"},
		// The trident-csi Secret's certificates for Trident's own objects
		// (scenario 9).
		"tridentcerts": {repo, "./test/tridentcerts/cmd/tridentcerts"},
	}
	// make passes the binary it built (static, version stamped, as in the
	// image).
	if prebuilt := os.Getenv("ONTAP_CSI_BINARY"); prebuilt != "" {
		if err := localcluster.CopyFile(prebuilt, filepath.Join(a.bin, "ontap-csi")); err != nil {
			return a, err
		}
		delete(builds, "ontap-csi")
	}
	for out, src := range builds {
		if err := localcluster.GoBuildOne(ctx, src.module, filepath.Join(a.bin, out), src.pkg); err != nil {
			return a, err
		}
	}
	t.Logf("built ontap-csi, shims and helpers in %s", time.Since(start).Round(time.Second))

	images := map[string]localcluster.Image{
		"pause.tar": {
			Tags: []string{localcluster.PauseImage}, Entrypoint: []string{"/pause"},
			Files: map[string]string{"/pause": filepath.Join(a.bin, "pause")},
		},
		// One image under two tags: changing the DaemonSet from one tag to
		// the other is an image change that rolls the pods.
		"ontap-csi.tar": {
			Tags: []string{pluginImageA, pluginImageB}, Entrypoint: []string{"/ontap-csi"},
			Files: map[string]string{"/ontap-csi": filepath.Join(a.bin, "ontap-csi")},
			// As the release image (Dockerfile): Trident's objects run
			// /trident_orchestrator and probe with tridentctl.
			Links: map[string]string{"/trident_orchestrator": "ontap-csi", "/bin/tridentctl": "../ontap-csi"},
			Dirs:  []string{"/tmp", "/etc"},
		},
		"e2e-tools.tar": {
			Tags: []string{toolsImage}, Entrypoint: []string{"/workload"},
			Files: map[string]string{
				"/workload":        filepath.Join(a.bin, "workload"),
				"/legacyregistrar": filepath.Join(a.bin, "legacyregistrar"),
				"/tridentmain":     filepath.Join(a.bin, "tridentmain"),
			},
			Dirs: []string{"/tmp", "/data"},
		},
	}
	for tag, bin := range map[string]string{
		attacherImage: a.sidecars.Path("csi-attacher"), snapshotterImage: a.sidecars.Path("csi-snapshotter"),
		snapControllerImg: a.sidecars.Path("snapshot-controller"),
		provisionerImage:  filepath.Join(a.bin, "csi-provisioner"), resizerImage: filepath.Join(a.bin, "csi-resizer"),
	} {
		name := filepath.Base(bin)
		images[name+".tar"] = localcluster.Image{
			Tags: []string{tag}, Entrypoint: []string{"/" + name},
			Files: map[string]string{"/" + name: bin}, Dirs: []string{"/tmp"},
		}
	}
	imgDir := filepath.Join(a.bin, "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return a, err
	}
	for name, img := range images {
		p := filepath.Join(imgDir, name)
		if err := img.WriteArchive(p); err != nil {
			return a, err
		}
		a.archives = append(a.archives, p)
	}
	return a, nil
}
