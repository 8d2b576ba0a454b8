package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
)

// slowUmountHost is a host whose plain umount outlives its timeout: the
// tool is killed (the caller sees its context's error) but its helper
// finishes the unmount, as umount.nfs does on a busy node.
type slowUmountHost struct{ *fakeHost }

func (h slowUmountHost) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := h.fakeHost.Run(ctx, name, args...)
	if name == "umount" && len(args) == 1 && err == nil {
		return out, fmt.Errorf("umount: %w", context.DeadlineExceeded)
	}
	return out, err
}

func TestUnmountOfAMountGoneAfterATimeout(t *testing.T) {
	h := newFakeHost(t)
	const target = "/var/lib/kubelet/pods/pod-a/volumes/kubernetes.io~csi/pvc-1/mount"
	if _, err := h.Run(context.Background(), "mount", "-t", "nfs", "10.0.0.1:/vol", target); err != nil {
		t.Fatal(err)
	}
	m := &mounter{exec: slowUmountHost{h}, mountInfo: h.mountinfo}
	if err := m.unmount(context.Background(), target); err != nil {
		t.Fatalf("unmount: %v (calls %v)", err, h.calls)
	}
	// Not forced: the mount was gone when the timed-out umount returned.
	if len(h.calls) != 2 || h.calls[1] != "umount "+target {
		t.Errorf("calls %v, want the mount and one umount", h.calls)
	}
}

// deadServerHost is a host whose NFS server does not answer while the
// mount is busy: umount and umount -f fail with EBUSY, and a umount that
// resolves the path or runs umount.nfs blocks on the server's stat until
// it is killed. Only the kernel's detach (no canonicalization, no helper)
// removes the mount (docs/design/architecture.md §7.7).
type deadServerHost struct{ *fakeHost }

func (h deadServerHost) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name != "umount" {
		return h.fakeHost.Run(ctx, name, args...)
	}
	direct := slices.Contains(args, "--no-canonicalize") && slices.Contains(args, "--internal-only")
	switch {
	case slices.Contains(args, "-l") && direct:
		return h.fakeHost.Run(ctx, name, args...)
	case slices.Contains(args, "-l"):
		<-ctx.Done()
		return nil, fmt.Errorf("umount: %w", ctx.Err())
	}
	h.mu.Lock()
	h.calls = append(h.calls, strings.Join(append([]string{name}, args...), " "))
	h.mu.Unlock()
	if len(args) == 1 {
		// The plain umount hangs on the server until its timeout.
		return nil, fmt.Errorf("umount: %w", context.DeadlineExceeded)
	}
	return nil, &hostexec.ExitError{Name: name, Code: 16, Stderr: "umount.nfs4: " + args[len(args)-1] + ": device is busy"}
}

func TestUnmountOfABusyMountOverADeadServer(t *testing.T) {
	h := newFakeHost(t)
	const target = "/var/lib/kubelet/pods/pod-a/volumes/kubernetes.io~csi/pvc-1/mount"
	if _, err := h.Run(context.Background(), "mount", "-t", "nfs", "10.0.0.1:/vol", target); err != nil {
		t.Fatal(err)
	}
	m := &mounter{exec: deadServerHost{h}, mountInfo: h.mountinfo}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.unmount(ctx, target); err != nil {
		t.Fatalf("unmount: %v (calls %v)", err, h.calls)
	}
	if mounted, err := m.isMountPoint(target); err != nil || mounted {
		t.Errorf("still mounted: %v, %v (calls %v)", mounted, err, h.calls)
	}
}

// TestNotMountRoot: statx answers "nothing mounted" for a missing path and
// for a plain directory, and leaves a mount root, a bind mount from the same
// file system included, to the mount table.
func TestNotMountRoot(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	bound := filepath.Join(dir, "bound")
	for _, d := range []string{plain, bound} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bindOK := unix.Mount(plain, bound, "", unix.MS_BIND, "") == nil
	if bindOK {
		t.Cleanup(func() { unix.Unmount(bound, unix.MNT_DETACH) })
	}
	for _, tc := range []struct {
		name string
		path string
		want bool
		skip bool
	}{
		{name: "missing path", path: filepath.Join(dir, "missing"), want: true},
		{name: "plain directory", path: plain, want: true},
		{name: "root of a mount", path: "/proc", want: false},
		{name: "bind mount from the same file system", path: bound, want: false, skip: !bindOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("cannot bind-mount here (not root)")
			}
			if got := notMountRoot(tc.path); got != tc.want {
				t.Fatalf("notMountRoot(%s) = %v, want %v", tc.path, got, tc.want)
			}
			m := &mounter{statx: true}
			if got, err := m.mountedHere(tc.path); got == tc.want || err != nil {
				t.Fatalf("mountedHere(%s) = %v, %v; want %v", tc.path, got, err, !tc.want)
			}
		})
	}
}

// TestUnmountRemovesTheContainersCopy is the staging mount under Trident
// 20.10's DaemonSet: <kubelet-dir>/plugins is mounted into the container
// without propagation, so a container started after the volume was staged
// holds a copy of the staging mount at the bare path, beside the host's
// (seen at host root + path). The host's umount leaves the copy; unmount
// must remove it too, or the device stays open and the LUN's detach fails
// (docs/design/trident-compat.md §2.1). Without a host root, or with no copy, nothing is
// unmounted in the process's own namespace.
func TestUnmountRemovesTheContainersCopy(t *testing.T) {
	const staging = "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.trident.netapp.io/abc/globalmount"
	for _, tc := range []struct {
		name     string
		hostRoot string
		host     bool // the host still has the mount
		copies   int  // the container's copies at the bare path
		want     int  // unmounts in the process's namespace
	}{
		{"host mount and one copy", "/host", true, 1, 1},
		{"a retry: only the copy left", "/host", false, 1, 1},
		{"stacked copies", "/host", true, 2, 2},
		{"propagation: no copy", "/host", true, 0, 0},
		{"no host root", "", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.root = tc.hostRoot
			if tc.host {
				if _, err := h.Run(context.Background(), "mount", "-t", "ext4", "/dev/dm-0", staging); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < tc.copies; i++ {
				h.copies = append(h.copies, staging)
			}
			h.write()
			here := 0
			m := &mounter{exec: h, mountInfo: h.mountinfo, hostRoot: tc.hostRoot, unmountHere: func(p string) error {
				if p != staging {
					t.Errorf("unmounted %s in the process's namespace, want %s", p, staging)
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				if len(h.copies) == 0 {
					return unix.EINVAL
				}
				h.copies = h.copies[:len(h.copies)-1]
				here++
				h.write()
				return nil
			}}
			if err := m.unmount(context.Background(), staging); err != nil {
				t.Fatalf("unmount: %v", err)
			}
			if here != tc.want {
				t.Errorf("%d unmounts in the process's namespace, want %d", here, tc.want)
			}
			mis, err := mountsOf(h.mountinfo, staging)
			if err != nil || len(mis) != 0 {
				t.Errorf("mounts left at %s: %v (%v)", staging, mis, err)
			}
			if n := h.count("umount"); tc.host && n != 1 {
				t.Errorf("%d host umounts, want 1", n)
			}
		})
	}
}
