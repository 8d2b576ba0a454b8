package server

import (
	"context"
	"errors"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestInterceptorCodes(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodePublishVolume"}
	req := &csi.NodePublishVolumeRequest{VolumeId: "pvc-1"}
	cases := []struct {
		name    string
		handler grpc.UnaryHandler
		want    codes.Code
	}{
		{"panic becomes Internal", func(context.Context, any) (any, error) { panic("boom") }, codes.Internal},
		{"plain error becomes Internal", func(context.Context, any) (any, error) { return nil, errors.New("raw") }, codes.Internal},
		{"status passes through", func(context.Context, any) (any, error) { return nil, status.Error(codes.NotFound, "gone") }, codes.NotFound},
		{"request id is set", func(ctx context.Context, _ any) (any, error) {
			if RequestID(ctx) == "" {
				return nil, status.Error(codes.FailedPrecondition, "no request id")
			}
			return &csi.NodePublishVolumeResponse{}, nil
		}, codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := unaryInterceptor(context.Background(), req, info, tc.handler)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.want)
			}
			if err != nil && resp != nil {
				t.Fatal("a failed call must not return a response")
			}
		})
	}
}

// TestTridentOperationSummary: controller calls are timed under Trident's
// operation names, with its success label; node calls are not (Trident's
// node does not time them).
func TestTridentOperationSummary(t *testing.T) {
	ok := func(context.Context, any) (any, error) { return &csi.CreateVolumeResponse{}, nil }
	fail := func(context.Context, any) (any, error) { return nil, status.Error(codes.Unavailable, "down") }
	clone := &csi.CreateVolumeRequest{Name: "c", VolumeContentSource: &csi.VolumeContentSource{}}
	for _, tc := range []struct {
		method  string
		req     any
		handler grpc.UnaryHandler
		op      string
		success string
	}{
		{"/csi.v1.Controller/CreateVolume", &csi.CreateVolumeRequest{Name: "v"}, ok, "volume_add", "true"},
		{"/csi.v1.Controller/CreateVolume", clone, fail, "volume_clone", "false"},
		{"/csi.v1.Controller/ControllerPublishVolume", &csi.ControllerPublishVolumeRequest{}, ok, "volume_publish", "true"},
		{"/csi.v1.Controller/DeleteSnapshot", &csi.DeleteSnapshotRequest{}, ok, "snapshot_delete", "true"},
	} {
		before := summaryCount(t, tc.op, tc.success)
		_, _ = unaryInterceptor(context.Background(), tc.req, &grpc.UnaryServerInfo{FullMethod: tc.method}, tc.handler)
		if after := summaryCount(t, tc.op, tc.success); after != before+1 {
			t.Errorf("%s: trident_operation_duration_milliseconds{operation=%q,success=%q} count %d -> %d", tc.method, tc.op, tc.success, before, after)
		}
	}
	if op := tridentOperation("NodeStageVolume", &csi.NodeStageVolumeRequest{}); op != "" {
		t.Errorf("NodeStageVolume timed as %q", op)
	}
}

func summaryCount(t *testing.T, op, success string) uint64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "trident_operation_duration_milliseconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == op && labels["success"] == success {
				return m.GetSummary().GetSampleCount()
			}
		}
	}
	return 0
}
