package firestore

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/store"
)

// translate is the one place where Firestore and gRPC errors become store
// errors; what says which operation failed. An error that already is a
// *store.Error passes through unchanged, so transaction bodies may return
// domain errors.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var se *store.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return store.Wrap(store.CodeUnavailable, err, "%s", what)
	}
	return store.Wrap(codeOf(err), err, "%s", what)
}

// translateWrite is translate for a write that was sent: when its answer was
// lost rather than refused, the error is marked Uncertain, since Firestore
// may have applied it.
func translateWrite(err error, what string) error {
	err = translate(err, what)
	var se *store.Error
	if errors.As(err, &se) && answerLost(se.Err) {
		se.Uncertain = true
	}
	return err
}

// answerLost reports whether a sent write failed without a definite answer:
// a deadline, a cancellation, a broken connection or a backend failing
// mid-way. A refusal (not found, already exists, failed precondition,
// aborted, invalid argument, permission) is definite: nothing was written.
func answerLost(err error) bool {
	if err == nil {
		return false
	}
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

// codeOf maps a gRPC status code to a store code.
func codeOf(err error) store.Code {
	st, ok := status.FromError(err)
	if !ok {
		return store.CodeInternal
	}
	switch st.Code() {
	case codes.NotFound:
		return store.CodeNotFound
	case codes.AlreadyExists:
		return store.CodeConflict
	case codes.FailedPrecondition:
		// A missing composite index is a deployment bug, not a conflict.
		if strings.Contains(st.Message(), "index") {
			return store.CodeInternal
		}
		return store.CodeConflict
	case codes.InvalidArgument, codes.OutOfRange:
		return store.CodeInvalid
	case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled,
		codes.ResourceExhausted, codes.Internal, codes.Unknown,
		codes.PermissionDenied, codes.Unauthenticated:
		// Aborted here means contention outlived every retry; the rest mean
		// the backend could not serve the call now.
		return store.CodeUnavailable
	}
	return store.CodeInternal
}

// retryable reports whether a transaction attempt failed in a way that a
// new attempt can fix: contention (Aborted), or a create that lost a race
// (AlreadyExists), which the next attempt reads as an existing document.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Aborted, codes.AlreadyExists:
		return true
	}
	return false
}

// isNotFound reports whether err is Firestore's missing-document error.
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
