package controller

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends"
)

// grpcError is the one place where failures become gRPC codes. Handlers
// return plain errors (or status errors for argument checks) and every RPC
// passes its error through here.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch backends.Kind(err) {
	case backends.ErrNotFound:
		return status.Error(codes.NotFound, err.Error())
	case backends.ErrAlreadyExists:
		return status.Error(codes.AlreadyExists, err.Error())
	case backends.ErrInUse:
		return status.Error(codes.FailedPrecondition, err.Error())
	case backends.ErrInvalid:
		return status.Error(codes.InvalidArgument, err.Error())
	case backends.ErrOutOfRange:
		return status.Error(codes.OutOfRange, err.Error())
	case backends.ErrExhausted:
		return status.Error(codes.ResourceExhausted, err.Error())
	case backends.ErrUnavailable:
		return status.Error(codes.Unavailable, err.Error())
	case backends.ErrPending:
		return status.Error(codes.Aborted, err.Error())
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, ErrNodeNotFound):
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// invalidArg is a missing or malformed request field.
func invalidArg(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func outOfRange(format string, args ...any) error {
	return status.Errorf(codes.OutOfRange, format, args...)
}

func notFound(format string, args ...any) error {
	return status.Errorf(codes.NotFound, format, args...)
}

// exhausted: nothing can hold the volume where it must be (topology).
func exhausted(format string, args ...any) error {
	return status.Errorf(codes.ResourceExhausted, format, args...)
}

func alreadyExists(format string, args ...any) error {
	return status.Errorf(codes.AlreadyExists, format, args...)
}

// pending answers a call that overlaps another on the same volume or name;
// the CO retries it (CSI: "operation pending for volume").
func pending(key string) error {
	return status.Errorf(codes.Aborted, "an operation on %s is already in progress", key)
}

// abortedToken answers a pagination token this plugin did not hand out
// (CSI: ABORTED for a bad starting_token).
func abortedToken(tok string) error {
	return status.Errorf(codes.Aborted, "starting token %q is not valid", tok)
}
