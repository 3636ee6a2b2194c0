// Package fault is the one error type of Stipend's stores and ledgers: an
// *Error with a small code enum. Package store re-exports every name here
// (store.Error, store.ErrNotFound, store.CodeOf, …) and that is the spelling
// callers use; this package exists so that what sits below the domain (the
// idempotency ledgers, the Firestore translation in internal/fsfault) can
// share the type without importing package store and, through it, the
// payment, receipt and entitlement packages.
package fault

import (
	"errors"
	"fmt"
)

// Code classifies a failure. Adapters translate their backend's errors
// (gRPC codes for Firestore, see internal/fsfault) into these at the
// boundary; callers never see backend errors directly.
type Code string

// The error codes.
const (
	// CodeNotFound: the named document does not exist.
	CodeNotFound Code = "not_found"
	// CodeConflict: an idempotency key was reused with different parameters, or a
	// state change is not allowed from the current state.
	CodeConflict Code = "conflict"
	// CodeInvalid: the caller passed something the store cannot accept.
	CodeInvalid Code = "invalid"
	// CodeUnavailable: the backend could not be reached, did not answer in
	// time, or could not serve the call now (contention, a transient backend
	// failure). The change was not applied, unless the error is Uncertain
	// (see Error.Uncertain); retrying with the same idempotency key is safe.
	CodeUnavailable Code = "unavailable"
	// CodeInternal: a bug, a deployment mistake (a missing index) or corrupt
	// data (for example a stored amount that is not an integer); the message
	// names the document.
	CodeInternal Code = "internal"
)

// Codes returns every code, in the order above.
func Codes() []Code {
	return []Code{CodeNotFound, CodeConflict, CodeInvalid, CodeUnavailable, CodeInternal}
}

// Error is the one error type stores return. A failed method changed
// nothing, unless Uncertain is set.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Uncertain marks a failure after which the change may have been
	// applied: a write or commit whose answer was lost (a deadline, a broken
	// connection, a backend failing mid-way). Only writes set it.
	Uncertain bool
}

// Error formats the code, the message and the cause.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause, so errors.Is and errors.As see through an *Error.
func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, ErrNotFound) and friends match by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Err == nil && t.Code == e.Code
}

// Sentinels for errors.Is; they match any *Error with the same code.
var (
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrConflict    = &Error{Code: CodeConflict}
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrUnavailable = &Error{Code: CodeUnavailable}
	ErrInternal    = &Error{Code: CodeInternal}
)

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with code around err.
func Wrap(code Code, err error, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// IsUncertain reports whether err is a failure after which the change may
// have been applied: some *Error in its chain is Uncertain (an adapter may
// wrap a write's error in another). Any other error, or nil, is not.
func IsUncertain(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if e, ok := err.(*Error); ok && e.Uncertain {
			return true
		}
	}
	return false
}

// CodeOf returns the code of err, CodeInternal for an error that is not an
// *Error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
