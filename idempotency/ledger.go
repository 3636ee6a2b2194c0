// Package idempotency is Stipend's durable request idempotency ledger
// (ADR-0026): mutating REST routes that are not naturally idempotent require
// an Idempotency-Key header, and the ledger makes at most one attempt per key
// active at a time and replays the stored response of a finished one.
//
// The protocol, per key:
//
//  1. Reserve: an atomic create-if-absent of the key's row, in state
//     in_progress. Exactly one of any number of concurrent callers, on any
//     number of instances, wins; the others see the winner's row.
//  2. The winner runs the handler.
//  3. Complete (success: store the bounded response) or Release (a 4xx before
//     any write: delete the row). Both carry the reservation's update time as
//     a precondition, so an instance can never overwrite or delete a row
//     someone else (an operator, or a later reservation) wrote since.
//
// Anything uncertain (a 5xx, a crash, a response too large to store, a
// completion that failed) leaves the row in_progress. In-progress rows never
// expire by age: a later request with the key gets 409 and a sanitized
// reference, and an operator reconciles the row by compare-and-set
// (ResolveDelete or ResolveComplete) after proving what the upstream did.
//
// This is an at-most-one-active-attempt coordinator with replay, not a claim
// of distributed exactly-once execution.
//
// What is stored: the hashed key (the document ID; see HashKey), the request
// fingerprint (a hash; see Fingerprint), the state, the bounded response of a
// completed request, its expiry, and the operation and trace ids. The raw key
// and the caller's identity are never stored, used as an ID, or logged.
package idempotency

import (
	"context"
	"errors"
	"time"
)

// State is the lifecycle state of a ledger row.
type State string

// The row states.
const (
	// StateInProgress: a request holds the key, or held it and its outcome is
	// unknown. Never expires by age.
	StateInProgress State = "in_progress"
	// StateCompleted: the request finished and Response holds its result until
	// ExpireAt.
	StateCompleted State = "completed"
)

// MaxResponseBytes is the largest response the ledger stores: 800 KiB of
// serialized JSON (see Response.Size), which keeps a Firestore row well under
// its 1 MiB document limit. A larger successful response cannot be replayed,
// so its row stays in_progress for reconciliation rather than reopening the
// duplicate window.
const MaxResponseBytes = 800 * 1024

// MaxCorrelationLen bounds OperationID and TraceID; backends truncate longer
// values.
const MaxCorrelationLen = 128

// ErrResponseTooLarge is wrapped (with code store.CodeInvalid) by Complete and
// ResolveComplete when the response exceeds MaxResponseBytes. The row is left
// unchanged.
var ErrResponseTooLarge = errors.New("response exceeds the ledger's replay limit")

// Attempt is what a request asks Reserve for.
type Attempt struct {
	// ID is the hashed document ID, HashKey(namespace, route, key).
	ID string
	// Route names the route (for operators; it is also inside Fingerprint).
	Route string
	// Fingerprint is Fingerprint(method, route, body, principal).
	Fingerprint string
	// OperationID and TraceID correlate the row with logs; at most
	// MaxCorrelationLen bytes are kept.
	OperationID string
	TraceID     string
}

// Record is a stored ledger row.
type Record struct {
	ID          string
	Route       string
	Fingerprint string
	State       State
	OperationID string
	TraceID     string
	// CreatedAt is when the row was reserved (backend clock).
	CreatedAt time.Time
	// CompletedAt and ExpireAt are zero while the row is in progress.
	CompletedAt time.Time
	// ExpireAt is when a completed result stops being replayed. Firestore's
	// TTL policy on the expireAt field deletes the row some time after it.
	ExpireAt time.Time
	// Response is set only for completed rows.
	Response *Response
	// UpdateTime is the store's last write time of the row: the precondition
	// for Complete, Release, ResolveDelete and ResolveComplete.
	UpdateTime time.Time
}

// Expired reports whether r is a completed row whose result must no longer be
// replayed at now.
func (r Record) Expired(now time.Time) bool {
	return r.State == StateCompleted && !r.ExpireAt.IsZero() && !now.Before(r.ExpireAt)
}

// Outcome is what Reserve found.
type Outcome string

