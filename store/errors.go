package store

import "github.com/stipend-mcp/stipend/internal/fault"

// The error vocabulary of the contract is defined once, in internal/fault
// (where the idempotency ledgers can share it without importing this
// package); these are its public names, and the ones callers use.

// Code classifies a store failure; see the constants for what each means.
type Code = fault.Code

// The error codes.
const (
	// CodeNotFound: the named document does not exist.
	CodeNotFound = fault.CodeNotFound
	// CodeConflict: a key reused with different parameters, or a state
	// change the current state does not allow.
	CodeConflict = fault.CodeConflict
	// CodeInvalid: the caller passed something the store cannot accept.
	CodeInvalid = fault.CodeInvalid
	// CodeUnavailable: the backend could not serve the call now; nothing
	// changed unless the error is Uncertain, and retrying with the same
	// idempotency key is safe.
	CodeUnavailable = fault.CodeUnavailable
	// CodeInternal: a bug, a deployment mistake or corrupt data.
	CodeInternal = fault.CodeInternal
)

// Codes returns every code, for callers that list them (a metric's series).
func Codes() []Code { return fault.Codes() }

// Error is the one error type stores return. A failed method changed
// nothing, unless Error.Uncertain is set.
type Error = fault.Error

// Sentinels for errors.Is; they match any *Error with the same code.
var (
	ErrNotFound    = fault.ErrNotFound
	ErrConflict    = fault.ErrConflict
	ErrInvalid     = fault.ErrInvalid
	ErrUnavailable = fault.ErrUnavailable
	ErrInternal    = fault.ErrInternal
)

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) error {
	return fault.Errorf(code, format, args...)
}

// Wrap returns an *Error with code around err.
func Wrap(code Code, err error, format string, args ...any) error {
	return fault.Wrap(code, err, format, args...)
}

// IsUncertain reports whether err is a store failure after which the change
// may have been applied (some *Error in its chain is Uncertain).
func IsUncertain(err error) bool { return fault.IsUncertain(err) }

// CodeOf returns the code of err, CodeInternal for an error that is not an
// *Error, and "" for nil.
func CodeOf(err error) Code { return fault.CodeOf(err) }
