package firestore

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
)

// sweepParallel bounds the entitlements one ExpireHolds call works on at
// once (each is one transaction).
const sweepParallel = 16

// ExpireHolds implements store.EntitlementStore. An entitlement document
// with open holds carries holdsExpireAt, the earliest of their expiries, so
// one range query on that field (its automatic single-field index) finds
// the entitlements with a hold to end; each then gets an expire call on its
// lane, whose batch ends the expired holds as every batch does. Sweeps on
// several instances at once end each hold once: only the batch that
// removes a hold from its entitlement's registry counts it.
func (s *Store) ExpireHolds(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, store.Errorf(store.CodeInvalid, "limit: must be positive")
	}
	snaps, err := s.build(qHoldsExpiring, filter{"holdsExpireAt", "<=", s.clock()}).
		Select("id").Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return 0, fsfault.Read(err, "expire holds")
	}
	ids := make([]string, 0, len(snaps))
	for _, snap := range snaps {
		f := read(snap)
		id := f.str("id")
		if f.err != nil {
			return 0, f.err
		}
		ids = append(ids, id)
	}
	var ended atomic.Int64
	var g errgroup.Group
	g.SetLimit(sweepParallel)
	for _, id := range ids {
		g.Go(func() error {
			o := s.queue(id, &call{ctx: ctx, op: opExpire})
			ended.Add(int64(o.ended))
			return o.err
		})
	}
	err = g.Wait()
	return int(ended.Load()), err
}
