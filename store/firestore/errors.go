package firestore

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backend errors become store errors in one place, internal/fsfault:
// fsfault.Read for a call that wrote nothing, fsfault.Write for a write or
// commit that was sent (its lost answers are Uncertain). The helpers below
// only branch on a gRPC code; they translate nothing.

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
