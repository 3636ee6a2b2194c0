// Package idempotency is Stipend's durable request idempotency ledger
// (ADR-0026): mutating REST routes that are not naturally idempotent require
// an Idempotency-Key header, and the ledger makes at most one attempt per key
// active at a time and replays the stored response of a finished one.
//
// The protocol, per key:
//
//  1. Reserve: an atomic create-if-absent of the key's row, in state
//     in_progress, with a random token of this reservation. Exactly one of
//     any number of concurrent callers, on any number of instances, wins;
//     the others see the winner's row.
//  2. The winner runs the handler. On a fenced route (Options.Fenced) the
//     handler's store change carries the reservation's fence (Ledger.Fence,
//     store.WithFence): the store refuses the change if the reservation no
//     longer holds, and otherwise marks the row written in the same atomic
//     step as the change.
//  3. Complete (success: store the bounded response) or Release (a 4xx before
//     any write: delete the row). Both succeed only while the row is still
//     this reservation (same token, in progress), so an instance can never
//     overwrite or delete a row someone else (an operator, or a later
//     reservation) wrote since; Release also refuses a row marked written.
//
// Anything uncertain (a 5xx, a crash, a response too large to store, a
// completion that failed) leaves the row in_progress, and a later request
// with the key gets 409 and a sanitized reference. In-progress rows never
// expire by age. Two ways settle them, both by compare-and-set:
//
//   - A fenced row that is not marked written is proven unwritten: its
//     change did not commit, and once the row is gone it never will (its
//     fence fails). The next request with the key, once the row is older
//     than the handler's own bound (Options.ReclaimAfter), reclaims it
//     (Ledger.Reclaim) and runs. Age decides only when that is tried; the
//     fence decides whether it is safe.
//   - Anything else (an unfenced row, or one marked written whose response
//     was lost) stays for an operator, who reconciles it (ResolveDelete or
//     ResolveComplete) after proving what the upstream did.
//
// This is an at-most-one-active-attempt coordinator with replay, not a claim
// of distributed exactly-once execution.
//
// What is stored: the hashed key (the document ID; see HashKey), the request
// fingerprint (a hash; see Fingerprint), the state, whether the route is
// fenced and when its change was written, the bounded response of a
// completed request, its expiry, the reservation's token, and the operation
// and trace ids. The raw key and the caller's identity are never stored,
// used as an ID, or logged.
package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fence"
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
	// Fenced says that the handler makes its change only through store
	// calls that check the reservation's fence (Options.Fenced). Only a
	// fenced row can be reclaimed.
	Fenced bool
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
	// Fenced is the reservation's Attempt.Fenced.
	Fenced bool
	// WrittenAt is when a fenced change of the reservation committed (the
	// store's clock); zero while none has. A row with WrittenAt is never
	// reclaimed or released: its holder completes it, or an operator.
	WrittenAt time.Time
	// CompletedAt and ExpireAt are zero while the row is in progress.
	CompletedAt time.Time
	// ExpireAt is when a completed result stops being replayed. Firestore's
	// TTL policy on the expireAt field deletes the row some time after it.
	ExpireAt time.Time
	// Response is set only for completed rows.
	Response *Response
	// UpdateTime is the store's last write time of the row: the precondition
	// for Reclaim, ResolveDelete and ResolveComplete.
	UpdateTime time.Time
	// Token is the random token of the reservation that made the row: what
	// its holder's Complete, Release and fence check. It is not shown to
	// clients or operators.
	Token string
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

// Reservation identifies the reservation a caller holds: Complete and
// Release succeed only while row ID is still in progress under Token.
type Reservation struct {
	ID    string
	Token string
}

// Reservation returns the hold a Reserved result gives its caller.
func (r Result) Reservation() Reservation {
	return Reservation{ID: r.Record.ID, Token: r.Record.Token}
}

// Reclaimable reports whether r may be reclaimed at now, after a holder's
// bound of after: a fenced row in progress, not marked written, last
// changed at least after ago. The age only says when to try; Reclaim
// decides.
func (r Record) Reclaimable(now time.Time, after time.Duration) bool {
	return r.State == StateInProgress && r.Fenced && r.WrittenAt.IsZero() && !now.Before(r.UpdateTime.Add(after))
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
	// ExpireAt = expireAt, if and only if the row is still the reservation
	// res, in progress (a fenced change's mark does not change that);
	// otherwise (completed, deleted, or reserved again) it returns
	// store.ErrConflict and writes nothing. A response larger than
	// MaxResponseBytes is refused with ErrResponseTooLarge and the row stays
	// in progress.
	Complete(ctx context.Context, res Reservation, resp Response, expireAt time.Time) error

	// Release deletes the reserved row if and only if it is still the
	// reservation res, in progress and not marked written; otherwise it
	// returns store.ErrConflict. Only the holder of the reservation can
	// release it.
	Release(ctx context.Context, res Reservation) error

	// Fence returns the claim of reservation res that the handler's store
	// change carries (store.WithFence). The store checks it, and marks the
	// row written, in the same atomic step as the change; a store can check
	// the fences of a ledger in its own database only (see store.Fence).
	Fence(res Reservation) fence.Fence

	// Reclaim deletes row rec.ID, as Reserve or Get returned it, if and only
	// if it is still exactly that version (update time rec.UpdateTime), in
	// progress, fenced and not marked written: the proof that its change
	// never committed, and (its fence failing from now on) never will.
	// Otherwise it returns store.ErrConflict (the row changed, or the proof
	// does not hold for it), or store.ErrNotFound when the row is gone, and
	// changes nothing. The next request with the key runs.
	Reclaim(ctx context.Context, rec Record) error

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

// CheckReclaim returns nil if Reclaim may take row r (named ref in errors)
// as it was read: in progress, fenced and not marked written. Otherwise it
// returns a Conflict saying why the proof does not hold. Backends call it
// before their compare-and-set.
func CheckReclaim(r Record, ref string) error {
	switch {
	case r.State != StateInProgress:
		return fault.Errorf(fault.CodeConflict, "reclaim %s: the row is %s, not in progress", ref, r.State)
	case !r.Fenced:
		return fault.Errorf(fault.CodeConflict, "reclaim %s: the row is not fenced, so nothing proves its change did not happen; an operator must reconcile it", ref)
	case !r.WrittenAt.IsZero():
		return fault.Errorf(fault.CodeConflict, "reclaim %s: its change was written; it must be completed", ref)
	}
	return nil
}
