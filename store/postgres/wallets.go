package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
	"github.com/stipend-mcp/stipend/store/internal/cursor"
)

// The memberships of wallets (migration 00010): one row per wallet ×
// member, its caps (with the member's spend of the period) and its holds as
// JSON.

// membershipColumns are the columns scanMembership reads, in its order.
const membershipColumns = `wallet_id, member_id, member_order, caps, holds, created_at, updated_at`

// memberHoldJSON is one element of the holds column.
type memberHoldJSON struct {
	ID        string    `json:"id"`
	Cents     int64     `json:"cents,omitempty"`
	Units     int64     `json:"units,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// scanMembership reads one row of membershipColumns strictly.
func scanMembership(rows pgx.Row) (entitlement.Membership, error) {
	var (
		m               entitlement.Membership
		order           string
		caps, holds     []byte
		created, update *time.Time
	)
	if err := rows.Scan(&m.WalletID, &m.MemberID, &order, &caps, &holds, &created, &update); err != nil {
		return entitlement.Membership{}, err
	}
	r := &row{table: "memberships", id: m.WalletID + "/" + m.MemberID}
	m.Order = entitlement.Order(r.oneOf("member_order", order, entitlement.Order(order).Valid()))
	if err := strictJSON(caps, &m.Caps); err != nil {
		r.corrupt("caps", "not caps: %v", err)
	}
	m.Caps.Spend.ResetAt, m.Caps.Spend.Anchor = m.Caps.Spend.ResetAt.UTC(), m.Caps.Spend.Anchor.UTC()
	var list []memberHoldJSON
	if err := strictJSON(holds, &list); err != nil {
		r.corrupt("holds", "not an array of member holds: %v", err)
	}
	for i, h := range list {
		if h.ID == "" || h.ExpiresAt.IsZero() || h.Cents < 0 || h.Units < 0 || h.Cents > money.MaxCents || h.Units > money.MaxCents {
			r.corrupt("holds", "element %d: %+v is not a member hold", i, h)
			break
		}
		m.Holds = append(m.Holds, entitlement.MemberHold{ID: h.ID, Cents: h.Cents, Units: h.Units, ExpiresAt: h.ExpiresAt.UTC()})
	}
	m.CreatedAt, m.UpdatedAt = r.required("created_at", created), r.required("updated_at", update)
	if r.err != nil {
		return entitlement.Membership{}, r.err
	}
	return m, nil
}

// membershipArgs are m's values for membershipColumns.
func membershipArgs(m *entitlement.Membership) ([]any, error) {
	caps, holds, err := membershipJSON(m)
	if err != nil {
		return nil, err
	}
	return []any{m.WalletID, m.MemberID, string(m.Order), caps, holds, stamp(m.CreatedAt), stamp(m.UpdatedAt)}, nil
}

// membershipJSON encodes m's caps and holds columns.
func membershipJSON(m *entitlement.Membership) (caps, holds []byte, err error) {
	list := make([]memberHoldJSON, len(m.Holds))
	for i, h := range m.Holds {
		list[i] = memberHoldJSON{ID: h.ID, Cents: h.Cents, Units: h.Units, ExpiresAt: stamp(h.ExpiresAt)}
	}
	if caps, err = jsonArg(m.Caps); err == nil {
		holds, err = jsonArg(list)
	}
	return caps, holds, err
}

// insertMembershipSQL inserts a new membership unless it exists;
// updateMembershipSQL writes a changed one.
const (
	insertMembershipSQL = `INSERT INTO memberships (` + membershipColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (wallet_id, member_id) DO NOTHING`
	updateMembershipSQL = `UPDATE memberships SET member_order = $3, caps = $4, holds = $5, updated_at = $6
		WHERE wallet_id = $1 AND member_id = $2`
)

// updateMembershipArgs are m's values for updateMembershipSQL.
func updateMembershipArgs(m *entitlement.Membership) ([]any, error) {
	args, err := membershipArgs(m)
	if err != nil {
		return nil, err
	}
	return append(args[:5:5], args[6]), nil
}

func membershipNotFound(walletID, memberID string) error {
	return store.Errorf(store.CodeNotFound, "membership of %q in wallet %q", memberID, walletID)
}

func (t *tx) Membership(walletID, memberID string) (entitlement.Membership, error) {
	m, err := one(t.ctx, t.q, scanMembership, membershipNotFound(walletID, memberID),
		`SELECT `+membershipColumns+` FROM memberships WHERE wallet_id = $1 AND member_id = $2`+t.lock, walletID, memberID)
	if err == nil {
		if t.memberships == nil {
			t.memberships = make(map[[2]string]bool)
		}
		t.memberships[[2]string{walletID, memberID}] = true
	}
	return m, err
}

// PutMembership updates a membership Membership found, or inserts a new
// one; if a concurrent transaction inserted it meanwhile, the unit starts
// over and reads it.
func (t *tx) PutMembership(m entitlement.Membership) {
	sql, args := insertMembershipSQL, membershipArgs
	if t.memberships[[2]string{m.WalletID, m.MemberID}] {
		sql, args = updateMembershipSQL, updateMembershipArgs
	}
	values, err := args(&m)
	switch {
	case err != nil:
		t.write(func() error { return err })
	case sql == insertMembershipSQL:
		t.insert(sql, values...)
	default:
		t.exec(sql, values...)
	}
}

func (t *tx) DeleteMembership(walletID, memberID string) {
	t.exec(`DELETE FROM memberships WHERE wallet_id = $1 AND member_id = $2`, walletID, memberID)
}

// ListMembers implements store.Wallets: by member ID.
func (s *Store) ListMembers(ctx context.Context, walletID string, p store.Page) ([]entitlement.Membership, string, error) {
	return s.listMemberships(ctx, "members", "wallet_id", "member_id", walletID, p, func(m *entitlement.Membership) string { return m.MemberID })
}

// ListWallets implements store.Wallets: by wallet ID.
func (s *Store) ListWallets(ctx context.Context, memberID string, p store.Page) ([]entitlement.Membership, string, error) {
	return s.listMemberships(ctx, "wallets", "member_id", "wallet_id", memberID, p, func(m *entitlement.Membership) string { return m.WalletID })
}

// listMemberships pages the memberships whose column owner is id, ordered
// by the column key, each shown as it is now. Cursors are package
// cursor's, the key as the position's ID.
func (s *Store) listMemberships(ctx context.Context, name, owner, key, id string, p store.Page, keyOf func(*entitlement.Membership) string) ([]entitlement.Membership, string, error) {
	size, list := p.Size(), cursor.List(name, id)
	after, _, err := cursor.Decode(p.Cursor, list)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+membershipColumns+` FROM memberships WHERE `+owner+` = $1 AND `+key+` COLLATE "C" > $2
		ORDER BY `+key+` COLLATE "C" LIMIT $3`, id, after.ID, size+1)
	if err != nil {
		return nil, "", pgfault.Read(err, "list %s", name)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Membership, error) { return scanMembership(r) })
	if err != nil {
		return nil, "", pgfault.Read(err, "list %s", name)
	}
	now := s.clock()
	for i := range items {
		items[i].Refresh(now)
	}
	if len(items) <= size {
		return items, "", nil
	}
	items = items[:size]
	return items, cursor.Encode(list, cursor.Position{ID: keyOf(&items[size-1])}), nil
}

