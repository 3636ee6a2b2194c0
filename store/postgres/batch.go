package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
	"github.com/stipend-mcp/stipend/store/internal/coalesce"
)

// A batch is the calls queued on one entitlement's lane (coalesce),
// applied in order in one transaction that locks the entitlement row once:
// consumes, holds, captures and releases alike, so the hot path of a tool
// call (authorize, then capture) coalesces as a one-step consume does.

// opKind says what a queued call does.
type opKind uint8

const (
	opConsume opKind = iota
	opAuthorize
	opCapture
	opRelease
)

// op is one queued call.
type op struct {
	kind      opKind
	consume   *entitlement.ConsumeRequest // opConsume
	authorize *entitlement.HoldRequest    // opAuthorize
	// holdID and agentID name the hold of a capture or release; amount is
	// what a capture charges.
	holdID, agentID string
	amount          entitlement.Amount
	// member says the caller may charge the entitlement as a wallet
	// member: the batch then reads the callers' memberships.
	member bool
}

// key is the (agent, idempotency key) a consume or hold uses.
func (o *op) key() (keyPair, bool) {
	switch o.kind {
	case opConsume:
		return keyPair{o.consume.AgentID, o.consume.IdempotencyKey}, true
	case opAuthorize:
		return keyPair{o.authorize.AgentID, o.authorize.IdempotencyKey}, true
	}
	return keyPair{}, false
}

// caller is the agent that makes the call.
func (o *op) caller() string {
	switch o.kind {
	case opConsume:
		return o.consume.AgentID
	case opAuthorize:
		return o.authorize.AgentID
	}
	return o.agentID
}

// opResult is what one call answers: consume for a consume, hold for the rest.
type opResult struct {
	consume store.ConsumeResult
	hold    store.HoldResult
}

// applyBatch is the lanes' Apply: one transaction, retried as a whole,
// that answers every call, in two round trips on one connection (the reads
// after BEGIN, the writes before COMMIT).
func (s *Store) applyBatch(ctx context.Context, entitlementID string, lb *coalesce.Batch[op, opResult]) error {
	calls := make([]*op, lb.Len())
	for i := range calls {
		o := lb.Op(i)
		calls[i] = &o
	}
	var results []coalesce.Result[opResult]
	err := s.runConn(ctx, "charge entitlement", func(conn *pgxpool.Conn) (bool, error) {
		b := &batch{ctx: ctx, tx: conn, clock: s.clock}
		b.ID = entitlementID
		b.Consumption = b.capturedConsumption
		var err error
		results, err = b.apply(calls)
		return results != nil, err
	})
	if err != nil {
		return err
	}
	for i, r := range results {
		lb.Answer(i, r)
	}
	return nil
}

// what names an operation in errors.
func (o op) what() string {
	return [...]string{"consume", "authorize", "capture hold", "release hold"}[o.kind]
}

// batch is one attempt of a batch's transaction: what it read, and what it
// will write.
type batch struct {
	// Batch is the charge engine's state: the entitlement as read and
	// changed (E, Found), the instant (Now: read once the entitlement is
	// locked, see Store.clock) and the events.
	charge.Batch
	ctx   context.Context
	tx    querier // the connection the transaction runs on
	clock func() time.Time

	used  map[keyPair]charge.Used
	holds map[string]entitlement.Hold // loaded for captures and releases

	// What the batch writes.
	expired      []string
	consumptions []entitlement.Consumption
	newHolds     []entitlement.Hold
	endedHolds   []entitlement.Hold
	newKeys      []newKey
	events       []pendingEvent
}

type newKey struct {
	keyPair
	consumptionID, holdID *string
}

// apply reads what the calls need (the entitlement, locked; their keys;
// their holds), applies each call in order to what it read, and writes.
func (b *batch) apply(calls []*op) ([]coalesce.Result[opResult], error) {
	if err := b.read(calls); err != nil {
		return nil, err
	}
	before := b.E.Clone()
	if b.Found {
		b.expireHolds()
	}
	results := make([]coalesce.Result[opResult], len(calls))
	for i := range calls {
		var err error
		results[i].Value, err = b.call(calls[i])
		if err != nil {
			if store.CodeOf(err) == store.CodeInternal {
				return nil, err // corrupt state: nothing of the batch is written
			}
			results[i].Err = err
		}
	}
	wb := &pgx.Batch{}
	if err := b.queueWrites(wb, &before); err != nil {
		return nil, err
	}
	return results, commit(b.ctx, b.tx, wb)
}

