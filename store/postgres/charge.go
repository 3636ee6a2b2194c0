package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
	"github.com/stipend-mcp/stipend/store/internal/coalesce"
)

// The charge path: charge.Consume, charge.Authorize and charge.Check hold
// the candidate rules; this adapter provides the lookups of charge.Charger
// and the atomic steps, which queue on the entitlement's lane (batch.go).

var _ charge.Charger = (*Store)(nil)

// CheckAndConsume implements store.EntitlementStore.
// A consume with no other call of its agent in flight here runs alone:
// as one read and one guarded write without locks when it charges one
// entitlement in one statement (guarded.go), else in one transaction of
// two round trips (alone.go), unless the agent is a wallet member; the others read what charge.Consume needs in one round
// trip and queue on the lanes.
func (s *Store) CheckAndConsume(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	if err := req.Normalize(); err != nil {
		return charge.Consume(ctx, s, req) // which answers what is wrong
	}
	alone, ok := s.callers.enter(req.AgentID)
	if !ok {
		return store.ConsumeResult{}, coalesce.ErrClosed
	}
	defer s.callers.leave(req.AgentID)
	if alone && !s.callers.member(req.AgentID) {
		if res, done, err := s.consumeGuarded(ctx, &req); done {
			return res, err
		}
		return s.consumeAlone(ctx, req)
	}
	p, err := s.prefetch(ctx, &req)
	if err != nil {
		return store.ConsumeResult{}, err
	}
	return charge.Consume(ctx, p, req)
}

// Check implements store.EntitlementStore.
// Its lookups are one pipelined read.
func (s *Store) Check(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	if err := req.Normalize(); err != nil {
		return charge.Check(ctx, s, req, s.clock()) // which answers what is wrong
	}
	p, err := s.prefetch(ctx, &req)
	if err != nil {
		return store.ConsumeResult{}, err
	}
	return charge.Check(ctx, p, req, p.snapshot.now)
}

// Authorize implements store.EntitlementStore.
// It reads what charge.Authorize needs in one round trip, then queues on
// the lanes.
func (s *Store) Authorize(ctx context.Context, req entitlement.HoldRequest) (store.HoldResult, error) {
	if err := req.Normalize(); err != nil {
		return charge.Authorize(ctx, s, req) // which answers what is wrong
	}
	if _, ok := s.callers.enter(req.AgentID); !ok {
		return store.HoldResult{}, coalesce.ErrClosed
	}
	defer s.callers.leave(req.AgentID)
	p, err := s.prefetch(ctx, &req.ConsumeRequest)
	if err != nil {
		return store.HoldResult{}, err
	}
	return charge.Authorize(ctx, p, req)
}

// FindKey implements charge.Charger.
func (s *Store) FindKey(ctx context.Context, agentID, key string) (charge.Used, error) {
	used, err := usedKeys(ctx, s.pool, []keyPair{{agentID, key}}, s.clock())
	if err != nil {
		return charge.Used{}, pgfault.Read(err, "find idempotency key")
	}
	u, ok := used[keyPair{agentID, key}]
	if !ok {
		// The key stays out of the message: it may be sensitive.
		return charge.Used{}, store.Errorf(store.CodeNotFound, "idempotency key not used")
	}
	return u, nil
}

// ActiveEntitlements implements charge.Charger: the agent's memberships and
// the active entitlements of the agent and its wallets, in one round trip.
func (s *Store) ActiveEntitlements(ctx context.Context, agentID string) (charge.Pool, error) {
	rb := &pgx.Batch{}
	rb.Queue(`SELECT `+entitlementColumns+` FROM entitlements WHERE agent_id = $1 AND status = 'active'`, agentID)
	queueWallets(rb, agentID, true)
	res := s.pool.SendBatch(ctx, rb)
	defer res.Close()
	var p charge.Pool
	ents, err := collectEntitlements(res)
	if err == nil {
		p.Members, p.Entitlements, err = readWallets(res, true)
		p.Entitlements = append(ents, p.Entitlements...)
	}
	if err == nil {
		err = res.Close()
	}
	if err != nil {
		return charge.Pool{}, pgfault.Read(err, "active entitlements")
	}
	return p, nil
}

// queueWallets queues the reads of agentID's memberships and, with ents,
// of its wallets' active entitlements, which readWallets reads: two index
// lookups that find nothing for an agent that is no member.
func queueWallets(rb *pgx.Batch, agentID string, ents bool) {
	rb.Queue(`SELECT `+membershipColumns+` FROM memberships WHERE member_id = $1`, agentID)
	if ents {
		rb.Queue(`SELECT `+entitlementColumns+` FROM entitlements
			WHERE agent_id IN (SELECT wallet_id FROM memberships WHERE member_id = $1) AND status = 'active'`, agentID)
	}
}

