package server

import (
	"context"
	"errors"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
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
