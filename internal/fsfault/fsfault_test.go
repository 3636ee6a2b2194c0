package fsfault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fault/faulttest"
	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// TestTranslate covers every gRPC code and the other errors Firestore's
// client returns: the code a read and a sent write get, and which failed
// writes are Uncertain (their answer was lost, never those Firestore
// refused). A read is never Uncertain; an error that already is a store
// error passes through unchanged (faulttest.Run).
func TestTranslate(t *testing.T) {
	const (
		notFound    = fault.CodeNotFound
		conflict    = fault.CodeConflict
		invalid     = fault.CodeInvalid
		unavailable = fault.CodeUnavailable
		internal    = fault.CodeInternal
	)
	faulttest.Run(t, faulttest.Translation{Read: fsfault.Read, Write: fsfault.Write}, []faulttest.Case{
		{Name: "Canceled", Err: status.Error(codes.Canceled, "canceled"), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "Unknown", Err: status.Error(codes.Unknown, "backend"), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "InvalidArgument", Err: status.Error(codes.InvalidArgument, "too big"), Read: invalid, Write: invalid},
		{Name: "DeadlineExceeded", Err: status.Error(codes.DeadlineExceeded, "deadline"), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "NotFound", Err: status.Error(codes.NotFound, "no document"), Read: notFound, Write: notFound},
		{Name: "AlreadyExists", Err: status.Error(codes.AlreadyExists, "exists"), Read: conflict, Write: conflict},
		{Name: "PermissionDenied", Err: status.Error(codes.PermissionDenied, "iam"), Read: unavailable, Write: unavailable},
		{Name: "ResourceExhausted", Err: status.Error(codes.ResourceExhausted, "quota"), Read: unavailable, Write: unavailable},
		// The message mentions an index in both cases: only the kind of call
		// decides, never the text.
		{Name: "FailedPrecondition", Err: status.Error(codes.FailedPrecondition, "the query requires an index"), Read: internal, Write: conflict},
		{Name: "Aborted", Err: status.Error(codes.Aborted, "contention"), Read: unavailable, Write: unavailable},
		{Name: "OutOfRange", Err: status.Error(codes.OutOfRange, "range"), Read: invalid, Write: invalid},
		{Name: "Unimplemented", Err: status.Error(codes.Unimplemented, "not here"), Read: internal, Write: internal},
		{Name: "Internal", Err: status.Error(codes.Internal, "backend"), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "Unavailable", Err: status.Error(codes.Unavailable, "connection reset"), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "DataLoss", Err: status.Error(codes.DataLoss, "lost"), Read: internal, Write: internal, Uncertain: true},
		{Name: "Unauthenticated", Err: status.Error(codes.Unauthenticated, "token"), Read: unavailable, Write: unavailable},
		{Name: "wrapped status", Err: fmt.Errorf("commit: %w", status.Error(codes.Aborted, "contention")), Read: unavailable, Write: unavailable},
		{Name: "context.DeadlineExceeded", Err: fmt.Errorf("commit: %w", context.DeadlineExceeded), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "context.Canceled", Err: context.Canceled, Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "not a gRPC status", Err: errors.New("firestore: nil DocumentRef"), Read: internal, Write: internal, Uncertain: true},
		{Name: "a store error", Err: fault.Errorf(fault.CodeConflict, "payment is failed"), Read: conflict, Write: conflict},
	})
}

func TestTranslate_Message(t *testing.T) {
	err := fsfault.Read(status.Error(codes.NotFound, "gone"), "get payment %q", "p1")
	if got, want := err.Error(), `not_found: get payment "p1": rpc error: code = NotFound desc = gone`; got != want {
		t.Errorf("Read(...).Error() = %q, want %q", got, want)
	}
	if got := fsfault.Read(nil, "x"); got != nil {
		t.Errorf("Read(nil) = %v, want nil", got)
	}
	if got := fsfault.Write(nil, "x"); got != nil {
		t.Errorf("Write(nil) = %v, want nil", got)
	}
}
