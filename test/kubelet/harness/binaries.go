package harness

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// MainModule is the module path of the repository root.
const MainModule = "github.com/ontap-csi/ontap-csi"

// Tools are the emulated legacy programs of the S8/S9 scenarios and the
// benchmark baseline, built from the test/kubelet module.
type Tools struct {
	// LegacyRegistrar emulates node-driver-registrar v2.
	LegacyRegistrar string
	// TridentMain emulates Trident's trident-main node container: a plain
	// CSI node server on csi.sock.
	TridentMain string
}

var (
	ontapOnce sync.Once
	ontapBin  string
	ontapErr  error
	toolsOnce sync.Once
	tools     Tools
	toolsErr  error
)

// OntapCSI returns the binary under test, built from the repository root at
// most once per process; builds of unchanged sources are reused across
// processes from $TMPDIR/ontap-csi-kubelet-harness. ONTAP_CSI_BINARY, if set,
// names a prebuilt binary instead.
func OntapCSI() (string, error) {
	ontapOnce.Do(func() {
		if ontapBin = os.Getenv("ONTAP_CSI_BINARY"); ontapBin != "" {
			return
		}
		root, err := RepoRoot()
		if err != nil {
			ontapErr = err
			return
		}
		// The binary depends on the whole main module but not on test/.
		ontapBin, ontapErr = cachedBuild("ontap-csi", root, "./cmd/ontap-csi", root, "test")
	})
	return ontapBin, ontapErr
}

// BuildTools returns the emulated legacy programs, built like OntapCSI.
func BuildTools() (Tools, error) {
	toolsOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			toolsErr = err
			return
		}
		mod := filepath.Join(root, "test", "kubelet")
		if tools.LegacyRegistrar, toolsErr = cachedBuild("legacyregistrar", mod, "./cmd/legacyregistrar", filepath.Join(mod, "cmd", "legacyregistrar")); toolsErr != nil {
			return
		}
		tools.TridentMain, toolsErr = cachedBuild("tridentmain", mod, "./cmd/tridentmain", filepath.Join(mod, "cmd", "tridentmain"))
	})
	return tools, toolsErr
}

// RepoRoot finds the repository root: the nearest directory above the
// working directory whose go.mod declares MainModule.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && mod == MainModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", MainModule)
		}
		dir = parent
	}
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// cachedBuild builds pkg in module dir modDir into the cache, named after
// a hash of the sources under srcDir (minus the skip subdirectories) and
// the module's go.mod and go.sum. A build of unchanged sources is reused.
func cachedBuild(name, modDir, pkg, srcDir string, skip ...string) (string, error) {
	cache := filepath.Join(os.TempDir(), "ontap-csi-kubelet-harness")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	key, err := sourceKey(modDir, srcDir, skip)
	if err != nil {
		return "", err
	}
	out := filepath.Join(cache, name+"-"+key)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	// Serialize builds across the scenario processes.
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp := out + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %v\n%s", pkg, modDir, err, b)
	}
	return out, os.Rename(tmp, out)
}

func sourceKey(modDir, srcDir string, skip []string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		if fi, err := os.Stat(filepath.Join(modDir, f)); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	err := filepath.WalkDir(srcDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(srcDir, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != srcDir {
				return filepath.SkipDir
			}
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %d\n", rel, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