// lockMembersSQL reads, locked in member order, the memberships of the
// agents $2 in the wallet that owns the entitlement $1: what a batch on a
// wallet's entitlement counts its members' charges on. On an agent's
// entitlement it finds nothing (no agent is its own member).
const lockMembersSQL = `SELECT ` + membershipColumns + ` FROM memberships
	WHERE wallet_id = (SELECT agent_id FROM entitlements WHERE id = $1) AND member_id = ANY($2)
	ORDER BY member_id FOR UPDATE`

// readMembers reads the result of lockMembersSQL into the engine's Members.
func (b *batch) readMembers(res pgx.BatchResults) error {
	rows, err := res.Query()
	if err != nil {
		return err
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Membership, error) { return scanMembership(r) })
	if err != nil || len(ms) == 0 {
		return err
	}
	b.Members = make(map[string]*entitlement.Membership, len(ms))
	for i := range ms {
		b.Members[ms[i].MemberID] = &ms[i]
	}
	return nil
}

// updateMembersSQL writes the spend and holds of several memberships of
// one wallet ($1) in one statement: the member IDs $2 with their caps $3
// and holds $4, in the same order.
const updateMembersSQL = `UPDATE memberships m SET caps = v.caps, holds = v.holds
	FROM unnest($2::text[], $3::jsonb[], $4::jsonb[]) AS v (member_id, caps, holds)
	WHERE m.wallet_id = $1 AND m.member_id = v.member_id`

// queueMembers queues the write of the memberships the batch's calls
// changed: one statement, whatever their number.
func (b *batch) queueMembers(wb *pgx.Batch) error {
	if len(b.MembersChanged) == 0 {
		return nil
	}
	n := len(b.MembersChanged)
	ids, caps, holds := make([]string, 0, n), make([][]byte, 0, n), make([][]byte, 0, n)
	for id := range b.MembersChanged {
		c, h, err := membershipJSON(b.Members[id])
		if err != nil {
			return err
		}
		ids, caps, holds = append(ids, id), append(caps, c), append(holds, h)
	}
	wb.Queue(updateMembersSQL, b.E.AgentID, ids, caps, holds)
	return nil
}

// lockMember gives b, a refund's engine, the membership of memberID in
// walletID, locked in the refund's transaction, when there is one (a
// member removed since counts nothing).
func lockMember(ctx context.Context, tx pgx.Tx, b *charge.Batch, walletID, memberID string) error {
	m, err := one(ctx, tx, scanMembership, store.ErrNotFound,
		`SELECT `+membershipColumns+` FROM memberships WHERE wallet_id = $1 AND member_id = $2 FOR UPDATE`, walletID, memberID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	b.Members = map[string]*entitlement.Membership{memberID: &m}
	return nil
}

// writeMembers writes the memberships b changed, in tx.
func writeMembers(ctx context.Context, tx pgx.Tx, b *charge.Batch) error {
	for id := range b.MembersChanged {
		args, err := updateMembershipArgs(b.Members[id])
		if err == nil {
			_, err = tx.Exec(ctx, updateMembershipSQL, args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
