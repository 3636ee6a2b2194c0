package idempotency

import (
	"context"
	"log/slog"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// reserve reserves a; if it finds an in-progress row that the fence proves
// unwritten and that is older than opts.ReclaimAfter, it reclaims the row
// and reserves again, once. A reclaim that is refused (the row changed: its
// change was written, it completed, or another request reclaimed it first)
// is not an error: the second Reserve reports the row as it is now.
func reserve(ctx context.Context, ledger Ledger, opts *Options, a Attempt) (Result, error) {
	res, err := ledger.Reserve(ctx, a)
	if err != nil || res.Outcome != InProgress || !res.Record.Reclaimable(opts.Now(), opts.ReclaimAfter) {
		return res, err
	}
	log := opts.Logger.With(slog.String("reference", ledger.Reference(a.ID)), slog.String("operationId", res.Record.OperationID))
	switch err := ledger.Reclaim(ctx, res.Record); {
	case err == nil:
		log.Info("idempotency: reclaimed a reservation whose change was never written; the request runs again")
	case fault.CodeOf(err) == fault.CodeConflict || fault.CodeOf(err) == fault.CodeNotFound:
		log.Info("idempotency: reclaim refused; the row changed", slog.String("error", err.Error()))
	default:
		return Result{}, err
	}
	return ledger.Reserve(ctx, a)
}
