package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The common case, a consume whose agent has no other call in flight on
// this instance (many agents, each on its own entitlement), runs alone:
// one transaction of two round trips on one connection, without the lane.
//
//  1. BEGIN; the agent's active entitlements (or the one it names) locked
//     FOR UPDATE; then, in statements that start once the locks are held,
//     its idempotency key and its account's limits.
//  2. The writes charge.Consume's decision made, and COMMIT.
//
// The rules are charge.Consume's, run on what the first round trip read
// (snapshot) with ConsumeOne applying the charge engine to the locked row
// (batch.go), as a lane's batch does. When other calls of the agent are in
// flight, a consume takes the lanes (coalescing a hot entitlement) after
// one pipelined read of the same three lookups (prefetched).

// snapshot is what one pipelined read returned: what the agent's key was
// used for, its account, its entitlements (the active ones, or the one a
// request names), whether it is a wallet member (member) and, when read,
// its memberships and its wallets' active entitlements (never locked), at
// now.
type snapshot struct {
	used    map[keyPair]charge.Used
	account entitlement.Account
	ents    []entitlement.Entitlement
	// versions are the row versions (xmin) of ents, as read: a consume
	// written without locks (guarded.go) writes only while its
	// entitlement's is unchanged.
	versions []uint32
	// accountVersion is the account row's version (xmin), nil without one.
	accountVersion *uint32
	member         bool
	members        []entitlement.Membership
	wallets        []entitlement.Entitlement
	now            time.Time
}

// readSnapshot reads req's snapshot in one round trip on q. With lock, it
// opens a transaction first (BEGIN) and locks the entitlements it reads;
// the transaction stays open. The account's row says whether the agent is
// a wallet member, which costs an agent that is none no statement of its
// own; with wallets, the agent's memberships and its wallets' entitlements
// are read in the same round trip (for an agent last seen to be a member).
func (s *Store) readSnapshot(ctx context.Context, q querier, req *entitlement.ConsumeRequest, lock, wallets bool) (snapshot, error) {
	rb := &pgx.Batch{}
	if lock {
		rb.Queue(`BEGIN`)
	}
	ents := `SELECT ` + entitlementColumns + `, xmin FROM entitlements WHERE agent_id = $1 AND status = 'active' ORDER BY id`
	arg := req.AgentID
	if req.EntitlementID != "" {
		ents, arg = `SELECT `+entitlementColumns+`, xmin FROM entitlements WHERE id = $1`, req.EntitlementID
	}
	if lock {
		ents += ` FOR UPDATE`
	}
	rb.Queue(ents, arg)
	pair := keyPair{req.AgentID, req.IdempotencyKey}
	keys, keyArgs := keyRefsQuery([]keyPair{pair})
	rb.Queue(keys, keyArgs...)
	rb.Queue(`SELECT limits, kind, EXISTS (SELECT 1 FROM memberships WHERE member_id = $1), xmin FROM accounts WHERE agent_id = $1`, req.AgentID)
	if wallets {
		queueWallets(rb, req.AgentID, req.EntitlementID == "")
	}

	var snap snapshot
	res := q.SendBatch(ctx, rb)
	defer res.Close()
	if lock {
		if _, err := res.Exec(); err != nil {
			return snap, err
		}
	}
	rows, err := res.Query()
	if err != nil {
		return snap, err
	}
	if snap.ents, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Entitlement, error) {
		var v uint32
		e, err := scanEntitlement(r, &v)
		snap.versions = append(snap.versions, v)
		return e, err
	}); err != nil {
		return snap, err
	}
	if rows, err = res.Query(); err != nil {
		return snap, err
	}
	refs, err := scanKeyRefs(rows)
	if err != nil {
		return snap, err
	}
	var raw []byte
	var kind string
	var version uint32
	switch err := res.QueryRow().Scan(&raw, &kind, &snap.member, &version); {
	case err == nil:
		snap.accountVersion = &version
		r := &row{table: "accounts", id: req.AgentID}
		snap.account.Limits = r.accountLimits(raw)
		snap.account.Kind = entitlement.AccountKind(r.oneOf("kind", kind, kind == "" || entitlement.AccountKind(kind) == entitlement.KindWallet))
		if r.err != nil {
			return snap, r.err
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return snap, err
	}
	if wallets {
		if snap.members, snap.wallets, err = readWallets(res, req.EntitlementID == ""); err != nil {
			return snap, err
		}
	}
	if err := res.Close(); err != nil {
		return snap, err
	}
	snap.now = s.clock() // after the locks: see Store.clock
	if snap.used, err = resolveKeys(ctx, q, refs, snap.now); snap.used == nil {
		snap.used = map[keyPair]charge.Used{}
	}
	return snap, err
}

