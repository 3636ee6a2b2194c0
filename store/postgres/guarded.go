package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The commonest consume (an agent with one entitlement, no other call of
// it in flight on this instance) is tried optimistically, without locks:
// charge.Consume decides on a snapshot with the charge engine, as a consume
// alone does, and the charge's writes go as one statement (joinCharge's)
// that writes only while everything the decision rested on is as it was in
// the snapshot. The snapshot is
//
//   - what this instance knows from the agent's last charge (recent): the
//     entitlement as that charge wrote it, the account as read then, and
//     no key — so a consume is one round trip, one statement; or
//   - one pipelined read without a transaction (readSnapshot: the
//     entitlement, key and account, with their row versions), when the
//     instance knows nothing of the agent or its knowledge failed the
//     guard; two round trips, four statements.
//
// Neither takes BEGIN, COMMIT or a row lock held across a round trip; the
// statement's own transaction is the charge's.
//
// The guard rests on row versions (xmin, the transaction that wrote the
// version: any change of a row is a new version with another xmin). The
// statement's UPDATE of the entitlement matches only the version decided
// on (under READ COMMITTED, an UPDATE that waited on a concurrent writer
// checks its WHERE again on what that writer committed), and only while
// the account is the version decided on (or still absent), the agent is no
// wallet member, and, for a consume naming no entitlement, the agent has
// exactly one active entitlement (a grant meanwhile would change the
// candidates). A key used meanwhile fails the statement's INSERT (the
// unique key). When the guard matched nothing, the statement calls
// stipend_changed (migration 00011), which fails it as a serialization
// failure. Either way nothing of it is kept: the consume runs again on a
// fresh read, and then under the row's lock (consumeAlone), which answers
// a replay. A write that passed the guard is exactly the charge a locked
// read would have decided: the answer is charge.Consume's on the snapshot.
//
// A decision that writes nothing (a denial) is answered only from a fresh
// read (a read made after the call began), never from what the instance
// remembers. Whatever else (several entitlements, whose order and denials
// a guard on one would not cover; a charge leaving the row unchanged, a
// subscription's, whose instant must still follow the row's lock order;
// ending expired holds; events; a wallet member) runs under the locks.

// consumeGuarded tries req optimistically. done is false when it wrote
// nothing and the consume is to run under the locks.
func (s *Store) consumeGuarded(ctx context.Context, req *entitlement.ConsumeRequest) (store.ConsumeResult, bool, error) {
	if req.EntitlementID == "" {
		if snap, ok := s.recent.snapshot(req.AgentID, s.clock()); ok {
			if res, answered, err := s.chargeGuarded(ctx, req, &snap, false); answered {
				return res, true, err
			}
		}
	}
	snap, err := s.readSnapshot(ctx, s.pool, req, false, false)
	if err != nil || snap.member || len(snap.ents) > 1 {
		return store.ConsumeResult{}, false, nil // consumeAlone reads again, and says what failed
	}
	return s.chargeGuarded(ctx, req, &snap, true)
}

// chargeGuarded decides req on snap and writes the charge guarded.
// answered is false when nothing was written and the consume is to be
// decided again: the guard found the snapshot stale, the writes are not one
// guarded statement's, or the decision wrote nothing and snap was not read
// after the call began (fresh), so it is no answer.
func (s *Store) chargeGuarded(ctx context.Context, req *entitlement.ConsumeRequest, snap *snapshot, fresh bool) (res store.ConsumeResult, answered bool, err error) {
	a := &alone{prefetched: prefetched{s, snap}, ctx: ctx, q: s.pool}
	if res, err = charge.Consume(ctx, a, *req); err != nil || len(a.tried) == 0 {
		if fresh || err != nil {
			return res, true, err // a replay, no entitlement to charge, or what is wrong
		}
		return res, false, nil
	}
	b := a.tried[0]
	wb := &pgx.Batch{}
	if err := b.queueWrites(wb, &a.befores[0]); err != nil {
		return res, true, err
	}
	if wb.Len() == 0 {
		return res, fresh, nil // denied: answered from a fresh read only
	}
	if len(snap.ents) != 1 || snap.ents[0].ID != b.ID {
		return res, false, nil // not the entitlement read with its version
	}
	sql, args, ok := guardCharge(wb, req.EntitlementID == "", snap.versions[0], req.AgentID, snap.accountVersion)
	if !ok {
		return res, false, nil // not one charge's writes: under the locks
	}
	if s.beforeGuardedWrite != nil {
		s.beforeGuardedWrite()
	}
	var version uint32
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&version); err != nil {
		s.recent.forget(req.AgentID)
		if e, ok := errors.AsType[*pgconn.PgError](err); ok &&
			(e.Code == pgfault.SerializationFailure || (e.Code == "23505" && e.TableName == "charge_keys")) {
			return store.ConsumeResult{}, false, nil // nothing written
		}
		return store.ConsumeResult{}, true, pgfault.Write(err, "consume")
	}
	if req.EntitlementID == "" {
		s.recent.remember(req.AgentID, recentAgent{ent: b.E, version: version, account: snap.account, accountVersion: snap.accountVersion})
	}
	return res, true, nil
}

