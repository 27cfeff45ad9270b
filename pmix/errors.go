package pmix

import (
	"errors"
	"fmt"
)

// Status implements error, as syscall.Errno does, so the status constants are
// this project's sentinel errors: errors.Is(err, pmix.ErrDuplicateKey) holds
// for the bare status, for an *Error carrying it, and for either wrapped with
// %w. Never return Success as an error; use [Status.AsError].
func (s Status) Error() string { return s.String() }

// Is lets a Status match an *Error of the same status.
func (s Status) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Status == s
	}
	return false
}

// AsError converts a status into an error: nil for Success, an *Error with no
// message otherwise.
func (s Status) AsError() error {
	if s == Success {
		return nil
	}
	return &Error{Status: s}
}

// Error is an error that carries a PMIx status and a message that says what
// was wrong. It matches any target of the same status under errors.Is, so a
// status survives a trip over the wire: decode status and message, build a
// new *Error, and errors.Is(err, pmix.ErrNotFound) still holds.
type Error struct {
	Status  Status
	Message string
	wrapped error
}

// Errorf returns an *Error with the given status and a formatted message.
// An error given with %w stays reachable through errors.Unwrap.
func Errorf(status Status, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Status: status, Message: err.Error(), wrapped: errors.Unwrap(err)}
}

// NewError returns an *Error with the given status and message.
func NewError(status Status, message string) *Error {
	return &Error{Status: status, Message: message}
}

// Error formats as "<message> (PMIX_NAME)" or, with no message, the name.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Message + " (" + e.Status.String() + ")"
}

// Is reports whether target is a Status or an *Error with e's status.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Status
	case *Error:
		return t.Status == e.Status
	}
	return false
}

// Unwrap returns the error given with %w to Errorf, if any.
func (e *Error) Unwrap() error { return e.wrapped }

// StatusOf returns the status an error carries: Success for nil; the status
// of the first *Error or Status in err's chain; ErrGeneral (PMIX_ERROR) for any
// other error.
func StatusOf(err error) Status {
	if err == nil {
		return Success
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Status
	}
	var s Status
	if errors.As(err, &s) {
		return s
	}
	return ErrGeneral
}

// MessageOf returns the message an error carries for the wire: an *Error's
// own message, or err.Error() for any other error.
func MessageOf(err error) string {
	if err == nil {
		return ""
	}
	var pe *Error
	if errors.As(err, &pe) && pe == err {
		return pe.Message
	}
	var s Status
	if errors.As(err, &s) && error(s) == err {
		return ""
	}
	return err.Error()
}
