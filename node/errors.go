package node

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/node/iscsi"
)

// codedError is an error that knows its gRPC code: handlers make one where
// they find a problem themselves (validation, node state). Errors of the
// packages below are wrapped (%w), never re-coded; toStatus turns all of
// them into statuses, in one place for the whole service.
type codedError struct {
	code codes.Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func newError(code codes.Code, format string, args ...any) error {
	return &codedError{code: code, err: fmt.Errorf(format, args...)}
}

func invalidArgument(format string, args ...any) error {
	return newError(codes.InvalidArgument, format, args...)
}

func notFound(format string, args ...any) error {
	return newError(codes.NotFound, format, args...)
}

func failedPrecondition(format string, args ...any) error {
	return newError(codes.FailedPrecondition, format, args...)
}

func alreadyExists(format string, args ...any) error {
	return newError(codes.AlreadyExists, format, args...)
}

func permissionDenied(format string, args ...any) error {
	return newError(codes.PermissionDenied, format, args...)
}

func aborted(format string, args ...any) error {
	return newError(codes.Aborted, format, args...)
}

func internal(format string, args ...any) error {
	return newError(codes.Internal, format, args...)
}

// iscsiCodes are the codes of node/iscsi's error kinds. Every one but
// InvalidArgument leaves kubelet retrying, which is right for all of them:
// a CHAP or serial problem is fixed on the storage side and the retry then
// succeeds.
var iscsiCodes = []struct {
	kind error
	code codes.Code
}{
	{iscsi.ErrInvalidTarget, codes.InvalidArgument},
	{iscsi.ErrAuthFailed, codes.PermissionDenied},
	{iscsi.ErrSerialMismatch, codes.FailedPrecondition},
	{iscsi.ErrDeviceInUse, codes.FailedPrecondition},
	// Only Resize fails so (Find answers "not attached" with no device): a
	// staged LUN to expand that is gone is Internal, as in Trident, so that
	// kubelet retries; FailedPrecondition would tell it not to (CSI spec,
	// NodeExpandVolume).
	{iscsi.ErrNotAttached, codes.Internal},
}

// toStatus maps a handler's error to the status the CO sees; it is the only
// place in the service that does. A coded error anywhere in the chain wins;
// a context that ended is reported as such so the CO retries; then the
// error kinds of the packages below; anything else is Internal.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(code(err), err.Error())
}

func code(err error) codes.Code {
	var ce *codedError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	for _, c := range iscsiCodes {
		if errors.Is(err, c.kind) {
			return c.code
		}
	}
	return codes.Internal
}
