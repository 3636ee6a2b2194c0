// Package field is the one validation error of the domain packages (money,
// entitlement, payment, receipt): it names the field of a document that was
// refused. The API turns it into a problem's errors[] entry (package
// problem); this package has no imports of its own, so every domain package
// can use it.
package field

import "errors"

// Error is a refused field. Field is a dotted path relative to the document
// being checked ("cents", "cost.cents", "grants[0].limit"); "" is the
// document as a whole. Err, if set, is the sentinel behind the failure (such
// as money.ErrOutOfRange), for errors.Is.
type Error struct {
	Field  string
	Reason string
	Err    error
}

// Error returns "field: reason", or the reason alone for the whole document.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap returns the sentinel behind the failure, if any.
func (e *Error) Unwrap() error { return e.Err }

// Within returns err as the failure of the field at path of a larger
// document: a *Error's field goes under path ("cost" and "cents" make
// "cost.cents"), any other error becomes a *Error on path that wraps it.
// A nil err stays nil.
func Within(path string, err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if !errors.As(err, &fe) {
		return &Error{Field: path, Reason: err.Error(), Err: err}
	}
	sub := path
	if path == "" {
		sub = fe.Field
	} else if fe.Field != "" {
		sub = path + "." + fe.Field
	}
	return &Error{Field: sub, Reason: fe.Reason, Err: fe.Err}
}
