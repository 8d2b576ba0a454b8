package server

import (
	"context"
	"fmt"
	"path"
	"runtime/debug"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// quietMethods are polled by kubelet and sidecars; they log at debug level so
// that one line per call stays readable for the calls that change something.
var quietMethods = map[string]bool{
	"Probe":                     true,
	"GetPluginInfo":             true,
	"GetPluginCapabilities":     true,
	"NodeGetCapabilities":       true,
	"NodeGetInfo":               true,
	"NodeGetVolumeStats":        true,
	"ControllerGetCapabilities": true,
	"GetCapacity":               true,
	"ListVolumes":               true,
	"ListSnapshots":             true,
}

type volumeIDGetter interface{ GetVolumeId() string }
type snapshotIDGetter interface{ GetSnapshotId() string }
type nameGetter interface{ GetName() string }

// unaryInterceptor gives every call a request id, one sanitized log line with
// its duration and code, a metric sample, and turns a panic into Internal
// instead of killing a process that kubelet depends on.
func unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	method := path.Base(info.FullMethod)
	id := newRequestID()
	ctx = WithRequestID(ctx, id)
	start := time.Now()

	fields := logrus.Fields{"req_id": id, "method": method}
	switch r := req.(type) {
	case volumeIDGetter:
		if v := r.GetVolumeId(); v != "" {
			fields["volume"] = v
		}
	case snapshotIDGetter:
		if v := r.GetSnapshotId(); v != "" {
			fields["snapshot"] = v
		}
	case nameGetter:
		if v := r.GetName(); v != "" {
			fields["name"] = v
		}
	}
	log := logrus.WithFields(fields)
	if log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		if m, ok := req.(proto.Message); ok {
			log.WithField("request", sanitizedText(m)).Debug("CSI call")
		}
	}

	defer func() {
		if p := recover(); p != nil {
			log.WithField("panic", p).Errorf("CSI call panicked\n%s", debug.Stack())
			resp, err = nil, status.Errorf(codes.Internal, "internal error in %s: %v", method, p)
		}
		code := status.Code(err)
		operationSeconds.WithLabelValues(method, code.String()).Observe(time.Since(start).Seconds())
		if op := tridentOperation(method, req); op != "" {
			ObserveTridentOperation(op, start, err)
		}
		l := log.WithFields(logrus.Fields{"code": code.String(), "duration": time.Since(start).Round(time.Microsecond).String()})
		switch {
		case err != nil && code != codes.NotFound && code != codes.AlreadyExists && code != codes.Unimplemented:
			l.WithField("error", status.Convert(err).Message()).Warn("CSI call failed")
		case err != nil:
			l.WithField("error", status.Convert(err).Message()).Info("CSI call done")
		case quietMethods[method]:
			l.Debug("CSI call done")
		default:
			l.Info("CSI call done")
		}
		if err == nil && log.Logger.IsLevelEnabled(logrus.DebugLevel) {
			if m, ok := resp.(proto.Message); ok {
				l.WithField("response", sanitizedText(m)).Debug("CSI response")
			}
		}
	}()
	resp, err = handler(ctx, req)
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			// Every service maps its errors to codes; anything else is a bug
			// we still answer with a code rather than Unknown.
			err = status.Error(codes.Internal, fmt.Sprint(err))
		}
	}
	return resp, err
}

// NewGRPCServer returns a gRPC server with the CSI interceptors installed.
func NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(unaryInterceptor)}, opts...)
	return grpc.NewServer(opts...)
}