// FindKey, CallerAccount, ActiveEntitlements and GetEntitlement answer
// charge.Charger's lookups from the snapshot.

func (p *snapshot) FindKey(_ context.Context, agentID, key string) (charge.Used, error) {
	if u, ok := p.used[keyPair{agentID, key}]; ok {
		return u, nil
	}
	return charge.Used{}, store.Errorf(store.CodeNotFound, "idempotency key not used")
}

func (p *snapshot) CallerAccount(context.Context, string) (entitlement.Account, error) {
	return p.account, nil
}

func (p *snapshot) ActiveEntitlements(_ context.Context, agentID string) (charge.Pool, error) {
	var out charge.Pool
	for _, e := range p.ents {
		if e.AgentID == agentID && e.Status == entitlement.StatusActive {
			out.Entitlements = append(out.Entitlements, e)
		}
	}
	out.Entitlements = append(out.Entitlements, p.wallets...)
	out.Members = p.members
	return out, nil
}

// GetEntitlement is Store.GetEntitlement's answer: lazy resets applied.
func (p *snapshot) GetEntitlement(_ context.Context, id string) (entitlement.Entitlement, error) {
	if e, ok := p.find(id); ok {
		e = e.Clone()
		e.Refresh(p.now)
		return e, nil
	}
	return entitlement.Entitlement{}, store.Errorf(store.CodeNotFound, "entitlement %q", id)
}

func (p *snapshot) find(id string) (entitlement.Entitlement, bool) {
	for _, e := range p.ents {
		if e.ID == id {
			return e, true
		}
	}
	return entitlement.Entitlement{}, false
}

// prefetched is the Store with its lookups answered from a snapshot read
// without locks: the atomic steps still queue on the lanes, whose batches
// lock the row and check the key again.
type prefetched struct {
	*Store
	*snapshot
}

// FindKey and the other lookups are the snapshot's (both embedded types
// have them).
func (p prefetched) FindKey(ctx context.Context, agentID, key string) (charge.Used, error) {
	return p.snapshot.FindKey(ctx, agentID, key)
}

func (p prefetched) CallerAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	return p.snapshot.CallerAccount(ctx, agentID)
}

func (p prefetched) ActiveEntitlements(ctx context.Context, agentID string) (charge.Pool, error) {
	return p.snapshot.ActiveEntitlements(ctx, agentID)
}

func (p prefetched) GetEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error) {
	return p.snapshot.GetEntitlement(ctx, id)
}

// ConsumeOne and AuthorizeOne queue on the lanes as the Store's do, telling
// the batch whether the caller is a wallet member (whose memberships it
// then reads).
func (p prefetched) ConsumeOne(ctx context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error) {
	r, err := p.lanes.Do(ctx, entitlementID, op{kind: opConsume, consume: req, member: p.member})
	return r.consume, err
}

func (p prefetched) AuthorizeOne(ctx context.Context, req *entitlement.HoldRequest, entitlementID string) (store.HoldResult, error) {
	r, err := p.lanes.Do(ctx, entitlementID, op{kind: opAuthorize, authorize: req, member: p.member})
	return r.hold, err
}

// prefetch reads req's snapshot from the pool (one round trip, no locks),
// with the agent's memberships and wallets: in the same round trip for an
// agent this instance last saw to be a member, in a second one for an
// agent that has become one since.
func (s *Store) prefetch(ctx context.Context, req *entitlement.ConsumeRequest) (prefetched, error) {
	known := s.callers.member(req.AgentID)
	snap, err := s.readSnapshot(ctx, s.pool, req, false, known)
	if err == nil && snap.member && !known {
		rb := &pgx.Batch{}
		queueWallets(rb, req.AgentID, req.EntitlementID == "")
		res := s.pool.SendBatch(ctx, rb)
		snap.members, snap.wallets, err = readWallets(res, req.EntitlementID == "")
		if cerr := res.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return prefetched{}, pgfault.Read(err, "read before a charge")
	}
	s.callers.noteMember(req.AgentID, snap.member)
	return prefetched{s, &snap}, nil
}

// alone is one attempt of a consume alone: the snapshot read under the
// locks, and the entitlements charge.Consume tried (one batch each), whose
// writes commit together.
type alone struct {
	prefetched
	ctx     context.Context
	q       querier // the connection of the transaction, or the pool (guarded.go)
	tried   []*batch
	befores []entitlement.Entitlement
}