// read opens the transaction, locks and reads the entitlement, then (in
// statements that start after the lock is held, so they see what the last
// holder committed) the calls' keys and holds and, when a call is a wallet
// member's, the memberships of the calls' agents in the wallet that owns
// it, locked: one round trip, the statements pipelined, and one more only
// when keys were used before.
func (b *batch) read(calls []*op) error {
	var pairs []keyPair
	var holdIDs, members []string
	for i := range calls {
		if k, ok := calls[i].key(); ok {
			pairs = append(pairs, k)
		} else {
			holdIDs = append(holdIDs, calls[i].holdID)
		}
		if calls[i].member {
			members = append(members, calls[i].caller())
		}
	}
	rb := &pgx.Batch{}
	rb.Queue(`BEGIN`)
	rb.Queue(`SELECT `+entitlementColumns+` FROM entitlements WHERE id = $1 FOR UPDATE`, b.ID)
	if len(members) > 0 {
		rb.Queue(lockMembersSQL, b.ID, members)
	}
	if len(pairs) > 0 {
		sql, args := keyRefsQuery(pairs)
		rb.Queue(sql, args...)
	}
	if len(holdIDs) > 0 {
		rb.Queue(holdsByIDSQL, holdIDs)
	}
	res := b.tx.SendBatch(b.ctx, rb)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return err
	}
	e, err := scanEntitlement(res.QueryRow())
	switch {
	case err == nil:
		b.E, b.Found = e, true
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	if len(members) > 0 {
		if err := b.readMembers(res); err != nil {
			return err
		}
	}
	refs := map[keyPair]keyRef{}
	if len(pairs) > 0 {
		rows, err := res.Query()
		if err != nil {
			return err
		}
		if refs, err = scanKeyRefs(rows); err != nil {
			return err
		}
	}
	b.holds = map[string]entitlement.Hold{}
	if len(holdIDs) > 0 {
		rows, err := res.Query()
		if err != nil {
			return err
		}
		if b.holds, err = scanHolds(rows); err != nil {
			return err
		}
	}
	if err := res.Close(); err != nil {
		return err
	}
	b.Now = b.clock()
	if b.used, err = resolveKeys(b.ctx, b.tx, refs, b.Now); err != nil {
		return err
	}
	if b.used == nil {
		b.used = map[keyPair]charge.Used{}
	}
	return nil
}

// expireHolds ends the entitlement's expired holds first, as every
// transaction that touches an entitlement does (charge.Batch.Start).
func (b *batch) expireHolds() {
	b.expired = b.Start()
	for _, id := range b.expired {
		if h, ok := b.holds[id]; ok {
			charge.EndExpired(&charge.Record{Hold: &h}, b.expired, b.Now)
			b.holds[id] = h
		}
	}
}

// queueWrites queues every write of the batch on wb, rows before the keys
// that name them, and keys in a fixed order, so two batches that share keys
// wait for each other instead of deadlocking.
func (b *batch) queueWrites(wb *pgx.Batch, before *entitlement.Entitlement) error {
	if b.Found && !sameState(before, &b.E) {
		args, err := updateEntitlementArgs(&b.E)
		if err != nil {
			return err
		}
		wb.Queue(updateEntitlementSQL, args...)
	}
	if err := b.queueMembers(wb); err != nil {
		return err
	}
	if len(b.expired) > 0 {
		wb.Queue(endHoldsSQL, b.expired, string(entitlement.HoldExpired), b.Now)
	}
	for i := range b.newHolds {
		wb.Queue(insertHoldSQL, holdArgs(&b.newHolds[i])...)
	}
	for i := range b.endedHolds {
		wb.Queue(endHoldSQL, endHoldArgs(&b.endedHolds[i])...)
	}
	for i := range b.consumptions {
		wb.Queue(insertConsumptionSQL, consumptionArgs(&b.consumptions[i])...)
	}
	slices.SortFunc(b.newKeys, func(x, y newKey) int {
		if c := strings.Compare(x.agent, y.agent); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	})
	for _, k := range b.newKeys {
		wb.Queue(insertKeySQL, k.agent, k.key, k.consumptionID, k.holdID)
	}
	for _, p := range b.events {
		q, args, err := insertEvent(p, b.Now)
		if err != nil {
			return err
		}
		wb.Queue(q, args...)
	}
	return nil
}

