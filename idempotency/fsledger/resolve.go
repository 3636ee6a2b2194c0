package fsledger

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// Inspect implements idempotency.Ledger.
func (l *Ledger) Inspect(ctx context.Context, ref string) (idempotency.Record, error) {
	id, err := idempotency.CheckReference(ref, Backend, l.collection)
	if err != nil {
		return idempotency.Record{}, err
	}
	return l.Get(ctx, id)
}

// ResolveDelete implements idempotency.Ledger: a Delete with the expected
// update time as its precondition.
func (l *Ledger) ResolveDelete(ctx context.Context, ref string, expectUpdateTime time.Time) error {
	id, err := idempotency.CheckReference(ref, Backend, l.collection)
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
	id, err := idempotency.CheckResolveComplete(ref, Backend, l.collection, resp, expireAt)
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
