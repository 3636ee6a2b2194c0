// Package memledger is the process-local idempotency ledger, for development
// and tests only: it coordinates the requests of one process and forgets
// everything on restart, so it is not durable and never horizontally safe.
package memledger

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fence"
)

// Backend is the backend name in the ledger's references.
const Backend = "memory"

var _ idempotency.Ledger = (*Ledger)(nil)

// Ledger is the memory ledger. The zero value is not usable; call New.
type Ledger struct {
	idempotency.Names // Reference and Inspect
	rows              idempotency.Rows

	mu      sync.Mutex
	records map[string]idempotency.Record
	last    time.Time // the last update time handed out
}

// Option configures a Ledger.
type Option = idempotency.RowsOption

// WithClock makes the ledger read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return idempotency.WithRowsClock(now) }

// New returns an empty ledger whose references name collection (use
// idempotency.CollectionName of the deployment namespace).
func New(collection string, opts ...Option) *Ledger {
	l := &Ledger{rows: idempotency.NewRows(Backend, collection, opts...), records: map[string]idempotency.Record{}}
	l.Names = l.rows.Names(l.Get)
	return l
}

// tick returns a fresh update time: the clock, but strictly after the last one
// handed out, so every write has a distinct time even under a frozen test clock
// (Firestore's update times are distinct per write to a document as well).
func (l *Ledger) tick() time.Time {
	t := l.rows.Now().Truncate(time.Microsecond)
	if !t.After(l.last) {
		t = l.last.Add(time.Microsecond)
	}
	l.last = t
	return t
}

// Reserve implements idempotency.Ledger.
func (l *Ledger) Reserve(ctx context.Context, a idempotency.Attempt) (idempotency.Result, error) {
	if err := a.Validate(); err != nil {
		return idempotency.Result{}, fault.Wrap(fault.CodeInvalid, err, "reserve")
	}
	a = a.Bounded()
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.rows.Now()
	if r, ok := l.records[a.ID]; ok && !r.Expired(now) {
		return idempotency.Found(clone(r), a), nil
	}
	r := idempotency.Record{
		ID: a.ID, Route: a.Route, Fingerprint: a.Fingerprint, State: idempotency.StateInProgress,
		OperationID: a.OperationID, TraceID: a.TraceID, Fenced: a.Fenced, CreatedAt: now, UpdateTime: l.tick(),
		Token: uuid.NewString(),
	}
	l.records[a.ID] = r
	return idempotency.Result{Outcome: idempotency.Reserved, Record: clone(r)}, nil
}

// Complete implements idempotency.Ledger.
func (l *Ledger) Complete(ctx context.Context, res idempotency.Reservation, resp idempotency.Response, expireAt time.Time) error {
	if err := resp.Check(); err != nil {
		return err
	}
	if err := idempotency.CheckExpiry(expireAt); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.held(res, "complete")
	if err != nil {
		return err
	}
	l.complete(&r, resp, expireAt)
	return nil
}

// held returns the row of reservation res while it is in progress under
// res's token. The caller holds l.mu.
func (l *Ledger) held(res idempotency.Reservation, op string) (idempotency.Record, error) {
	r, ok := l.records[res.ID]
	if !ok || !r.Holds(res) {
		return idempotency.Record{}, fault.Errorf(fault.CodeConflict, "%s %s: the reservation changed or is gone", op, l.Reference(res.ID))
	}
	return r, nil
}

func (l *Ledger) complete(r *idempotency.Record, resp idempotency.Response, expireAt time.Time) {
	c := resp.Clone()
	r.State = idempotency.StateCompleted
	r.Response = &c
	r.CompletedAt = l.rows.Now()
	r.ExpireAt = expireAt.UTC()
	r.UpdateTime = l.tick()
	l.records[r.ID] = *r
}

// Release implements idempotency.Ledger.
func (l *Ledger) Release(ctx context.Context, res idempotency.Reservation) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.held(res, "release")
	if err != nil {
		return err
	}
	if !r.WrittenAt.IsZero() {
		return fault.Errorf(fault.CodeConflict, "release %s: a fenced change was written; complete the row instead", l.Reference(res.ID))
	}
	delete(l.records, res.ID)
	return nil
}