// commit sends wb's writes and COMMIT in one round trip. A key another
// transaction took meanwhile fails its statement (insertKeySQL), so nothing
// after it commits, and the transaction starts again (errRetry), reading
// the key as used.
func commit(ctx context.Context, conn querier, wb *pgx.Batch) error {
	wb = joinCharge(wb)
	wb.Queue(`COMMIT`)
	res := conn.SendBatch(ctx, wb)
	for range wb.Len() {
		if _, err := res.Exec(); err != nil {
			_ = res.Close()
			if e, ok := errors.AsType[*pgconn.PgError](err); ok && e.Code == "23505" && e.TableName == "charge_keys" {
				return errRetry
			}
			return err
		}
	}
	if err := res.Close(); err != nil {
		return fmt.Errorf("charge batch: %w", err)
	}
	return nil
}

// The writes of one charge (the entitlement's new state, its consumption,
// its key: each at most once, in that order, nothing else) go as one
// statement, whose data-modifying WITH clauses take one parse, bind and
// execution instead of three. They write three tables and none reads
// another's rows (no foreign keys: migration 00009), so their order inside
// the statement does not matter; a key another transaction took fails the
// statement as it failed its INSERT.
var joinable = [...]string{updateEntitlementSQL, insertConsumptionSQL, insertKeySQL}

// joined is the one statement of each set of joinable statements (a bit
// per joinable[i]) with two or more.
var joined = func() map[int]string {
	out := map[int]string{}
	for set := 1; set < 1<<len(joinable); set++ {
		parts, _ := joinParts(set)
		if len(parts) < 2 {
			continue
		}
		out[set] = withClauses(parts[:len(parts)-1]) + " " + parts[len(parts)-1]
	}
	return out
}()

// joinParts returns the statements of set, their parameters numbered in
// a row, and how many parameters they take.
func joinParts(set int) (parts []string, params int) {
	for i, q := range joinable {
		if set&(1<<i) == 0 {
			continue
		}
		parts = append(parts, shiftParams(q, params))
		n := 0
		for _, p := range paramRef.FindAllString(q, -1) {
			v, _ := strconv.Atoi(p[1:])
			n = max(n, v)
		}
		params += n
	}
	return parts, params
}

// withClauses is "WITH w0 AS (parts[0]), w1 AS (parts[1]), …".
func withClauses(parts []string) string {
	sql := ""
	for i, p := range parts {
		sql += fmt.Sprintf(", w%d AS (%s)", i, p)
	}
	return "WITH" + sql[1:]
}

// shiftParams adds n to the number of every parameter ($1…) of sql.
func shiftParams(sql string, n int) string {
	return paramRef.ReplaceAllStringFunc(sql, func(p string) string {
		i, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(i+n)
	})
}

var paramRef = regexp.MustCompile(`\$[0-9]+`)

// joinCharge returns wb's writes as one statement when they are one
// charge's, or wb.
func joinCharge(wb *pgx.Batch) *pgx.Batch {
	set, args := chargeSet(wb)
	sql, ok := joined[set]
	if !ok {
		return wb
	}
	out := &pgx.Batch{}
	out.Queue(sql, args...)
	return out
}

// chargeSet returns the set of joinable statements (a bit per
// joinable[i]) that wb's writes are, with their arguments in a row, or 0
// when they are not one charge's.
func chargeSet(wb *pgx.Batch) (set int, args []any) {
	last := -1
	for _, q := range wb.QueuedQueries {
		i := slices.Index(joinable[:], q.SQL)
		if i <= last { // not joinable, out of order or twice
			return 0, nil
		}
		set, last = set|1<<i, i
		args = append(args, q.Arguments...)
	}
	return set, args
}
