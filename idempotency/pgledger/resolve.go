package pgledger

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/pgfault"
)

// ResolveDelete implements idempotency.Ledger: a DELETE guarded by the
// expected update time.
func (l *Ledger) ResolveDelete(ctx context.Context, ref string, expectUpdateTime time.Time) error {
	id, err := l.rows.ID(ref)
	if err != nil {
		return err
	}
	tag, err := l.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE collection = $1 AND id = $2 AND updated_at = $3`,
		l.rows.Collection(), id, expectUpdateTime)
	if err != nil {
		return pgfault.Write(err, "resolve-delete %s", l.Reference(id))
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return l.refused(ctx, id, "resolve-delete", expectUpdateTime)
}

// ResolveComplete implements idempotency.Ledger: an UPDATE guarded by the
// expected update time and the in-progress state, so a change between the
// operator's inspection and the write is refused.
func (l *Ledger) ResolveComplete(ctx context.Context, ref string, expectUpdateTime time.Time, resp idempotency.Response, expireAt time.Time) error {
	id, err := l.rows.CompletionID(ref, resp, expireAt)
	if err != nil {
		return err
	}
	ok, err := l.complete(ctx, id, `updated_at = $3 AND state = 'in_progress'`, expectUpdateTime, resp, expireAt)
	if err != nil {
		return pgfault.Write(err, "resolve-complete %s", l.Reference(id))
	}
	if ok {
		return nil
	}
	return l.refused(ctx, id, "resolve-complete", expectUpdateTime)
}

// refused says why a guarded write of row id changed nothing: NotFound
// when the row is gone, Conflict when it changed or is not in progress.
func (l *Ledger) refused(ctx context.Context, id, op string, expect time.Time) error {
	r, err := l.Get(ctx, id)
	if err != nil {
		return err // NotFound when the row is gone
	}
	if err := idempotency.Unresolvable(op, l.Reference(id), r, expect, true); err != nil {
		return err
	}
	return fault.Errorf(fault.CodeConflict, "%s %s: the row changed and changed back", op, l.Reference(id))
}
