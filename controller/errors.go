package controller

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends"
)

// Errors become gRPC codes here and nowhere else. Every exported CSI method
// is a thin wrapper that passes the error of its unexported implementation
// through toStatus. Implementations return plain errors: a backend's error
// (classified by backends.Kind), a context error, ErrNodeNotFound, or one
// of the constructors below for what the controller itself refuses.

// codedError is a refusal of the controller's own, with the code the CSI
// spec gives it.
type codedError struct {
	code codes.Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func newError(code codes.Code, format string, args ...any) error {
	return &codedError{code: code, err: fmt.Errorf(format, args...)}
}

// invalidArg is a missing or malformed request field.
func invalidArg(format string, args ...any) error {
	return newError(codes.InvalidArgument, format, args...)
}

func outOfRange(format string, args ...any) error {
	return newError(codes.OutOfRange, format, args...)
}

func notFound(format string, args ...any) error {
	return newError(codes.NotFound, format, args...)
}

// exhausted: nothing can hold the volume where it must be (topology).
func exhausted(format string, args ...any) error {
	return newError(codes.ResourceExhausted, format, args...)
}

// failedPrecondition: something the request depends on is not there or not
// ready yet (the claim, its clone source); the CO retries.
func failedPrecondition(format string, args ...any) error {
	return newError(codes.FailedPrecondition, format, args...)
}

func alreadyExists(format string, args ...any) error {
	return newError(codes.AlreadyExists, format, args...)
}

// unconfigured: the controller has no backend at all, as Trident before its
// first backend is added; the CO retries. Unlike backends.ErrUnavailable it
// does not make GetCapacity fail: nothing is configured, so nothing fits.
func unconfigured(format string, args ...any) error {
	return newError(codes.Unavailable, format, args...)
}

// pending answers a call that overlaps another on the same volume or name;
// the CO retries it (CSI: "operation pending for volume").
func pending(key string) error {
	return newError(codes.Aborted, "an operation on %s is already in progress", key)
}

// abortedToken answers a pagination token this plugin did not hand out
// (CSI: ABORTED for a bad starting_token).
func abortedToken(tok string) error {
	return newError(codes.Aborted, "starting token %q is not valid", tok)
}

// reply ends every CSI method: the response, or the error as the status the
// CO sees.
func reply[R any](resp *R, err error) (*R, error) {
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// toStatus maps an implementation's error to its gRPC status.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(codeOf(err), err.Error())
}

// kindCodes are the codes of the backends' error kinds.
var kindCodes = map[error]codes.Code{
	backends.ErrNotFound:      codes.NotFound,
	backends.ErrAlreadyExists: codes.AlreadyExists,
	backends.ErrInUse:         codes.FailedPrecondition,
	backends.ErrInvalid:       codes.InvalidArgument,
	backends.ErrOutOfRange:    codes.OutOfRange,
	backends.ErrExhausted:     codes.ResourceExhausted,
	backends.ErrUnavailable:   codes.Unavailable,
	backends.ErrPending:       codes.Aborted,
	backends.ErrNotFenced:     codes.Unavailable, // fencing.go: the detach is retried
}

// codeOf classifies err: the controller's own refusal first, then the
// backend's kind (the outermost, decided with the most context), then a
// context that ended (so the CO retries), then an unknown node. Anything
// else is a bug or a failure nobody classified: Internal.
func codeOf(err error) codes.Code {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	if c, ok := kindCodes[backends.Kind(err)]; ok {
		return c
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, ErrNodeNotFound):
		return codes.NotFound
	}
	return codes.Internal
}