// The reservation outcomes.
const (
	// Reserved: this call created the row; the caller holds it and must
	// Complete it, Release it, or leave it for reconciliation.
	Reserved Outcome = "reserved"
	// InProgress: the row exists with the same fingerprint and is in progress.
	InProgress Outcome = "in_progress"
	// Replay: the row exists with the same fingerprint, is completed and has
	// not expired; Record.Response is the result to replay.
	Replay Outcome = "replay"
	// Mismatch: the row exists (in any state) with a different fingerprint:
	// the key was reused for a different request.
	Mismatch Outcome = "mismatch"
)

// Result is the answer of Reserve.
type Result struct {
	Outcome Outcome
	// Record is the row just created (Reserved) or the existing one.
	Record Record
}

// Reservation identifies the row version a caller holds: Complete and Release
// succeed only while the row's update time is still UpdateTime.
type Reservation struct {
	ID         string
	UpdateTime time.Time
}

// Reservation returns the hold a Reserved result gives its caller.
func (r Result) Reservation() Reservation {
	return Reservation{ID: r.Record.ID, UpdateTime: r.Record.UpdateTime}
}

// Ledger is the idempotency ledger contract. Every backend (memledger,
// fsledger, pgledger) passes conformance.RunLedgerTests and
// RunLedgerConcurrencyTests.
//
// Errors are *store.Error values (classify them with errors.Is and the store
// sentinels): store.ErrConflict when a precondition failed, store.ErrNotFound
// for an absent row, store.ErrInvalid for bad input, store.ErrUnavailable when
// the backend cannot be reached (the caller must not run the write).
type Ledger interface {
	// Reserve atomically creates the row a.ID in state in_progress if no row
	// exists, and otherwise reports the existing one (see Outcome). A
	// completed row whose ExpireAt has passed counts as absent: it is replaced
	// by a new reservation (Firestore's TTL deletion is asynchronous, so an
	// expired row may still be present). In-progress rows are never replaced.
	// Of any number of concurrent Reserve calls for one ID, exactly one
	// returns Reserved.
	Reserve(ctx context.Context, a Attempt) (Result, error)

	// Complete stores resp on the reserved row, sets state completed and
	// ExpireAt = expireAt, if and only if the row's update time is still
	// res.UpdateTime; otherwise (changed or deleted) it returns
	// store.ErrConflict and writes nothing. A response larger than
	// MaxResponseBytes is refused with ErrResponseTooLarge and the row stays in
	// progress.
	Complete(ctx context.Context, res Reservation, resp Response, expireAt time.Time) error

	// Release deletes the reserved row if and only if its update time is still
	// res.UpdateTime; otherwise it returns store.ErrConflict. Only the holder
	// of the reservation can release it.
	Release(ctx context.Context, res Reservation) error

	// Get returns the row id, or store.ErrNotFound. It returns expired rows
	// too: callers check Record.Expired.
	Get(ctx context.Context, id string) (Record, error)

	// Reference returns the sanitized, loggable reference of row id:
	// "<backend>/<collection>/<id>", e.g. "firestore/idem_1f2e…/9a8b…".
	Reference(id string) string

	// Inspect returns the row named by a Reference, for operators. A
	// reference to another backend or collection is store.ErrInvalid.
	Inspect(ctx context.Context, ref string) (Record, error)

	// ResolveDelete deletes the row named by ref if and only if its update
	// time equals expectUpdateTime (store.ErrConflict otherwise,
	// store.ErrNotFound when absent). Operators use it after proving that the
	// write never happened upstream; the next request with the key runs.
	ResolveDelete(ctx context.Context, ref string, expectUpdateTime time.Time) error

	// ResolveComplete completes the in-progress row named by ref with resp if
	// and only if its update time equals expectUpdateTime (store.ErrConflict
	// otherwise, or when the row is not in progress; store.ErrNotFound when
	// absent). Operators use it after proving that the write happened and
	// what it answered; the next request with the key replays resp.
	ResolveComplete(ctx context.Context, ref string, expectUpdateTime time.Time, resp Response, expireAt time.Time) error

	// Durable reports whether the ledger coordinates across processes and
	// survives restarts. Outside development, key-requiring routes refuse to
	// run on a ledger that is not durable.
	Durable() bool

	// Probe checks, without writing and within a bounded time, that the
	// ledger's store is reachable and readable, for /readyz. It returns
	// store.ErrUnavailable when it is not.
	Probe(ctx context.Context) error
}
