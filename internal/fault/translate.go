package fault

import (
	"errors"
	"fmt"
)

// Translator is one backend's reading of its own errors, and the one
// translation every backend's errors go through (internal/fsfault,
// internal/pgfault): nil stays nil, an *Error passes through unchanged (so
// transaction bodies may return domain errors), and anything else becomes
// an *Error with the code Code gives it, Uncertain when the call sent a
// write and AnswerLost says its answer was lost rather than refused.
type Translator struct {
	// Code maps a backend error to the code a caller acts on; sent says
	// whether the failed call sent a write.
	Code func(err error, sent bool) Code
	// AnswerLost reports whether a sent write failed without a definite
	// answer, so the change may have been applied.
	AnswerLost func(err error) bool
}

// Read translates the error of a call that wrote nothing. The result is
// never Uncertain.
func (t Translator) Read(err error, format string, args ...any) error {
	return t.translate(err, false, format, args)
}

// Write translates the error of a write that was sent: Uncertain when its
// answer was lost.
func (t Translator) Write(err error, format string, args ...any) error {
	return t.translate(err, true, format, args)
}

func (t Translator) translate(err error, sent bool, format string, args []any) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	return &Error{
		Code:      t.Code(err, sent),
		Message:   fmt.Sprintf(format, args...),
		Err:       err,
		Uncertain: sent && t.AnswerLost(err),
	}
}
