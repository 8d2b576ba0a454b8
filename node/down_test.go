package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// Unpublish and unstage look the LUN up (sysfs, through the initiator)
// only for a mount that the volume's record does not identify: a mount
// Trident made, or one whose record was lost. The mounts the plugin made
// and recorded are told by the record alone, and a mount that is neither
// recorded nor the LUN's is still refused.
func TestDownLooksUpTheLUNOnlyForAMountItsRecordDoesNotName(t *testing.T) {
	tests := []struct {
		name string
		// setup stages and publishes pvc-1 at target and then changes
		// what the node knows of it.
		setup                  func(t *testing.T, ts *testService, staging, target string)
		unpublish, unstage     codes.Code
		findsUnpub, findsUnstg int
	}{
		{"both mounts recorded", func(*testing.T, *testService, string, string) {}, codes.OK, codes.OK, 0, 0},
		{"target mount not recorded: the bind shares the staging mount's identity", func(t *testing.T, ts *testService, staging, target string) {
			forgetMount(t, ts, "pvc-1", target)
		}, codes.OK, codes.OK, 0, 0},
		{"no mount recorded (Trident 23.01): kubelet's target path for the volume is trusted", func(t *testing.T, ts *testService, staging, target string) {
			forgetMount(t, ts, "pvc-1", target)
			forgetMount(t, ts, "pvc-1", staging)
		}, codes.OK, codes.OK, 0, 1},
		{"no mount recorded, target elsewhere", func(t *testing.T, ts *testService, staging, target string) {
			forgetMount(t, ts, "pvc-1", target)
			forgetMount(t, ts, "pvc-1", staging)
		}, codes.OK, codes.OK, 1, 1},
		{"staging mount not recorded", func(t *testing.T, ts *testService, staging, target string) {
			forgetMount(t, ts, "pvc-1", staging)
		}, codes.OK, codes.OK, 0, 1},
		{"staging path holds another device", func(t *testing.T, ts *testService, staging, target string) {
			ts.umount(t, target)
			ts.umount(t, staging)
			ts.mount(t, "-t", "ext4", "/dev/sdz", staging)
		}, codes.OK, codes.FailedPrecondition, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService(t)
			staging := ts.stageISCSI(t, "pvc-1", "ext4")
			target := ts.target(t, "pod-1", "pvc-1")
			if strings.HasSuffix(tc.name, "target elsewhere") {
				target = filepath.Join(ts.kubelet, "elsewhere", "target")
				if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
					t.Fatal(err)
				}
			}
			if err := ts.publish("pvc-1", staging, target, snw, false); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, ts, staging, target)

			ts.ini.find = 0
			_, err := ts.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target})
			wantCode(t, err, tc.unpublish)
			if ts.ini.find != tc.findsUnpub {
				t.Errorf("unpublish looked the LUN up %d times, want %d", ts.ini.find, tc.findsUnpub)
			}
			if ts.host.mountedAt(target) != nil {
				t.Error("the target is still mounted")
			}

			ts.ini.find = 0
			_, err = ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging})
			wantCode(t, err, tc.unstage)
			if ts.ini.find != tc.findsUnstg {
				t.Errorf("unstage looked the LUN up %d times, want %d", ts.ini.find, tc.findsUnstg)
			}
			if gone := ts.host.mountedAt(staging) == nil; gone != (tc.unstage == codes.OK) {
				t.Errorf("staging mount gone: %v, want %v", gone, tc.unstage == codes.OK)
			}
		})
	}
}

// forgetMount drops from vol's record the identity of the mount at path,
// as a record written by Trident, which keeps none, would be.
func forgetMount(t *testing.T, ts *testService, vol, path string) {
	t.Helper()
	info, err := ts.state.Read(vol)
	if err != nil {
		t.Fatal(err)
	}
	if info.MountAt(path) == "" {
		t.Fatalf("%s: no mount recorded at %s to forget", vol, path)
	}
	delete(info.Mounts, path)
	if err := ts.state.Write(vol, info); err != nil {
		t.Fatal(err)
	}
}
