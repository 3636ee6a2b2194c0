// Package pgfault is the one translation of PostgreSQL's errors (SQLSTATE
// codes, connection failures and context errors, as pgx reports them) into
// the store's error codes (internal/fault). The PostgreSQL store and the
// PostgreSQL idempotency ledger both translate through it, so one backend
// event gets one answer whichever of them met it; callers never see a
// SQLSTATE or a pgx error.
//
// The translation looks only at the SQLSTATE and the error's type, never at
// the message text, and at one fact the caller supplies: whether the failed
// call sent a write that may have committed (Write: a COMMIT, or a statement
// outside a transaction) or could not have (Read: a query, or any statement
// inside a transaction that then rolled back).
package pgfault

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// SQLSTATE codes the adapters branch on themselves.
const (
	UniqueViolation      = "23505"
	SerializationFailure = "40001"
	DeadlockDetected     = "40P01"
)

// translator is PostgreSQL's reading of its errors in the one translation
// of internal/fault.
var translator = fault.Translator{Code: codeOf, AnswerLost: answerLost}

// Read translates the error of a call that committed nothing. The result is
// never Uncertain. An error that already is a *fault.Error passes through
// unchanged, so transaction bodies may return domain errors.
func Read(err error, format string, args ...any) error {
	return translator.Read(err, format, args...)
}

// Write translates the error of a write that may have committed: a COMMIT,
// or a statement run outside a transaction. When its answer was lost rather
// than refused (see answerLost), the error is Uncertain. An error that
// already is a *fault.Error passes through unchanged.
func Write(err error, format string, args ...any) error {
	return translator.Write(err, format, args...)
}

// State returns the SQLSTATE of err, or "" when err is not an error the
// server reported.
func State(err error) string {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code
	}
	return ""
}

// Retryable reports whether a transaction that failed with err may succeed
// if run again from the start: contention, a serialization failure or a
// deadlock the server broke. (A unique guard taken by another transaction
// is not an error here: the adapters insert guards with ON CONFLICT DO
// NOTHING and start over themselves, so a unique violation that does reach
// this is a conflict.)
func Retryable(err error) bool {
	switch State(err) {
	case SerializationFailure, DeadlockDetected:
		return true
	}
	return false
}

// codeOf maps err to the code a caller should act on. The rule, as for
// Firestore: Unavailable for anything a retry with the same idempotency key
// may cure; Internal only for what no retry cures (a bug of ours, a schema
// that is not migrated, corrupt data). Corrupt data the adapters detect
// themselves is their own Internal error and never comes through here.
// Unlike Firestore's, the code does not depend on whether the call sent a
// write.
func codeOf(err error, _ bool) fault.Code {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fault.CodeUnavailable
	}
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		if unreachable(err) {
			return fault.CodeUnavailable
		}
		// Not from the server and not the network: pgx refused the call
		// (a value it cannot encode, a scan into the wrong type), a bug.
		return fault.CodeInternal
	}
	switch pe.Code {
	case UniqueViolation:
		return fault.CodeConflict
	case SerializationFailure, DeadlockDetected:
		// Contention that outlasted the adapter's own retries: not the
		// caller's conflict; the same call may succeed later.
		return fault.CodeUnavailable
	case "55P03", "57014", "25P03", "25006", "42501":
		// lock_not_available and query_canceled (a lock_timeout or
		// statement_timeout of the deployment),
		// idle_in_transaction_session_timeout (the server ended a session
		// whose transaction sat idle, as one of a frozen instance does;
		// it rolled back), read_only_sql_transaction
		// (a failover left us on a standby), insufficient_privilege (a
		// grant of the deployment is missing: fail closed, as Firestore's
		// PermissionDenied does).
		return fault.CodeUnavailable
	}
	switch class := pe.Code[:2]; class {
	case "08", "53", "57", "58", "28":
		// Connection exceptions, insufficient resources (too many
		// connections, disk full), operator intervention (shutdown,
		// restart), system errors, and authentication failures.
		return fault.CodeUnavailable
	case "22":
		// Data exception: a value the schema refuses (out of range, bad
		// encoding). The domain checks input first, so this is a bug.
		return fault.CodeInternal
	}
	// Integrity violations other than a unique guard (a CHECK, a NOT NULL),
	// syntax and undefined objects (a schema that is not migrated), and
	// internal errors of the server.
	return fault.CodeInternal
}

// unreachable reports whether err (not a server error) means the server
// could not be reached or stopped answering.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	// puddle.ErrClosedPool: the store is shutting down.
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, puddle.ErrClosedPool) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// answerLost reports whether a write that may have committed failed without
// a definite answer. Any error the server reported is definite: a COMMIT
// that fails rolls back. A failure before anything was sent (SafeToRetry) is
// definite too. Everything else (a deadline, a cancellation, a broken
// connection) leaves the outcome unknown.
func answerLost(err error) bool {
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false
	}
	return !pgconn.SafeToRetry(err)
}
