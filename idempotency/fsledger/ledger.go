// Package fsledger is the durable idempotency ledger on Google Cloud
// Firestore (Native mode), ADR-0026's production backend.
//
// One document per key, in one collection per deployment namespace
// (idempotency.CollectionName: "idem_<hex>"), either in the shared database
// or in a dedicated named one: the caller chooses by the client it passes.
// The document ID is the hashed key; the raw key never reaches Firestore.
//
// Reservation is DocumentRef.Create (atomic create-if-absent, no transaction,
// so no lock contention) of a row carrying a random token; completion is a
// read of the row (still in progress under that token?) and an Update with
// the read's LastUpdateTime precondition, and release the same with a
// Delete. The Firestore store checks this ledger's fences (Fence) inside
// the change's own transaction, which reads the row and marks it written.
// A TTL policy on the expireAt field (set only on completed rows) lets
// Firestore delete expired results; Reserve still checks the expiry
// itself, because TTL deletion is asynchronous.
package fsledger

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// Backend is the backend name in the ledger's references.
const Backend = "firestore"

// DefaultProbeTimeout bounds Probe when the caller's context has no earlier
// deadline.
const DefaultProbeTimeout = idempotency.DefaultProbeTimeout

// reserveAttempts bounds Reserve's loop: a row that vanishes between Create
// and Get (released, resolved) or an expired row being replaced makes it try
// again; under pathological churn it gives up as Unavailable rather than spin.
const reserveAttempts = 8

// recoveryReadTimeout bounds the read after a failed Create.
const recoveryReadTimeout = 2 * time.Second

var _ idempotency.Ledger = (*Ledger)(nil)

// Ledger is the Firestore ledger.
type Ledger struct {
	idempotency.Names // Reference and Inspect
	rows              idempotency.Rows
	client            *firestore.Client
}

// Option configures a Ledger.
type Option = idempotency.RowsOption

// WithClock makes the ledger read time from now instead of time.Now (for
// createdAt, completedAt and expiry checks; update times are Firestore's).
func WithClock(now func() time.Time) Option { return idempotency.WithRowsClock(now) }

// WithProbeTimeout sets Probe's bound (DefaultProbeTimeout otherwise).
func WithProbeTimeout(d time.Duration) Option { return idempotency.WithRowsProbeTimeout(d) }

// New returns a ledger on client's database using collection (use
// idempotency.CollectionName of the deployment namespace). The caller owns
// the client and chooses the project and (shared or dedicated) database.
func New(client *firestore.Client, collection string, opts ...Option) *Ledger {
	l := &Ledger{rows: idempotency.NewRows(Backend, collection, opts...), client: client}
	l.Names = l.rows.Names(l.Get)
	return l
}

// Collection returns the ledger's collection name, for the TTL policy.
func (l *Ledger) Collection() string { return l.rows.Collection() }

// clock is the ledger's time as stored: UTC, microseconds.
func (l *Ledger) clock() time.Time { return l.rows.Now().Truncate(time.Microsecond) }

func (l *Ledger) doc(id string) *firestore.DocumentRef {
	return l.client.Collection(l.rows.Collection()).Doc(id)
}

// Reserve implements idempotency.Ledger.
//
// Each call stores a random nonce in the row it creates. If Create fails
// after it may have committed (a lost answer, or the client library retrying a
// committed write and getting AlreadyExists), the nonce tells whether the row
// is this call's own, so the reservation is not stranded in progress.
func (l *Ledger) Reserve(ctx context.Context, a idempotency.Attempt) (idempotency.Result, error) {
	if err := a.Validate(); err != nil {
		return idempotency.Result{}, fault.Wrap(fault.CodeInvalid, err, "reserve")
	}
	return l.reserve(ctx, a.Bounded(), newNonce())
}

