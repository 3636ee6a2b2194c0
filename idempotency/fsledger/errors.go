package fsledger

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/store"
)

// The gRPC codes the ledger branches on; everything else goes through translate.
const (
	codeNotFound           = codes.NotFound
	codeAlreadyExists      = codes.AlreadyExists
	codeFailedPrecondition = codes.FailedPrecondition
)

// code returns err's gRPC code (codes.OK for nil).
func code(err error) codes.Code {
	return status.Code(err)
}

// translate maps a Firestore error to the store's error codes at the
// boundary, so callers never see gRPC codes. A permission failure counts as
// unavailable: the ledger fails closed and the write does not run.
func translate(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return store.Wrap(store.CodeUnavailable, err, format, args...)
	}
	switch code(err) {
	case codes.NotFound:
		return store.Wrap(store.CodeNotFound, err, format, args...)
	case codes.AlreadyExists, codes.FailedPrecondition, codes.Aborted:
		return store.Wrap(store.CodeConflict, err, format, args...)
	case codes.InvalidArgument:
		return store.Wrap(store.CodeInvalid, err, format, args...)
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted,
		codes.PermissionDenied, codes.Unauthenticated:
		return store.Wrap(store.CodeUnavailable, err, format, args...)
	default:
		return store.Wrap(store.CodeInternal, err, format, args...)
	}
}
