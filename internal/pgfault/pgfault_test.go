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
	"github.com/stipend-mcp/stipend/internal/fault/faulttest"
	"github.com/stipend-mcp/stipend/internal/pgfault"
)

func pgErr(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }

// TestTranslate covers the SQLSTATE classes and the other errors pgx
// returns: the code a read and a sent write get, and which failed writes
// are Uncertain (their answer was lost, never those the server refused). A
// read is never Uncertain (the same code for both: the kind of call does
// not matter to PostgreSQL's codes).
func TestTranslate(t *testing.T) {
	const (
		conflict    = fault.CodeConflict
		unavailable = fault.CodeUnavailable
		internal    = fault.CodeInternal
	)
	faulttest.Run(t, faulttest.Translation{Read: pgfault.Read, Write: pgfault.Write}, []faulttest.Case{
		{Name: "UniqueViolation", Err: pgErr("23505"), Read: conflict, Write: conflict},
		{Name: "CheckViolation", Err: pgErr("23514"), Read: internal, Write: internal},
		{Name: "SerializationFailure", Err: pgErr("40001"), Read: unavailable, Write: unavailable},
		{Name: "DeadlockDetected", Err: pgErr("40P01"), Read: unavailable, Write: unavailable},
		{Name: "LockTimeout", Err: pgErr("55P03"), Read: unavailable, Write: unavailable},
		{Name: "StatementTimeout", Err: pgErr("57014"), Read: unavailable, Write: unavailable},
		{Name: "IdleInTransactionTimeout", Err: pgErr("25P03"), Read: unavailable, Write: unavailable},
		{Name: "AdminShutdown", Err: pgErr("57P01"), Read: unavailable, Write: unavailable},
		{Name: "ReadOnlyStandby", Err: pgErr("25006"), Read: unavailable, Write: unavailable},
		{Name: "TooManyConnections", Err: pgErr("53300"), Read: unavailable, Write: unavailable},
		{Name: "ConnectionFailure", Err: pgErr("08006"), Read: unavailable, Write: unavailable},
		{Name: "AuthenticationFailed", Err: pgErr("28P01"), Read: unavailable, Write: unavailable},
		{Name: "InsufficientPrivilege", Err: pgErr("42501"), Read: unavailable, Write: unavailable},
		{Name: "UndefinedTable", Err: pgErr("42P01"), Read: internal, Write: internal},
		{Name: "NumericOutOfRange", Err: pgErr("22003"), Read: internal, Write: internal},
		{Name: "InternalError", Err: pgErr("XX000"), Read: internal, Write: internal},
		{Name: "wrapped server error", Err: fmt.Errorf("commit: %w", pgErr("40001")), Read: unavailable, Write: unavailable},
		{Name: "UnexpectedEOF", Err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "ConnClosed", Err: fmt.Errorf("query: %w", pgconn.ErrConnClosed), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "ClosedPool", Err: puddle.ErrClosedPool, Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "context.DeadlineExceeded", Err: fmt.Errorf("commit: %w", context.DeadlineExceeded), Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "context.Canceled", Err: context.Canceled, Read: unavailable, Write: unavailable, Uncertain: true},
		{Name: "not from the server", Err: errors.New("unable to encode 1.5 into binary format for int8"), Read: internal, Write: internal, Uncertain: true},
		{Name: "a store error", Err: fault.Errorf(fault.CodeConflict, "payment is failed"), Read: conflict, Write: conflict},
	})
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
