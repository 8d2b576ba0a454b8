package ontap

import (
	"fmt"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// failure turns a client error into a backend error of the right kind,
// saying what was being done.
func (d *driver) failure(err error, format string, args ...any) error {
	return wrapFailure(kindOf(err, false), err, format, args...)
}

// createFailure is failure for a create, where ONTAP's "not found" names
// something the request refers to (see kindOf).
func (d *driver) createFailure(err error, format string, args ...any) error {
	return wrapFailure(kindOf(err, true), err, format, args...)
}

func wrapFailure(kind, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if kind != nil {
		return backends.Errorf(kind, "%s: %w", msg, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// kindOf maps the class of a client error to a backend error kind, nil
// when none fits: the one place where ONTAP's classes meet the kinds the
// controller maps to gRPC codes. In a create, ONTAP's "not found" means the
// request named something that does not exist (an export or snapshot
// policy, an aggregate, a clone's source), which CSI calls an invalid
// argument.
func kindOf(err error, inCreate bool) error {
	switch rest.ClassOf(err) {
	case rest.ClassNotFound:
		if inCreate {
			return backends.ErrInvalid
		}
		return backends.ErrNotFound
	case rest.ClassAlreadyExists:
		return backends.ErrAlreadyExists
	case rest.ClassInUse:
		return backends.ErrInUse
	case rest.ClassInvalid:
		return backends.ErrInvalid
	case rest.ClassThrottled, rest.ClassAuth:
		return backends.ErrUnavailable
	}
	return nil
}
