package node

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/node/iscsi"
)

func TestToStatus(t *testing.T) {
	kind := func(k error) error { return fmt.Errorf("attach LUN: %w: details", k) }
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"coded", invalidArgument("volume id missing"), codes.InvalidArgument},
		{"wrapped coded", fmt.Errorf("stage: %w", notFound("gone")), codes.NotFound},
		{"deadline", fmt.Errorf("login: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", context.Canceled, codes.Canceled},
		{"invalid target", kind(iscsi.ErrInvalidTarget), codes.InvalidArgument},
		{"CHAP refused", kind(iscsi.ErrAuthFailed), codes.PermissionDenied},
		{"serial mismatch", kind(iscsi.ErrSerialMismatch), codes.FailedPrecondition},
		{"device in use", kind(iscsi.ErrDeviceInUse), codes.FailedPrecondition},
		{"LUN to resize not attached", kind(iscsi.ErrNotAttached), codes.Internal},
		// A call whose context ended reports that, whatever else failed.
		{"context over kind", errors.Join(kind(iscsi.ErrAuthFailed), context.Canceled), codes.Canceled},
		{"coded over kind", &codedError{code: codes.Aborted, err: kind(iscsi.ErrSerialMismatch)}, codes.Aborted},
		{"plain", errors.New("iscsiadm exited with status 8"), codes.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := status.FromError(toStatus(tc.err))
			if st.Code() != tc.want || st.Message() != tc.err.Error() {
				t.Fatalf("toStatus = %v %q, want %v %q", st.Code(), st.Message(), tc.want, tc.err.Error())
			}
		})
	}
	if toStatus(nil) != nil {
		t.Fatal("toStatus(nil) is not nil")
	}
}

// The codes node/iscsi's failures reach the CO with, through each handler
// that calls it.
func TestISCSIFailureCodes(t *testing.T) {
	kind := func(k error) error { return fmt.Errorf("%w: details", k) }
	stage := func(ts *testService, t *testing.T) error {
		staging := ts.staging(t, "pvc-1")
		_, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
			VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: mountCapability("ext4", snw),
			PublishContext: with(iscsiContext, "iscsiLunSerial", "serial-pvc-1"),
		})
		return err
	}
	unstage := func(ts *testService, t *testing.T) error {
		_, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: ts.staging(t, "pvc-1")})
		return err
	}
	expand := func(ts *testService, t *testing.T) error {
		_, err := ts.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{VolumeId: "pvc-1", VolumePath: ts.staging(t, "pvc-1")})
		return err
	}
	// A publish that must mount the staging path first, and so find the
	// device.
	publish := func(ts *testService, t *testing.T) error {
		if _, err := ts.host.Run(context.Background(), "umount", ts.staging(t, "pvc-1")); err != nil {
			t.Fatal(err)
		}
		return ts.publish("pvc-1", ts.staging(t, "pvc-1"), ts.target(t, "pod-a", "pvc-1"), snw, false)
	}
	tests := []struct {
		name   string
		staged bool   // stage the volume before failing
		method string // the initiator method that fails, "" for a LUN gone
		err    error
		call   func(*testService, *testing.T) error
		want   codes.Code
	}{
		{"stage, CHAP refused", false, "Attach", kind(iscsi.ErrAuthFailed), stage, codes.PermissionDenied},
		{"stage, bad target", false, "Attach", kind(iscsi.ErrInvalidTarget), stage, codes.InvalidArgument},
		{"stage, serial mismatch", false, "Attach", kind(iscsi.ErrSerialMismatch), stage, codes.FailedPrecondition},
		{"stage, deadline", false, "Attach", fmt.Errorf("login: %w", context.DeadlineExceeded), stage, codes.DeadlineExceeded},
		{"stage, tool failed", false, "Attach", errors.New("iscsiadm exited with status 8"), stage, codes.Internal},
		{"unstage, device in use", true, "Detach", kind(iscsi.ErrDeviceInUse), unstage, codes.FailedPrecondition},
		{"expand, LUN gone", true, "", nil, expand, codes.Internal},
		{"expand, serial mismatch", true, "Resize", kind(iscsi.ErrSerialMismatch), expand, codes.FailedPrecondition},
		{"publish, LUN gone", true, "", nil, publish, codes.FailedPrecondition},
		{"publish, find failed", true, "Find", kind(iscsi.ErrSerialMismatch), publish, codes.FailedPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService(t)
			if tc.staged {
				ts.stageISCSI(t, "pvc-1", "ext4")
			}
			if tc.method == "" {
				delete(ts.ini.devices, "serial-pvc-1")
			} else {
				ts.ini.fail[tc.method] = tc.err
			}
			wantCode(t, tc.call(ts, t), tc.want)
		})
	}
}
