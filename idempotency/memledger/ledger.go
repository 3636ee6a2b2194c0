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
	collection string
	now        func() time.Time

	mu   sync.Mutex
	rows map[string]idempotency.Record
	last time.Time // the last update time handed out
}

// Option configures a Ledger.
type Option func(*Ledger)

// WithClock makes the ledger read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// New returns an empty ledger whose references name collection (use
// idempotency.CollectionName of the deployment namespace).
func New(collection string, opts ...Option) *Ledger {
	l := &Ledger{collection: collection, now: time.Now, rows: map[string]idempotency.Record{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// tick returns a fresh update time: the clock, but strictly after the last one
// handed out, so every write has a distinct time even under a frozen test clock
// (Firestore's update times are distinct per write to a document as well).
func (l *Ledger) tick() time.Time {
	t := l.now().UTC().Truncate(time.Microsecond)
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
	now := l.now().UTC()
	if r, ok := l.rows[a.ID]; ok && !r.Expired(now) {
		switch {
		case r.Fingerprint != a.Fingerprint:
			return idempotency.Result{Outcome: idempotency.Mismatch, Record: clone(r)}, nil
		case r.State == idempotency.StateCompleted:
			return idempotency.Result{Outcome: idempotency.Replay, Record: clone(r)}, nil
		default:
			return idempotency.Result{Outcome: idempotency.InProgress, Record: clone(r)}, nil
		}
	}
	r := idempotency.Record{
		ID: a.ID, Route: a.Route, Fingerprint: a.Fingerprint, State: idempotency.StateInProgress,
		OperationID: a.OperationID, TraceID: a.TraceID, Fenced: a.Fenced, CreatedAt: now, UpdateTime: l.tick(),
		Token: uuid.NewString(),
	}
	l.rows[a.ID] = r
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
	r, ok := l.rows[res.ID]
	if !ok || r.Token != res.Token || r.State != idempotency.StateInProgress {
		return idempotency.Record{}, fault.Errorf(fault.CodeConflict, "%s %s: the reservation changed or is gone", op, l.Reference(res.ID))
	}
	return r, nil
}

func (l *Ledger) complete(r *idempotency.Record, resp idempotency.Response, expireAt time.Time) {
	c := resp.Clone()
	r.State = idempotency.StateCompleted
	r.Response = &c
	r.CompletedAt = l.now().UTC()
	r.ExpireAt = expireAt.UTC()
	r.UpdateTime = l.tick()
	l.rows[r.ID] = *r
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
	delete(l.rows, res.ID)
	return nil
}

// Fence implements idempotency.Ledger. The memory store checks these
// fences (store/memory): it calls Mark under its own lock.
func (l *Ledger) Fence(res idempotency.Reservation) fence.Fence {
	return &Fence{l: l, res: res}
}

// Fence is the claim of one reservation of this ledger.
type Fence struct {
	l   *Ledger
	res idempotency.Reservation
}

// Claim implements store.Fence.
func (f *Fence) Claim() string { return f.l.Reference(f.res.ID) + "#" + f.res.Token }

// Mark checks, under the ledger's lock, that the reservation still holds,
// and marks its row written. A store calls it inside the atomic step of
// its change, after every check and before the change is applied, so a
// nil answer means the change is made; any other answer wraps
// store.ErrFenced and the store changes nothing.
func (f *Fence) Mark() error {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.rows[f.res.ID]
	switch {
	case !ok:
		return fence.Lost(f, "the row is gone")
	case r.Token != f.res.Token:
		return fence.Lost(f, "the row belongs to another reservation")
	case r.State != idempotency.StateInProgress:
		return fence.Lost(f, "the row is "+string(r.State))
	}
	if r.WrittenAt.IsZero() {
		r.WrittenAt = l.now().UTC()
	}
	r.UpdateTime = l.tick()
	l.rows[r.ID] = r
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
	delete(l.rows, r.ID)
	return nil
}

// Get implements idempotency.Ledger.
func (l *Ledger) Get(ctx context.Context, id string) (idempotency.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.rows[id]
	if !ok {
		return idempotency.Record{}, fault.Errorf(fault.CodeNotFound, "%s: no such row", l.Reference(id))
	}
	return clone(r), nil
}

// Reference implements idempotency.Ledger.
func (l *Ledger) Reference(id string) string {
	return idempotency.FormatReference(Backend, l.collection, id)
}

// Inspect implements idempotency.Ledger.
func (l *Ledger) Inspect(ctx context.Context, ref string) (idempotency.Record, error) {
	id, err := idempotency.CheckReference(ref, Backend, l.collection)
	if err != nil {
		return idempotency.Record{}, err
	}
	return l.Get(ctx, id)
}

// ResolveDelete implements idempotency.Ledger.
func (l *Ledger) ResolveDelete(ctx context.Context, ref string, expectUpdateTime time.Time) error {
	id, err := idempotency.CheckReference(ref, Backend, l.collection)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.expect("resolve-delete", id, expectUpdateTime, false)
	if err != nil {
		return err
	}
	delete(l.rows, r.ID)
	return nil
}

// ResolveComplete implements idempotency.Ledger.
func (l *Ledger) ResolveComplete(ctx context.Context, ref string, expectUpdateTime time.Time, resp idempotency.Response, expireAt time.Time) error {
	id, err := idempotency.CheckResolveComplete(ref, Backend, l.collection, resp, expireAt)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.expect("resolve-complete", id, expectUpdateTime, true)
	if err != nil {
		return err
	}
	l.complete(&r, resp, expireAt)
	return nil
}

// expect returns row id for op if it is as the caller read it (see
// idempotency.Unresolvable). The caller holds l.mu.
func (l *Ledger) expect(op, id string, want time.Time, inProgress bool) (idempotency.Record, error) {
	r, ok := l.rows[id]
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