// reserve is Reserve with the nonce given (tests pass a known one).
func (l *Ledger) reserve(ctx context.Context, a idempotency.Attempt, nonce string) (idempotency.Result, error) {
	doc := l.doc(a.ID)
	for range reserveAttempts {
		now := l.clock()
		r := newRow(a, now, nonce)
		wr, err := doc.Create(ctx, r)
		if err == nil {
			return idempotency.Result{Outcome: idempotency.Reserved, Record: r.record(a.ID, wr.UpdateTime)}, nil
		}
		if code(err) != codeAlreadyExists {
			return l.afterFailedCreate(ctx, doc, nonce, err)
		}
		snap, err := doc.Get(ctx)
		if code(err) == codeNotFound {
			continue // released or resolved since our Create: try again
		}
		if err != nil {
			return idempotency.Result{}, fsfault.Read(err, "read %s", l.Reference(a.ID))
		}
		existing, err := decode(snap)
		if err != nil {
			return idempotency.Result{}, err
		}
		if existing.Token == nonce && existing.State == idempotency.StateInProgress {
			return idempotency.Result{Outcome: idempotency.Reserved, Record: existing}, nil
		}
		if existing.Expired(now) {
			// Replace the expired result, but only the version we read: if
			// someone else replaced it first, their reservation stands.
			_, err := doc.Delete(ctx, firestore.LastUpdateTime(existing.UpdateTime))
			if err != nil && code(err) != codeFailedPrecondition && code(err) != codeNotFound {
				return idempotency.Result{}, fsfault.Write(err, "replace expired %s", l.Reference(a.ID))
			}
			continue
		}
		return idempotency.Found(existing, a), nil
	}
	return idempotency.Result{}, fault.Errorf(fault.CodeUnavailable, "reserve %s: the row kept changing; try again", l.Reference(a.ID))
}

// afterFailedCreate reads the row once (on a short context of its own, as
// the caller's may have expired) to learn whether the failed Create committed
// after all. If the row carries nonce, the reservation is ours; otherwise the
// Create's error stands and the request does not run.
func (l *Ledger) afterFailedCreate(ctx context.Context, doc *firestore.DocumentRef, nonce string, createErr error) (idempotency.Result, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recoveryReadTimeout)
	defer cancel()
	if snap, err := doc.Get(rctx); err == nil {
		if rec, err := decode(snap); err == nil && rec.Token == nonce && rec.State == idempotency.StateInProgress {
			return idempotency.Result{Outcome: idempotency.Reserved, Record: rec}, nil
		}
	}
	return idempotency.Result{}, fsfault.Write(createErr, "reserve %s", l.Reference(doc.ID))
}

// Complete implements idempotency.Ledger.
func (l *Ledger) Complete(ctx context.Context, res idempotency.Reservation, resp idempotency.Response, expireAt time.Time) error {
	if err := resp.Check(); err != nil {
		return err
	}
	if err := idempotency.CheckExpiry(expireAt); err != nil {
		return err
	}
	rec, err := l.held(ctx, res, "complete")
	if err != nil {
		return err
	}
	_, err = l.doc(res.ID).Update(ctx, l.completion(resp, expireAt), firestore.LastUpdateTime(rec.UpdateTime))
	if c := code(err); c == codeFailedPrecondition || c == codeNotFound {
		return fault.Wrap(fault.CodeConflict, err, "complete %s: the reservation changed or is gone", l.Reference(res.ID))
	}
	return fsfault.Write(err, "complete %s", l.Reference(res.ID))
}

// held reads row res.ID and returns it if it is still in progress under
// res's token: a Conflict otherwise. The caller's write then carries the
// read's update time as its precondition, so nothing can change between.
func (l *Ledger) held(ctx context.Context, res idempotency.Reservation, op string) (idempotency.Record, error) {
	snap, err := l.doc(res.ID).Get(ctx)
	if code(err) == codeNotFound {
		return idempotency.Record{}, fault.Errorf(fault.CodeConflict, "%s %s: the reservation is gone", op, l.Reference(res.ID))
	}
	if err != nil {
		return idempotency.Record{}, fsfault.Read(err, "%s %s", op, l.Reference(res.ID))
	}
	rec, err := decode(snap)
	if err != nil {
		return idempotency.Record{}, err
	}
	if !rec.Holds(res) {
		return idempotency.Record{}, fault.Errorf(fault.CodeConflict, "%s %s: the reservation changed", op, l.Reference(res.ID))
	}
	return rec, nil
}

