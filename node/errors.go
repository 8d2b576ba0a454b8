package node

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// codedError is an error that knows its gRPC code. Handlers return these (or
// plain errors, which are Internal); toStatus turns them into statuses, in
// one place for the whole service.
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

// toStatus maps a handler's error to the status the CO sees. A coded error
// anywhere in the chain wins; a context that ended is reported as such so the
// CO retries; anything else is Internal.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var ce *codedError
	switch {
	case errors.As(err, &ce):
		return status.Error(ce.code, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
