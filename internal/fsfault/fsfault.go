// Package fsfault is the one translation of Google Cloud Firestore's errors
// (gRPC status codes and context errors) into the store's error codes
// (internal/fault). The Firestore store and the Firestore idempotency ledger
// both translate through it, so one backend event gets one answer whichever
// of them met it; callers never see a gRPC code.
//
// The translation looks only at the gRPC code, never at the message text,
// and at one fact the caller supplies: whether the failed call sent a write
// (Write) or wrote nothing (Read).
package fsfault

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// translator is Firestore's reading of its errors in the one translation
// of internal/fault.
var translator = fault.Translator{Code: codeOf, AnswerLost: answerLost}

// Read translates the error of a call that wrote nothing: a get, a query,
// or a transaction that failed before its commit was sent. The result is
// never Uncertain. An error that already is a *fault.Error passes through
// unchanged, so transaction bodies may return domain errors.
func Read(err error, format string, args ...any) error {
	return translator.Read(err, format, args...)
}

// Write translates the error of a write or commit that was sent. When its
// answer was lost rather than refused (see answerLost), the error is
// Uncertain: Firestore may have applied it. An error that already is a
// *fault.Error passes through unchanged.
func Write(err error, format string, args ...any) error {
	return translator.Write(err, format, args...)
}

// codeOf maps err to the code a caller should act on. The rule: Unavailable
// for anything a retry with the same idempotency key may cure; Internal only
// for what no retry cures (a bug on our side, a deployment mistake, data
// loss). Corrupt data the adapters detect themselves is their own Internal
// error and never comes through here.
func codeOf(err error, sent bool) fault.Code {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fault.CodeUnavailable
	}
	st, ok := status.FromError(err)
	if !ok {
		// Not from the backend: the client library refused the call (a value
		// it cannot encode, a nil reference), which is a bug of ours.
		return fault.CodeInternal
	}
	switch st.Code() {
	case codes.NotFound:
		return fault.CodeNotFound
	case codes.AlreadyExists:
		return fault.CodeConflict
	case codes.FailedPrecondition:
		// A write's precondition (exists, update time) failed: the state
		// changed under the caller. A read has no precondition of ours, so
		// there it means the deployment is not fit for the query (a missing
		// composite index, a database in Datastore mode): no retry cures it.
		if sent {
			return fault.CodeConflict
		}
		return fault.CodeInternal
	case codes.InvalidArgument, codes.OutOfRange:
		return fault.CodeInvalid
	case codes.Aborted:
		// Contention: by the time an error reaches here the client's own
		// retries (the store's transaction loop) are spent. It is not a
		// conflict the caller caused; the same call may succeed later.
		return fault.CodeUnavailable
	case codes.Internal, codes.Unknown:
		// Google's error guidance for Firestore treats these as server
		// errors worth a retry, not as a fault of the request: a transient
		// failure of the backend, not a bug of ours. Were they to persist,
		// the Unavailable errors (and the store error metric) show it.
		return fault.CodeUnavailable
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted:
		return fault.CodeUnavailable
	case codes.PermissionDenied, codes.Unauthenticated:
		// A credential or IAM problem of the deployment: the store fails
		// closed (nothing runs) and answers as unavailable, which readiness
		// probes report, rather than blaming the caller.
		return fault.CodeUnavailable
	}
	// DataLoss, Unimplemented and codes this table does not know.
	return fault.CodeInternal
}

// answerLost reports whether a sent write failed without a definite answer:
// a deadline, a cancellation, a broken connection or a backend failing
// mid-way, or an error that is not a gRPC status at all. A refusal (not
// found, already exists, failed precondition, aborted, invalid argument,
// permission, quota) is definite: nothing was written.
func answerLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return true
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal, codes.Unknown, codes.DataLoss:
		return true
	}
	return false
}
