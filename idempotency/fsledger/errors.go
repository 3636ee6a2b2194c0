package fsledger

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/internal/fault"
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
		return fault.Wrap(fault.CodeUnavailable, err, format, args...)
	}
	switch code(err) {
	case codes.NotFound:
		return fault.Wrap(fault.CodeNotFound, err, format, args...)
	case codes.AlreadyExists, codes.FailedPrecondition, codes.Aborted:
		return fault.Wrap(fault.CodeConflict, err, format, args...)
	case codes.InvalidArgument:
		return fault.Wrap(fault.CodeInvalid, err, format, args...)
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted,
		codes.PermissionDenied, codes.Unauthenticated:
		return fault.Wrap(fault.CodeUnavailable, err, format, args...)
	default:
		return fault.Wrap(fault.CodeInternal, err, format, args...)
	}
}