// guardedSQL is, for each set of joinable statements (chargeSet) that
// updates the entitlement, and for a consume that names no entitlement
// (unnamed) or one, the one statement that writes them only while the
// guard holds; it answers the entitlement's new version. Its parameters
// are the set's, then the entitlement's version, the agent and its
// account's version.
var guardedSQL = func() map[[2]int]string {
	out := map[[2]int]string{}
	for set := 1; set < 1<<len(joinable); set += 2 { // the sets with joinable[0], the entitlement's UPDATE
		parts, params := joinParts(set)
		where := "WHERE id = $1"
		if !strings.HasSuffix(parts[0], where) {
			panic("guardedSQL: " + parts[0])
		}
		p := func(i int) string { return "$" + strconv.Itoa(params+i) }
		guard := parts[0] + " AND xmin = " + p(1) +
			" AND (SELECT xmin FROM accounts WHERE agent_id = " + p(2) + ") IS NOT DISTINCT FROM " + p(3) +
			" AND NOT EXISTS (SELECT FROM memberships WHERE member_id = " + p(2) + ")"
		for unnamed := range 2 {
			g := guard
			if unnamed == 1 {
				g += " AND (SELECT count(*) FROM entitlements WHERE agent_id = " + p(2) + " AND status = 'active') = 1"
			}
			out[[2]int{set, unnamed}] = withClauses(append([]string{g + " RETURNING xmin"}, parts[1:]...)) +
				" SELECT coalesce((SELECT xmin FROM w0), stipend_changed('entitlement'))"
		}
	}
	return out
}()

// guardCharge returns wb's writes as guardedSQL's statement, or ok false
// when they are not one charge's that updates the entitlement.
func guardCharge(wb *pgx.Batch, unnamed bool, version uint32, agentID string, accountVersion *uint32) (sql string, args []any, ok bool) {
	set, args := chargeSet(wb)
	u := 0
	if unnamed {
		u = 1
	}
	if sql, ok = guardedSQL[[2]int{set, u}]; !ok {
		return "", nil, false
	}
	return sql, append(args, version, agentID, accountVersion), true
}

// recent remembers, per agent, what its last guarded charge on this
// instance wrote and rested on, which the agent's next consume decides on
// without reading (consumeGuarded). A hint only: a guard that finds it
// stale forgets it. The least recently charged agents past maxRecent are
// forgotten (hashicorp/golang-lru: bounded, safe for concurrent use).
type recent struct {
	agents *lru.Cache[string, recentAgent]
}

func newRecent() recent {
	c, err := lru.New[string, recentAgent](maxRecent)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return recent{agents: c}
}

// recentAgent is the agent's one active entitlement and its account, with
// their row versions.
type recentAgent struct {
	ent            entitlement.Entitlement
	version        uint32
	account        entitlement.Account
	accountVersion *uint32
}

// maxRecent bounds the agents recent remembers.
const maxRecent = 10_000

// snapshot returns what is remembered of agentID as a snapshot at now.
func (r *recent) snapshot(agentID string, now time.Time) (snapshot, bool) {
	a, ok := r.agents.Get(agentID)
	if !ok {
		return snapshot{}, false
	}
	return snapshot{used: map[keyPair]charge.Used{}, account: a.account, ents: []entitlement.Entitlement{a.ent.Clone()},
		versions: []uint32{a.version}, accountVersion: a.accountVersion, now: now}, true
}

func (r *recent) remember(agentID string, a recentAgent) { r.agents.Add(agentID, a) }

func (r *recent) forget(agentID string) { r.agents.Remove(agentID) }
