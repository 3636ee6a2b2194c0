package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The commonest consume (an agent with one entitlement, no other call of
// it in flight on this instance) is first tried optimistically: one
// pipelined read without a transaction (the entitlement with its row
// version, the key, the account: readSnapshot), charge.Consume deciding on
// it with the charge engine as a consume alone does, and the charge's
// writes as one statement (joinCharge's) that writes only while the
// entitlement is the row version it read. That is two round trips and
// four statements, without BEGIN, COMMIT or the row lock that a locked
// read writes into the row; the transaction is the statement's own.
//
// The guard is the row's xmin, the transaction that wrote its version:
// any change of the entitlement since the read is a new version with
// another xmin. The statement's UPDATE matches only that version (under
// READ COMMITTED an UPDATE that waited on a concurrent writer checks its
// WHERE again on the version that writer committed); a charge that leaves
// the row as it is (a subscription's) locks it FOR SHARE as it was read.
// When the guard matched nothing the statement calls stipend_changed
// (migration 00011), which fails it as a serialization failure, so none of
// its writes is kept, and the consume runs again under the row's lock
// (consumeAlone), as it does when another call took the key meanwhile (the
// key's INSERT fails the statement). The answer is charge.Consume's on
// what was read, which the guard proves was the entitlement's state until
// the write. A denial writes nothing, and is the answer of a read made
// after the call began, as every read's is.
//
// Whatever else (several entitlements, whose order and denials a guard on
// one would not cover; ending expired holds; events; a wallet member) runs
// under the locks as before.

// consumeGuarded tries req optimistically. done is false when it wrote
// nothing and the consume is to run under the locks.
func (s *Store) consumeGuarded(ctx context.Context, req *entitlement.ConsumeRequest) (res store.ConsumeResult, done bool, err error) {
	snap, err := s.readSnapshot(ctx, s.pool, req, false, false)
	if err != nil || snap.member || len(snap.ents) > 1 {
		return res, false, nil // consumeAlone reads again, and says what failed
	}
	a := &alone{prefetched: prefetched{s, &snap}, ctx: ctx, q: s.pool}
	if res, err = charge.Consume(ctx, a, *req); err != nil || len(a.tried) == 0 {
		return res, true, err // a replay, or no entitlement to charge
	}
	b := a.tried[0]
	wb := &pgx.Batch{}
	if err := b.queueWrites(wb, &a.befores[0]); err != nil {
		return res, true, err
	}
	if wb.Len() == 0 {
		return res, true, nil // denied
	}
	if len(snap.ents) != 1 || snap.ents[0].ID != b.ID {
		return res, false, nil // not the entitlement read with its version
	}
	sql, args, ok := guardCharge(wb, b.ID, snap.versions[0])
	if !ok {
		return res, false, nil // not one charge's writes: under the locks
	}
	if s.beforeGuardedWrite != nil {
		s.beforeGuardedWrite()
	}
	if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
		if e, ok := errors.AsType[*pgconn.PgError](err); ok &&
			(e.Code == pgfault.SerializationFailure || (e.Code == "23505" && e.TableName == "charge_keys")) {
			return store.ConsumeResult{}, false, nil // nothing written: under the locks
		}
		return store.ConsumeResult{}, true, pgfault.Write(err, "consume")
	}
	return res, true, nil
}

// guardedSQL is, for each set of joinable statements (chargeSet) that a
// consume writes, the one statement that writes them only while the
// entitlement is the version read: its parameters are the set's, then the
// entitlement's ID (only when the set does not update the row) and its
// version.
var guardedSQL = func() map[int]string {
	out := map[int]string{}
	for set := 1; set < 1<<len(joinable); set++ {
		parts, params := joinParts(set)
		var guard string
		if set&1 != 0 { // the set updates the entitlement: guard the UPDATE
			where := "WHERE id = $1"
			if !strings.HasSuffix(parts[0], where) {
				panic("guardedSQL: " + parts[0])
			}
			guard = parts[0] + " AND xmin = $" + strconv.Itoa(params+1) + " RETURNING 1"
			parts = parts[1:]
		} else {
			guard = "SELECT 1 FROM entitlements WHERE id = $" + strconv.Itoa(params+1) +
				" AND xmin = $" + strconv.Itoa(params+2) + " FOR SHARE"
		}
		out[set] = withClauses(append([]string{guard}, parts...)) +
			" SELECT stipend_changed('entitlement') WHERE NOT EXISTS (SELECT FROM w0)"
	}
	return out
}()

// guardCharge returns wb's writes as guardedSQL's statement for the
// entitlement id at version, or ok false when they are not one charge's.
func guardCharge(wb *pgx.Batch, id string, version uint32) (sql string, args []any, ok bool) {
	set, args := chargeSet(wb)
	if sql, ok = guardedSQL[set]; !ok {
		return "", nil, false
	}
	if set&1 == 0 {
		args = append(args, id)
	}
	return sql, append(args, version), true
}