// readWallets reads what queueWallets queued.
func readWallets(res pgx.BatchResults, ents bool) ([]entitlement.Membership, []entitlement.Entitlement, error) {
	rows, err := res.Query()
	if err != nil {
		return nil, nil, err
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Membership, error) { return scanMembership(r) })
	if err != nil || !ents {
		return ms, nil, err
	}
	es, err := collectEntitlements(res)
	return ms, es, err
}

// collectEntitlements reads the next result of res, rows of entitlementColumns.
func collectEntitlements(res pgx.BatchResults) ([]entitlement.Entitlement, error) {
	rows, err := res.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Entitlement, error) { return scanEntitlement(r) })
}

// ConsumeOne implements charge.Charger: it queues the call on the
// entitlement's lane and waits for its own result. (The calls of the
// charge path go through prefetched's, which knows whether the caller is a
// wallet member; here the batch reads its memberships in case.)
func (s *Store) ConsumeOne(ctx context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error) {
	r, err := s.lanes.Do(ctx, entitlementID, op{kind: opConsume, consume: req, member: true})
	return r.consume, err
}

// AuthorizeOne implements charge.Charger, as ConsumeOne.
func (s *Store) AuthorizeOne(ctx context.Context, req *entitlement.HoldRequest, entitlementID string) (store.HoldResult, error) {
	r, err := s.lanes.Do(ctx, entitlementID, op{kind: opAuthorize, authorize: req, member: true})
	return r.hold, err
}

// CaptureHold implements store.EntitlementStore: the capture queues on the
// lane of the hold's entitlement.
func (s *Store) CaptureHold(ctx context.Context, id, agentID string, amount entitlement.Amount) (store.HoldResult, error) {
	entitlementID, member, err := s.holdEntitlement(ctx, id, agentID)
	if err != nil {
		return store.HoldResult{}, err
	}
	r, err := s.lanes.Do(ctx, entitlementID, op{kind: opCapture, holdID: id, agentID: agentID, amount: amount, member: member})
	return r.hold, err
}

// ReleaseHold implements store.EntitlementStore, as CaptureHold.
func (s *Store) ReleaseHold(ctx context.Context, id, agentID string) (store.HoldResult, error) {
	entitlementID, member, err := s.holdEntitlement(ctx, id, agentID)
	if err != nil {
		return store.HoldResult{}, err
	}
	r, err := s.lanes.Do(ctx, entitlementID, op{kind: opRelease, holdID: id, agentID: agentID, member: member})
	return r.hold, err
}

// holdEntitlement returns the entitlement of agentID's hold id and whether
// it holds a wallet's as a member (neither ever changes), or ErrNotFound
// for an unknown hold or another agent's.
func (s *Store) holdEntitlement(ctx context.Context, id, agentID string) (string, bool, error) {
	var entitlementID, owner, wallet string
	err := s.pool.QueryRow(ctx, `SELECT entitlement_id, agent_id, wallet_id FROM holds WHERE id = $1`, id).Scan(&entitlementID, &owner, &wallet)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != agentID) {
		return "", false, errHoldNotFound(id)
	}
	if err != nil {
		return "", false, pgfault.Read(err, "read hold")
	}
	return entitlementID, wallet != "", nil
}

func errHoldNotFound(id string) error { return store.Errorf(store.CodeNotFound, "hold %q", id) }

// GetHold implements store.EntitlementStore.
func (s *Store) GetHold(ctx context.Context, id string) (entitlement.Hold, error) {
	h, err := scanHold(s.pool.QueryRow(ctx, `SELECT `+holdColumns+` FROM holds WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return entitlement.Hold{}, errHoldNotFound(id)
	}
	if err != nil {
		return entitlement.Hold{}, pgfault.Read(err, "get hold")
	}
	h.Refresh(s.clock())
	return h, nil
}

// ListConsumptions implements store.EntitlementStore.
func (s *Store) ListConsumptions(ctx context.Context, agentID string, since time.Time, p store.Page) ([]entitlement.Consumption, string, error) {
	q := listQuery{
		name:  "consumptions",
		from:  `SELECT * FROM ` + accountConsumptions(consumptionColumns) + ` WHERE true`,
		args:  []any{agentID},
		order: "occurred_at",
		parts: []string{agentID, since.UTC().Format(time.RFC3339Nano)},
	}
	if !since.IsZero() {
		q.from += ` AND occurred_at >= $2`
		q.args = append(q.args, stamp(since))
	}
	return list(ctx, s.pool, q, p, scanConsumption, func(c *entitlement.Consumption) (time.Time, string) { return c.OccurredAt, c.ID })
}

// GetConsumption implements store.EntitlementStore.
func (s *Store) GetConsumption(ctx context.Context, id string) (entitlement.Consumption, error) {
	c, err := scanConsumption(s.pool.QueryRow(ctx, `SELECT `+consumptionColumns+` FROM consumptions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return entitlement.Consumption{}, store.Errorf(store.CodeNotFound, "consumption %q", id)
	}
	if err != nil {
		return entitlement.Consumption{}, pgfault.Read(err, "get consumption")
	}
	return c, nil
}