// Fence implements idempotency.Ledger. The memory store checks these
// fences (store/memory): it calls Mark under its own lock.
func (l *Ledger) Fence(res idempotency.Reservation) fence.Fence {
	return &Fence{FenceClaim: idempotency.FenceClaim{Reference: l.Reference(res.ID), Reservation: res}, l: l}
}

// Fence is the claim of one reservation of this ledger.
type Fence struct {
	idempotency.FenceClaim
	l *Ledger
}

// Mark checks, under the ledger's lock, that the reservation still holds,
// and marks its row written. A store calls it inside the atomic step of
// its change, after every check and before the change is applied, so a
// nil answer means the change is made; any other answer wraps
// store.ErrFenced and the store changes nothing.
func (f *Fence) Mark() error {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.records[f.Reservation.ID]
	switch {
	case !ok:
		return fence.Lost(f, "the row is gone")
	case r.Token != f.Reservation.Token:
		return fence.Lost(f, "the row belongs to another reservation")
	case r.State != idempotency.StateInProgress:
		return fence.Lost(f, "the row is "+string(r.State))
	}
	if r.WrittenAt.IsZero() {
		r.WrittenAt = l.rows.Now()
	}
	r.UpdateTime = l.tick()
	l.records[r.ID] = r
	return nil
}

// Reclaim implements idempotency.Ledger.
func (l *Ledger) Reclaim(ctx context.Context, rec idempotency.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.expect("reclaim", rec.ID, rec.UpdateTime, false)
	if err != nil {
		return err
	}
	if err := idempotency.CheckReclaim(r, l.Reference(r.ID)); err != nil {
		return err
	}
	delete(l.records, r.ID)
	return nil
}

// Get implements idempotency.Ledger.
func (l *Ledger) Get(ctx context.Context, id string) (idempotency.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.records[id]
	if !ok {
		return idempotency.Record{}, fault.Errorf(fault.CodeNotFound, "%s: no such row", l.Reference(id))
	}
	return clone(r), nil
}

// ResolveDelete implements idempotency.Ledger.
func (l *Ledger) ResolveDelete(ctx context.Context, ref string, expectUpdateTime time.Time) error {
	id, err := l.rows.ID(ref)
	if err != nil {
		return err
	}
	return l.resolve("resolve-delete", id, expectUpdateTime, false, func(r idempotency.Record) { delete(l.records, r.ID) })
}

// ResolveComplete implements idempotency.Ledger.
func (l *Ledger) ResolveComplete(ctx context.Context, ref string, expectUpdateTime time.Time, resp idempotency.Response, expireAt time.Time) error {
	id, err := l.rows.CompletionID(ref, resp, expireAt)
	if err != nil {
		return err
	}
	return l.resolve("resolve-complete", id, expectUpdateTime, true, func(r idempotency.Record) { l.complete(&r, resp, expireAt) })
}

// resolve applies the change of op to row id, under l.mu, if the row is as
// the caller read it (see idempotency.Unresolvable).
func (l *Ledger) resolve(op, id string, want time.Time, inProgress bool, change func(idempotency.Record)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.expect(op, id, want, inProgress)
	if err != nil {
		return err
	}
	change(r)
	return nil
}

// expect returns row id for op if it is as the caller read it (see
// idempotency.Unresolvable). The caller holds l.mu.
func (l *Ledger) expect(op, id string, want time.Time, inProgress bool) (idempotency.Record, error) {
	r, ok := l.records[id]
	if !ok {
		return idempotency.Record{}, fault.Errorf(fault.CodeNotFound, "%s %s: no such row", op, l.Reference(id))
	}
	return r, idempotency.Unresolvable(op, l.Reference(id), r, want, inProgress)
}

// Durable implements idempotency.Ledger: the memory ledger is not durable.
func (l *Ledger) Durable() bool { return false }

// Probe implements idempotency.Ledger; memory is always reachable.
func (l *Ledger) Probe(ctx context.Context) error { return nil }

func clone(r idempotency.Record) idempotency.Record {
	if r.Response != nil {
		c := r.Response.Clone()
		r.Response = &c
	}
	return r
}
