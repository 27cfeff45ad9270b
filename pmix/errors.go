package pmix

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Status implements error, as syscall.Errno does, so the status constants are
// this project's sentinel errors: errors.Is(err, pmix.ErrDuplicateKey) holds
// for the bare status, for an *Error carrying it, and for either wrapped with
// %w. Never return Success as an error; use [Status.AsError].
func (s Status) Error() string { return s.String() }

// Is lets a Status match an *Error of the same status and no code: a bare
// status is no sentinel's error.
func (s Status) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == "" && t.Status == s
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

// Error is an error that carries a PMIx status, a message that says what
// was wrong and, for the errors of a package's sentinel, that sentinel's
// code. Status and Code are two grains of identity, as nats.go's
// jetstream.APIError has Code and ErrorCode: many errors share a status
// (PMIX_ERR_INVALID_OPERATION is "agent shut down" as well as "already
// attached"), while a code names one sentinel ("agent.closed",
// "proto.already_attached").
//
// Under errors.Is an *Error matches a bare Status target by status, a
// sentinel (an *Error with a Code) by code, and an *Error without a code
// by status. Status, code and message cross the wire (docs/protocol.md), so
// a decoded error still matches: errors.Is(err, agent.ErrClosed) and
// errors.Is(err, pmix.ErrInvalidOperation) both hold for the error a client
// read from a closing agent.
type Error struct {
	Status Status
	// Code is "<package>.<name>" of the sentinel the error is, or derives
	// from; empty for an error that is only a status. Callers branch on it
	// through errors.Is and the sentinel, never by comparing strings.
	Code    string
	Message string
	wrapped error
}

// Errorf returns an *Error with the given status and a formatted message.
// An error given with %w stays reachable through errors.Unwrap; the name of
// the status is left out of the message (Error adds it once).
func Errorf(status Status, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Status: status, Message: stripStatus(err.Error(), status), wrapped: errors.Unwrap(err)}
}

// NewError returns an *Error with the given status and message.
func NewError(status Status, message string) *Error {
	return &Error{Status: status, Message: message}
}

// NewCodedError returns a sentinel: an *Error with a status, a code
// ("<package>.<name>", unique in the project) and a message. A package
// defines its sentinels with it in its errors.go; errors derived from one
// with fmt.Errorf("%w: …", sentinel) keep its code, also over the wire.
func NewCodedError(status Status, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Error formats as "<message> (PMIX_NAME)" or, with no message, the name.
// A message that already names the status (one a peer formatted so) is not
// given it twice.
func (e *Error) Error() string {
	name := e.Status.String()
	switch {
	case e.Message == "":
		return name
	case strings.Contains(e.Message, "("+name+")"):
		return e.Message
	}
	return e.Message + " (" + name + ")"
}

// Is reports whether target is a Status equal to e's, a sentinel (an *Error
// with a Code) with e's code, or an *Error without a code with e's status.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Status
	case *Error:
		if t.Code != "" {
			return t.Code == e.Code
		}
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

// CodeOf returns the code an error carries for the wire: that of the first
// *Error in err's chain with a code and the status StatusOf reports, or ""
// when there is none. A code thus always travels with its sentinel's
// status: an error that wrapped a sentinel under another status matches
// neither the sentinel nor its status once decoded.
func CodeOf(err error) string {
	status := StatusOf(err)
	code := ""
	walk(err, func(e error) bool {
		if pe, ok := e.(*Error); ok && pe.Code != "" && pe.Status == status {
			code = pe.Code
			return true
		}
		return false
	})
	return code
}

// walk calls f on err and the errors it wraps, depth first as errors.Is
// does, until f returns true.
func walk(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if walk(e, f) {
				return true
			}
		}
	}
	return false
}

// MessageOf returns the message an error carries for the wire: an *Error's
// own message, or err.Error() for any other error, without the name of the
// status StatusOf reports (the receiver shows it once, from the status).
func MessageOf(err error) string {
	if err == nil {
		return ""
	}
	if pe, ok := err.(*Error); ok {
		return stripStatus(pe.Message, pe.Status)
	}
	if _, ok := err.(Status); ok {
		return ""
	}
	return stripStatus(err.Error(), StatusOf(err))
}

// stripStatus removes " (PMIX_NAME)" of status s from msg: the text of an
// *Error wrapped into a message.
func stripStatus(msg string, s Status) string {
	return strings.ReplaceAll(msg, " ("+s.String()+")", "")
}

// MaxQuoted is how many bytes of a user's input Quote keeps.
const MaxQuoted = 64

// Quote quotes user input for an error message, as %q does, keeping at
// most MaxQuoted bytes (cut at a character boundary) and marking a cut
// with "…" after the closing quote: a 3000-byte key is not worth echoing
// whole.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
