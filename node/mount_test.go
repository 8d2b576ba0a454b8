package node

import (
	"context"
	"fmt"
	"testing"
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
