// This test is inside the package: it classifies backend errors that no
// emulator produces on demand.

package firestore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/store"
)

// TestTranslateWrite checks which failed writes are marked Uncertain: those
// whose answer was lost, never those Firestore refused.
func TestTranslateWrite(t *testing.T) {
	for _, tt := range []struct {
		err           error
		wantCode      store.Code
		wantUncertain bool
	}{
		{status.Error(codes.Unavailable, "connection reset"), store.CodeUnavailable, true},
		{status.Error(codes.DeadlineExceeded, "deadline"), store.CodeUnavailable, true},
		{status.Error(codes.Internal, "backend"), store.CodeUnavailable, true},
		{fmt.Errorf("commit: %w", context.DeadlineExceeded), store.CodeUnavailable, true},
		{status.Error(codes.Aborted, "contention"), store.CodeUnavailable, false},
		{status.Error(codes.AlreadyExists, "exists"), store.CodeConflict, false},
		{status.Error(codes.FailedPrecondition, "update time"), store.CodeConflict, false},
		{status.Error(codes.InvalidArgument, "too big"), store.CodeInvalid, false},
		{status.Error(codes.PermissionDenied, "iam"), store.CodeUnavailable, false},
		{store.Errorf(store.CodeConflict, "payment is failed"), store.CodeConflict, false},
	} {
		err := translateWrite(tt.err, "write")
		if got := store.CodeOf(err); got != tt.wantCode {
			t.Errorf("translateWrite(%v): code %s, want %s", tt.err, got, tt.wantCode)
		}
		if got := store.IsUncertain(err); got != tt.wantUncertain {
			t.Errorf("translateWrite(%v): uncertain %v, want %v", tt.err, got, tt.wantUncertain)
		}
		if store.IsUncertain(translate(tt.err, "read")) {
			t.Errorf("translate(%v) (a read) is uncertain; only a sent write can be", tt.err)
		}
	}
	if store.IsUncertain(errors.New("plain")) || store.IsUncertain(nil) {
		t.Errorf("IsUncertain is true for an error that is not a store error")
	}
}
