package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// KubeVersion is the Kubernetes release the cluster runs; test/cluster/kube
// pins the same one.
const KubeVersion = "v1.34.4"

// kubeCommands are the binaries built from test/cluster/kube's tool list.
var kubeCommands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}

// sidecarCommands are the CSI sidecars built from test/cluster/sidecars'
// tool list (the modules the proxy serves: docs/design/local-cluster.md §9).
var sidecarCommands = []string{"csi-attacher", "csi-snapshotter", "snapshot-controller"}

// Binaries is a directory of built binaries.
type Binaries struct {
	Dir string
}

// KubeBinaries are the built Kubernetes binaries: kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet.
type KubeBinaries = Binaries

// Path returns the path of one binary.
func (b Binaries) Path(name string) string { return filepath.Join(b.Dir, name) }

func kubeLDFlags() string {
	minor := strings.Split(strings.TrimPrefix(KubeVersion, "v"), ".")[1]
	// Without the version stamps nodes report v0.0.0-master and the API
	// server's version skew checks see a pre-release.
	return strings.Join([]string{
		"-s", "-w",
		"-X", "k8s.io/component-base/version.gitVersion=" + KubeVersion,
		"-X", "k8s.io/component-base/version.gitMajor=1",
		"-X", "k8s.io/component-base/version.gitMinor=" + minor,
		"-X", "k8s.io/client-go/pkg/version.gitVersion=" + KubeVersion,
	}, " ")
}

// toolBuild is a module whose `tool` lines are built together and cached.
type toolBuild struct {
	name     string // cache directory prefix, e.g. kube-v1.34.4
	module   string // the module's directory
	commands []string
	ldflags  string
	took     string // how long a cold build takes, for the log
}

// BuildKube returns the Kubernetes binaries for kubeModule (the directory of
// test/cluster/kube), building them into cacheRoot if they are not there.
// A cold build takes 5–12 minutes on two cores (less when the Go cache
// already holds what it shares with other builds).
func BuildKube(ctx context.Context, kubeModule, cacheRoot string, logf func(string, ...any)) (KubeBinaries, error) {
	return buildTools(ctx, toolBuild{name: "kube-" + KubeVersion, module: kubeModule, commands: kubeCommands,
		ldflags: kubeLDFlags(), took: "5-12 minutes"}, cacheRoot, logf)
}

// BuildSidecars returns csi-attacher, csi-snapshotter and snapshot-controller
// built from sidecarModule (test/cluster/sidecars), cached as BuildKube's.
func BuildSidecars(ctx context.Context, sidecarModule, cacheRoot string, logf func(string, ...any)) (Binaries, error) {
	return buildTools(ctx, toolBuild{name: "sidecars", module: sidecarModule, commands: sidecarCommands,
		ldflags: "-s -w", took: "3-6 minutes"}, cacheRoot, logf)
}

// buildTools builds a module's tools into cacheRoot unless they are there.
// The result is cached by content: the key hashes the module's go.mod and
// go.sum, the Go version, the platform and the link flags. A warm run finds
// the directory and does not even link. Concurrent runs take one file lock
// per cache; the build goes to a temporary directory renamed into place, so
// a killed build leaves nothing that looks finished.
func buildTools(ctx context.Context, b toolBuild, cacheRoot string, logf func(string, ...any)) (Binaries, error) {
	key, err := toolCacheKey(b)
	if err != nil {
		return Binaries{}, err
	}
	dir := filepath.Join(cacheRoot, b.name+"-"+key)
	if complete(dir) {
		return Binaries{Dir: dir}, nil
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return Binaries{}, err
	}
	unlock, err := lockFile(filepath.Join(cacheRoot, "build.lock"))
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if complete(dir) { // built by another run while we waited
		return Binaries{Dir: dir}, nil
	}
	tmp, err := os.MkdirTemp(cacheRoot, ".build-")
	if err != nil {
		return Binaries{}, err
	}
	defer os.RemoveAll(tmp)

	logf("building %s (%s) into %s; a cold build takes %s on 2 cores", b.name, strings.Join(b.commands, ", "), dir, b.took)
	start := time.Now()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-ldflags", b.ldflags, "-o", tmp+"/", "tool")
	cmd.Dir = b.module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go build in %s: %v\n%s", b.module, err, out)
	}
	for _, name := range b.commands {
		if _, err := os.Stat(filepath.Join(tmp, name)); err != nil {
			return Binaries{}, fmt.Errorf("the build did not produce %s: %w", name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "COMPLETE"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return Binaries{}, err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return Binaries{}, err
	}
	logf("built %s in %s", b.name, time.Since(start).Round(time.Second))
	return Binaries{Dir: dir}, nil
}

func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "COMPLETE"))
	return err == nil
}

func toolCacheKey(b toolBuild) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(b.module, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(data))
		h.Write(data)
	}
	goVersion, err := exec.Command(goTool(), "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	fmt.Fprintf(h, "go %s\n%s/%s\n%s\n", strings.TrimSpace(string(goVersion)), runtime.GOOS, runtime.GOARCH, b.ldflags)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// DefaultCacheDir is where built Kubernetes binaries are kept between runs:
// $ONTAP_CSI_E2E_CACHE, else $XDG_CACHE_HOME/ontap-csi/e2e, else
// ~/.cache/ontap-csi/e2e.
func DefaultCacheDir() string {
	if d := os.Getenv("ONTAP_CSI_E2E_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "ontap-csi", "e2e")
}

// GoBuild builds Go packages statically (CGO off: they run in images with
// nothing else in them) into outDir. moduleDir is the module the packages
// belong to.
func GoBuild(ctx context.Context, moduleDir, outDir string, pkgs ...string) error {
	args := append([]string{"build", "-trimpath", "-ldflags", "-s -w", "-o", outDir + "/"}, pkgs...)
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", strings.Join(pkgs, " "), moduleDir, err, out)
	}
	return nil
}

// GoBuildOne builds one package to an explicit output path.
func GoBuildOne(ctx context.Context, moduleDir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", pkg, moduleDir, err, b)
	}
	return nil
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// CopyFile copies a regular file with its permission bits.
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// FindRepoRoot walks up from dir to the ontap-csi module root.
func FindRepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(string(b)) == "github.com/ontap-csi/ontap-csi" {
			return d, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no ontap-csi module above %s", dir)
		}
	}
}

func modulePath(gomod string) string {
	for _, l := range strings.Split(gomod, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