// completion is the Update that turns a row into a completed one.
func (l *Ledger) completion(resp idempotency.Response, expireAt time.Time) []firestore.Update {
	return []firestore.Update{
		{Path: "state", Value: string(idempotency.StateCompleted)},
		{Path: "response", Value: toStored(resp)},
		{Path: "completedAt", Value: l.clock()},
		{Path: "expireAt", Value: expireAt.UTC()},
	}
}

// Release implements idempotency.Ledger.
func (l *Ledger) Release(ctx context.Context, res idempotency.Reservation) error {
	rec, err := l.held(ctx, res, "release")
	if err != nil {
		return err
	}
	if !rec.WrittenAt.IsZero() {
		return fault.Errorf(fault.CodeConflict, "release %s: a fenced change was written; complete the row instead", l.Reference(res.ID))
	}
	_, err = l.doc(res.ID).Delete(ctx, firestore.LastUpdateTime(rec.UpdateTime))
	if c := code(err); c == codeFailedPrecondition || c == codeNotFound {
		return fault.Wrap(fault.CodeConflict, err, "release %s: the reservation changed or is gone", l.Reference(res.ID))
	}
	return fsfault.Write(err, "release %s", l.Reference(res.ID))
}

// Get implements idempotency.Ledger.
func (l *Ledger) Get(ctx context.Context, id string) (idempotency.Record, error) {
	if !idempotency.ValidID(id) {
		return idempotency.Record{}, fault.Errorf(fault.CodeInvalid, "id: not a hashed key")
	}
	snap, err := l.doc(id).Get(ctx)
	if err != nil {
		return idempotency.Record{}, fsfault.Read(err, "read %s", l.Reference(id))
	}
	return decode(snap)
}

// ResolveDelete implements idempotency.Ledger: a Delete with the expected
// update time as its precondition.
func (l *Ledger) ResolveDelete(ctx context.Context, ref string, expectUpdateTime time.Time) error {
	id, err := l.rows.ID(ref)
	if err != nil {
		return err
	}
	_, err = l.doc(id).Delete(ctx, firestore.LastUpdateTime(expectUpdateTime))
	return l.resolveError(ctx, err, id, "resolve-delete")
}

// ResolveComplete implements idempotency.Ledger. It reads the row first only
// to refuse completing a row that is not in progress; the write itself is an
// Update with the expected update time as its precondition, so a change
// between the read and the write is refused as well.
func (l *Ledger) ResolveComplete(ctx context.Context, ref string, expectUpdateTime time.Time, resp idempotency.Response, expireAt time.Time) error {
	id, err := l.rows.CompletionID(ref, resp, expireAt)
	if err != nil {
		return err
	}
	r, err := l.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := idempotency.Unresolvable("resolve-complete", l.Reference(id), r, expectUpdateTime, true); err != nil {
		return err
	}
	_, err = l.doc(id).Update(ctx, l.completion(resp, expireAt), firestore.LastUpdateTime(expectUpdateTime))
	return l.resolveError(ctx, err, id, "resolve-complete")
}

// resolveError translates a failed conditional write: NotFound when the row
// is gone, Conflict when it changed. Firestore reports a failed update-time
// precondition the same way in both cases, so a read tells them apart.
func (l *Ledger) resolveError(ctx context.Context, err error, id, op string) error {
	if err == nil {
		return nil
	}
	if c := code(err); c != codeFailedPrecondition && c != codeNotFound {
		return fsfault.Write(err, "%s %s", op, l.Reference(id))
	}
	if _, gerr := l.doc(id).Get(ctx); code(gerr) == codeNotFound {
		return fault.Errorf(fault.CodeNotFound, "%s %s: no such row", op, l.Reference(id))
	}
	return fault.Wrap(fault.CodeConflict, err, "%s %s: the row changed since it was inspected", op, l.Reference(id))
}

// Durable implements idempotency.Ledger: Firestore coordinates every instance.
func (l *Ledger) Durable() bool { return true }

// Probe implements idempotency.Ledger with a bounded query that returns at
// most one document ID and no fields (Select with no paths): it proves the
// database answers and the service account may read the collection, without
// writing and without reading any row's contents.
func (l *Ledger) Probe(ctx context.Context) error {
	return l.rows.Probe(ctx, func(ctx context.Context) error {
		_, err := l.client.Collection(l.rows.Collection()).Select().Limit(1).Documents(ctx).GetAll()
		return err
	})
}
