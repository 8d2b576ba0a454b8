// Package plugintest runs the real ontap-csi binary for the end-to-end
// suites (test/e2e, test/sanity): built once per test process, started as
// a process of its own in the allInOne role on an ONTAP simulator, with
// every root (kubelet dir, tracking dir, locks, fake /dev and /sys) below
// one temporary directory and the test shims (test/shims) first in its
// PATH, and torn down — with everything it mounted or attached — when the
// test ends, whether it passed or not.
//
//	func TestMain(m *testing.M) { plugintest.Main(m) }
//
//	roots := plugintest.NewRoots(t)
//	s := plugintest.StartSim(t, roots, sim.Config{})
//	iscsi := plugintest.StartISCSI(t, roots, s, "iqn.2005-03.org.open-iscsi:node-1")
//	p := plugintest.Start(t, plugintest.Options{Roots: roots, Sim: s, ISCSI: iscsi,
//		Backends: []string{plugintest.WriteBackendConfig(t, roots.Root, s.Simulator, "ontap-san", nil)}})
//	p.Controller.CreateVolume(...); p.Node.NodeStageVolume(...)
package plugintest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shimtest"
)

const (
	pluginPackage  = "github.com/ontap-csi/ontap-csi/cmd/ontap-csi"
	nfsShimPackage = "github.com/ontap-csi/ontap-csi/test/shims/nfs"
)

// Builds are shared by all tests of a process: even with the build cache
// warm, linking ontap-csi takes many seconds on a loaded machine.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string // build key -> binary
}

// Main is TestMain for a package that runs the plugin: it shares the
// builds of the plugin and of the shims among the package's tests and
// removes them when the tests end.
func Main(m *testing.M) {
	code := shimtest.Run(m)
	builds.mu.Lock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	builds.mu.Unlock()
	os.Exit(code)
}

// Binary returns ontap-csi built with the given build tags (e.g.
// "crashpoints", see node/crashpoint_enabled.go).
func Binary(t testing.TB, tags ...string) string {
	t.Helper()
	name := "ontap-csi"
	if len(tags) > 0 {
		name += "-" + strings.Join(tags, "-")
	}
	return build(t, name, pluginPackage, tags)
}

// NFSShimDir returns a directory holding the NFS shim as "mount", to be put
// first in PATH.
func NFSShimDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(build(t, filepath.Join("nfs-shim", "mount"), nfsShimPackage, nil))
}

func build(t testing.TB, name, pkg string, tags []string) string {
	t.Helper()
	if dir := os.Getenv(EnvPrebuilt); dir != "" {
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: no prebuilt %s: %v", EnvPrebuilt, name, err)
		}
		return bin
	}
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if bin, ok := builds.bins[name]; ok {
		return bin
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "ontap-csi-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir, builds.bins = dir, map[string]string{}
	}
	out := filepath.Join(builds.dir, name)
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	// With go test's own settings (cgo as it is, no -trimpath), so that
	// the build shares the packages go test compiled: a CGO_ENABLED=0
	// build compiles every dependency, client-go included, once more.
	cmd := exec.Command("go", append(args, pkg)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	builds.bins[name] = out
	return out
}

// RequireRoot skips the test unless it runs as root: the data path mounts,
// formats and attaches loop devices.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the data-path tests need root (mounts, loop devices)")
	}
}
