package vm

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

//go:embed image.sh
var imageScript []byte

// Image is a built VM image in the cache. It is never written to: every VM
// boots from a copy-on-write overlay of Disk.
type Image struct {
	Dir    string // <cache>/vm-<key>
	Disk   string // raw ext4 root file system
	Kernel string // vmlinuz
	Initrd string // initrd.img
}

// CacheDir is the e2e cache (test/cluster/localcluster): the image is
// kept there as vm-<key>. $ONTAP_CSI_E2E_CACHE, else
// $XDG_CACHE_HOME/ontap-csi/e2e, else ~/.cache/ontap-csi/e2e.
func CacheDir() string {
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

// imageKey names an image by what it is made of: the build script, which
// holds the suite and the package list. The mirror is not part of it: any
// mirror serves the same packages.
func imageKey() string {
	h := sha256.Sum256(imageScript)
	return hex.EncodeToString(h[:])[:16]
}

var imageOnce struct {
	sync.Mutex
	img *Image
}

// CachedImage returns the image, building it first if the cache has none
// (about 4 minutes; docs/vm.md). Concurrent builders, in this process or
// others, wait for one build: it runs under a lock file, in a temporary
// directory renamed into place when complete.
func CachedImage(t testing.TB) *Image {
	t.Helper()
	imageOnce.Lock()
	defer imageOnce.Unlock()
	if imageOnce.img != nil {
		return imageOnce.img
	}
	img, err := buildImage(CacheDir(), t.Logf)
	if err != nil {
		t.Fatalf("VM image: %v", err)
	}
	imageOnce.img = img
	return img
}

func buildImage(cache string, logf func(string, ...any)) (*Image, error) {
	key := "vm-" + imageKey()
	dir := filepath.Join(cache, key)
	img := &Image{Dir: dir, Disk: filepath.Join(dir, "disk.img"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	if complete(dir) {
		return img, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	lock, err := filelock.Acquire(context.Background(), filepath.Join(cache, key+".lock"), filelock.Exclusive, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if complete(dir) { // built by another process while we waited
		return img, nil
	}
	mirror, err := debianMirror()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(cache, key+".building-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "image.sh")
	if err := os.WriteFile(script, imageScript, 0o755); err != nil {
		return nil, err
	}
	logf("building the VM image %s from %s (about 4 minutes, once per cache)", key, mirror)
	start := time.Now()
	cmd := exec.Command("/bin/bash", script, tmp, mirror)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("image.sh: %v\n%s", err, tail(string(out), 8000))
	}
	os.Remove(script)
	if err := os.WriteFile(filepath.Join(tmp, "COMPLETE"), []byte(time.Since(start).Round(time.Second).String()+"\n"), 0o644); err != nil {
		return nil, err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	logf("built the VM image in %s", time.Since(start).Round(time.Second))
	return img, nil
}

func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "COMPLETE"))
	return err == nil
}

// debianMirror is the Debian archive apt uses on this machine: the first
// URI of a "deb" source for the Debian archive itself (not -security) in
// /etc/apt/sources.list or sources.list.d, one-line or deb822 format.
func debianMirror() (string, error) {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	files = append(append(files, "/etc/apt/sources.list"), lists...)
	for _, f := range files {
		if m := mirrorIn(f); m != "" {
			return m, nil
		}
	}
	return "", errors.New("no Debian mirror in /etc/apt/sources.list*: the image is built from Debian packages")
}

func mirrorIn(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimSpace(sc.Text()))
		var uris []string
		switch {
		case len(fields) >= 3 && fields[0] == "deb":
			uris = fields[1:2]
			if strings.HasPrefix(fields[1], "[") { // deb [opts] uri suite
				for i, fl := range fields {
					if strings.HasSuffix(fl, "]") && i+1 < len(fields) {
						uris = fields[i+1 : i+2]
						break
					}
				}
			}
		case len(fields) >= 2 && fields[0] == "URIs:":
			uris = fields[1:]
		}
		for _, u := range uris {
			if strings.HasSuffix(strings.TrimSuffix(u, "/"), "/debian") {
				return u
			}
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[…]\n" + s[len(s)-n:]
}
