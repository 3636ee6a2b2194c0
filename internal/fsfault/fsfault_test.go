package fsfault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// TestTranslate covers every gRPC code and the other errors Firestore's
// client returns: the code a read and a sent write get, and which failed
// writes are Uncertain (their answer was lost, never those Firestore
// refused). A read is never Uncertain.
func TestTranslate(t *testing.T) {
	const (
		notFound    = fault.CodeNotFound
		conflict    = fault.CodeConflict
		invalid     = fault.CodeInvalid
		unavailable = fault.CodeUnavailable
		internal    = fault.CodeInternal
	)
	for _, tt := range []struct {
		name          string
		err           error
		wantRead      fault.Code
		wantWrite     fault.Code
		wantUncertain bool // of the write
	}{
		{"Canceled", status.Error(codes.Canceled, "canceled"), unavailable, unavailable, true},
		{"Unknown", status.Error(codes.Unknown, "backend"), unavailable, unavailable, true},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "too big"), invalid, invalid, false},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "deadline"), unavailable, unavailable, true},
		{"NotFound", status.Error(codes.NotFound, "no document"), notFound, notFound, false},
		{"AlreadyExists", status.Error(codes.AlreadyExists, "exists"), conflict, conflict, false},
		{"PermissionDenied", status.Error(codes.PermissionDenied, "iam"), unavailable, unavailable, false},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "quota"), unavailable, unavailable, false},
		// The message mentions an index in both cases: only the kind of call
		// decides, never the text.
		{"FailedPrecondition", status.Error(codes.FailedPrecondition, "the query requires an index"), internal, conflict, false},
		{"Aborted", status.Error(codes.Aborted, "contention"), unavailable, unavailable, false},
		{"OutOfRange", status.Error(codes.OutOfRange, "range"), invalid, invalid, false},
		{"Unimplemented", status.Error(codes.Unimplemented, "not here"), internal, internal, false},
		{"Internal", status.Error(codes.Internal, "backend"), unavailable, unavailable, true},
		{"Unavailable", status.Error(codes.Unavailable, "connection reset"), unavailable, unavailable, true},
		{"DataLoss", status.Error(codes.DataLoss, "lost"), internal, internal, true},
		{"Unauthenticated", status.Error(codes.Unauthenticated, "token"), unavailable, unavailable, false},
		{"wrapped status", fmt.Errorf("commit: %w", status.Error(codes.Aborted, "contention")), unavailable, unavailable, false},
		{"context.DeadlineExceeded", fmt.Errorf("commit: %w", context.DeadlineExceeded), unavailable, unavailable, true},
		{"context.Canceled", context.Canceled, unavailable, unavailable, true},
		{"not a gRPC status", errors.New("firestore: nil DocumentRef"), internal, internal, true},
		{"a store error", fault.Errorf(fault.CodeConflict, "payment is failed"), conflict, conflict, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read := fsfault.Read(tt.err, "read %s", "doc")
			if got := fault.CodeOf(read); got != tt.wantRead {
				t.Errorf("Read(%v): code %s, want %s", tt.err, got, tt.wantRead)
			}
			if fault.IsUncertain(read) {
				t.Errorf("Read(%v) is Uncertain; only a sent write can be", tt.err)
			}
			write := fsfault.Write(tt.err, "write %s", "doc")
			if got := fault.CodeOf(write); got != tt.wantWrite {
				t.Errorf("Write(%v): code %s, want %s", tt.err, got, tt.wantWrite)
			}
			if got := fault.IsUncertain(write); got != tt.wantUncertain {
				t.Errorf("Write(%v): uncertain %v, want %v", tt.err, got, tt.wantUncertain)
			}
			if !errors.Is(write, tt.err) {
				t.Errorf("Write(%v) = %v: lost its cause", tt.err, write)
			}
		})
	}
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

// TestTranslate_PassThrough checks that an error that already is a store
// error comes back as it was, Uncertain or not.
func TestTranslate_PassThrough(t *testing.T) {
	lost := &fault.Error{Code: fault.CodeUnavailable, Message: "commit", Uncertain: true}
	for _, err := range []error{lost, fmt.Errorf("consume: %w", lost)} {
		if got := fsfault.Read(err, "read"); got != err {
			t.Errorf("Read(%v) = %v, want it unchanged", err, got)
		}
		if got := fsfault.Write(err, "write"); got != err {
			t.Errorf("Write(%v) = %v, want it unchanged", err, got)
		}
	}
}