// ConsumeOne implements charge.Charger: the charge engine on the locked
// row, as a lane's batch of one call.
func (a *alone) ConsumeOne(_ context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error) {
	b := &batch{ctx: a.ctx, tx: a.q, clock: a.Store.clock, used: a.used, holds: map[string]entitlement.Hold{}}
	b.ID, b.Now = entitlementID, a.snapshot.now
	b.Consumption = b.capturedConsumption
	if e, ok := a.find(entitlementID); ok {
		b.E, b.Found = e.Clone(), true
	}
	a.befores = append(a.befores, b.E.Clone())
	a.tried = append(a.tried, b)
	if b.Found {
		b.expireHolds()
	}
	r, err := b.call(&op{kind: opConsume, consume: req})
	return r.consume, err
}

// AuthorizeOne implements charge.Charger; a consume alone never calls it.
func (a *alone) AuthorizeOne(context.Context, *entitlement.HoldRequest, string) (store.HoldResult, error) {
	return store.HoldResult{}, store.Errorf(store.CodeInternal, "authorize inside a consume")
}

// commit sends every write of the tried batches and COMMIT in one round
// trip.
func (a *alone) commit() error {
	wb := &pgx.Batch{}
	for i, b := range a.tried {
		if err := b.queueWrites(wb, &a.befores[i]); err != nil {
			return err
		}
	}
	return commit(a.ctx, a.q, wb)
}

// consumeAlone is CheckAndConsume in one transaction of two round trips on
// one connection. A wallet member's consume leaves it once the first round
// trip shows it is one: the transaction is rolled back and the call takes
// the lanes (prefetch), so a wallet's entitlement, shared by its members,
// is charged by coalesced batches that lock the members' rows.
func (s *Store) consumeAlone(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	var res store.ConsumeResult
	member := false
	err := s.runConn(ctx, "consume", func(conn *pgxpool.Conn) (bool, error) {
		snap, err := s.readSnapshot(ctx, conn, &req, true, false)
		if err != nil {
			return false, err
		}
		if member = snap.member; member {
			return false, nil // runConn rolls back
		}
		a := &alone{prefetched: prefetched{s, &snap}, ctx: ctx, q: conn}
		if res, err = charge.Consume(ctx, a, req); err != nil {
			return false, err
		}
		return true, a.commit()
	})
	if err == nil && member {
		p, err := s.prefetch(ctx, &req)
		if err != nil {
			return store.ConsumeResult{}, err
		}
		return charge.Consume(ctx, p, req)
	}
	return res, err
}

// runConn runs fn, a transaction that fn opens (BEGIN) and commits (COMMIT)
// in pipelined batches on one connection of the pool, retrying it as
// Store.run does; fn reports committing once it sent its COMMIT, so a
// failure may have committed. A transaction fn leaves open is rolled back.
func (s *Store) runConn(ctx context.Context, what string, fn func(conn *pgxpool.Conn) (committing bool, err error)) error {
	return s.retried(ctx, what, func() (bool, error) {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return false, err
		}
		defer func() {
			if conn.Conn().PgConn().TxStatus() != 'I' {
				// Bounded on a context of its own, as ctx may have ended; a
				// connection left inside a transaction is closed on release,
				// which rolls back too.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
				_, _ = conn.Exec(rctx, `ROLLBACK`)
				cancel()
			}
			conn.Release()
		}()
		return fn(conn)
	})
}

// callers counts the charges in flight on this instance per agent, so that
// a consume alone takes the short way, and Close waits for those. It also
// remembers the agents last seen to be wallet members (members), whose
// consumes take the lanes at once instead of learning it in a transaction
// they roll back: a hint only, which the next read of the agent corrects,
// bounded by forgetting all at maxMembers.
type callers struct {
	mu      sync.Mutex
	n       map[string]int
	members map[string]bool
	closed  bool
	wg      sync.WaitGroup
}

// maxMembers bounds the wallet members callers remembers.
const maxMembers = 100_000

// member reports whether agentID was last seen to be a wallet member.
func (c *callers) member(agentID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[agentID]
}

// noteMember records whether agentID was seen to be a wallet member.
func (c *callers) noteMember(agentID string, is bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !is:
		delete(c.members, agentID)
	case c.members == nil || len(c.members) >= maxMembers:
		c.members = map[string]bool{agentID: true}
	default:
		c.members[agentID] = true
	}
}

// enter counts a call of agentID; alone reports that no other call of the
// agent is in flight, ok that the store is open.
func (c *callers) enter(agentID string) (alone, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[agentID]++
	c.wg.Add(1)
	return c.n[agentID] == 1, true
}

// leave ends a call that enter counted.
func (c *callers) leave(agentID string) {
	c.mu.Lock()
	if c.n[agentID]--; c.n[agentID] == 0 {
		delete(c.n, agentID)
	}
	c.mu.Unlock()
	c.wg.Done()
}

// close refuses calls from now on and waits for those in flight.
func (c *callers) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}
