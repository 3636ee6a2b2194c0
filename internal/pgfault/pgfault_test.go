package pgfault_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/pgfault"
)

func pgErr(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }

// TestTranslate covers the SQLSTATE classes and the other errors pgx
// returns: the code a read and a sent write get, and which failed writes
// are Uncertain (their answer was lost, never those the server refused). A
// read is never Uncertain.
func TestTranslate(t *testing.T) {
	const (
		conflict    = fault.CodeConflict
		unavailable = fault.CodeUnavailable
		internal    = fault.CodeInternal
	)
	for _, tt := range []struct {
		name          string
		err           error
		want          fault.Code
		wantUncertain bool // of the write
	}{
		{"UniqueViolation", pgErr("23505"), conflict, false},
		{"CheckViolation", pgErr("23514"), internal, false},
		{"SerializationFailure", pgErr("40001"), unavailable, false},
		{"DeadlockDetected", pgErr("40P01"), unavailable, false},
		{"LockTimeout", pgErr("55P03"), unavailable, false},
		{"StatementTimeout", pgErr("57014"), unavailable, false},
		{"IdleInTransactionTimeout", pgErr("25P03"), unavailable, false},
		{"AdminShutdown", pgErr("57P01"), unavailable, false},
		{"ReadOnlyStandby", pgErr("25006"), unavailable, false},
		{"TooManyConnections", pgErr("53300"), unavailable, false},
		{"ConnectionFailure", pgErr("08006"), unavailable, false},
		{"AuthenticationFailed", pgErr("28P01"), unavailable, false},
		{"InsufficientPrivilege", pgErr("42501"), unavailable, false},
		{"UndefinedTable", pgErr("42P01"), internal, false},
		{"NumericOutOfRange", pgErr("22003"), internal, false},
		{"InternalError", pgErr("XX000"), internal, false},
		{"wrapped server error", fmt.Errorf("commit: %w", pgErr("40001")), unavailable, false},
		{"UnexpectedEOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), unavailable, true},
		{"ConnClosed", fmt.Errorf("query: %w", pgconn.ErrConnClosed), unavailable, true},
		{"ClosedPool", puddle.ErrClosedPool, unavailable, true},
		{"context.DeadlineExceeded", fmt.Errorf("commit: %w", context.DeadlineExceeded), unavailable, true},
		{"context.Canceled", context.Canceled, unavailable, true},
		{"not from the server", errors.New("unable to encode 1.5 into binary format for int8"), internal, true},
		{"a store error", fault.Errorf(fault.CodeConflict, "payment is failed"), conflict, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				call          string
				err           error
				wantUncertain bool
			}{
				{"Read", pgfault.Read(tt.err, "read %s", "row"), false},
				{"Write", pgfault.Write(tt.err, "write %s", "row"), tt.wantUncertain},
			} {
				if got := fault.CodeOf(c.err); got != tt.want {
					t.Errorf("%s(%v): code %q, want %q", c.call, tt.err, got, tt.want)
				}
				if got := fault.IsUncertain(c.err); got != c.wantUncertain {
					t.Errorf("%s(%v): uncertain %v, want %v", c.call, tt.err, got, c.wantUncertain)
				}
				if !errors.Is(c.err, tt.err) {
					t.Errorf("%s(%v) = %v: the cause is lost", c.call, tt.err, c.err)
				}
			}
		})
	}
	if pgfault.Read(nil, "x") != nil || pgfault.Write(nil, "x") != nil {
		t.Error("a nil error translated to non-nil")
	}
}

func TestRetryable(t *testing.T) {
	for code, want := range map[string]bool{"40001": true, "40P01": true, "23505": false, "57014": false} {
		if got := pgfault.Retryable(pgErr(code)); got != want {
			t.Errorf("Retryable(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
	if pgfault.Retryable(errors.New("other")) {
		t.Error("Retryable(a non-server error) = true, want false")
	}
}
