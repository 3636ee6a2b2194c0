package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// The top-up of an account is the JSON document in accounts.topup
// (migration 00005); every change locks the account's row first, so the
// compare-and-set of BeginTopUp is the row lock plus the sequence check.

// decodeTopUp reads the topup column of agentID's row (NULL: never set).
func decodeTopUp(agentID string, raw []byte) (topup.TopUp, error) {
	t := topup.TopUp{AgentID: agentID}
	if raw == nil {
		return t, nil
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInternal, err, "account %q: corrupt topup", agentID)
	}
	t.AgentID = agentID
	return t, nil
}

// lockTopUp reads and locks the top-up of agentID inside tx.
func lockTopUp(ctx context.Context, tx pgx.Tx, agentID string) (topup.TopUp, error) {
	var raw []byte
	err := tx.QueryRow(ctx, `SELECT topup FROM accounts WHERE agent_id = $1 FOR UPDATE`, agentID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return topup.TopUp{}, store.Errorf(store.CodeNotFound, "account %q", agentID)
	}
	if err != nil {
		return topup.TopUp{}, err
	}
	return decodeTopUp(agentID, raw)
}

func writeTopUp(ctx context.Context, tx pgx.Tx, t *topup.TopUp) error {
	raw, err := jsonArg(t)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE accounts SET topup = $2, topup_watched = $3 WHERE agent_id = $1`, t.AgentID, raw, t.Watched())
	return err
}

// pendingTopUpPayment reads the payment of t's pending top-up, or nil.
func pendingTopUpPayment(ctx context.Context, tx pgx.Tx, t *topup.TopUp) (*payment.Payment, error) {
	if t.PendingPaymentID == "" {
		return nil, nil
	}
	p, err := scanPayment(tx.QueryRow(ctx, `SELECT `+paymentColumns+` FROM payments WHERE id = $1`, t.PendingPaymentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// changeTopUp runs change on the locked top-up of agentID and writes it
// back when change says it changed.
func (s *Store) changeTopUp(ctx context.Context, what, agentID string, ensure bool,
	change func(tx pgx.Tx, t *topup.TopUp, now time.Time) (bool, error)) (topup.TopUp, error) {
	var out topup.TopUp
	err := s.run(ctx, what, func(tx pgx.Tx) error {
		if ensure {
			if err := ensureAccount(ctx, tx, agentID, s.clock()); err != nil {
				return err
			}
		}
		t, err := lockTopUp(ctx, tx, agentID)
		if err != nil {
			return err
		}
		changed, err := change(tx, &t, s.clock())
		if err != nil {
			return err
		}
		out = t
		if !changed {
			return nil
		}
		return writeTopUp(ctx, tx, &t)
	})
	return out, err
}

// SaveTopUpMethod implements store.TopUps.
func (s *Store) SaveTopUpMethod(ctx context.Context, agentID string, m topup.Method) (topup.TopUp, error) {
	if agentID == "" || m.Customer == "" || m.PaymentMethod == "" {
		return topup.TopUp{}, store.Errorf(store.CodeInvalid, "method: an agent, a customer and a payment method are required")
	}
	return s.changeTopUp(ctx, "save top-up method", agentID, true, func(_ pgx.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		t.Method, t.UpdatedAt = &m, now
		return true, nil
	})
}

// PutTopUp implements store.TopUps.
func (s *Store) PutTopUp(ctx context.Context, agentID string, set topup.Settings) (topup.TopUp, error) {
	if err := set.Validate(); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInvalid, err, "top-up")
	}
	return s.changeTopUp(ctx, "put top-up", agentID, false, func(_ pgx.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		if err := topup.Set(t, set.Clone(), now); err != nil {
			return false, store.Wrap(store.CodeConflict, err, "top-up of %q", agentID)
		}
		return true, nil
	})
}

// GetTopUp implements store.TopUps.
func (s *Store) GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT topup FROM accounts WHERE agent_id = $1`, agentID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return topup.TopUp{}, store.Errorf(store.CodeNotFound, "account %q", agentID)
	}
	if err != nil {
		return topup.TopUp{}, pgfault.Read(err, "get top-up")
	}
	return decodeTopUp(agentID, raw)
}

// DisableTopUp implements store.TopUps.
func (s *Store) DisableTopUp(ctx context.Context, agentID, reason string) (topup.TopUp, error) {
	return s.changeTopUp(ctx, "disable top-up", agentID, false, func(_ pgx.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		if !t.Enabled {
			return false, nil
		}
		topup.Disable(t, reason, now)
		return true, nil
	})
}

// BeginTopUp implements store.TopUps: the account's row lock orders
// concurrent beginners, and each sees the sequence the one before it left.
func (s *Store) BeginTopUp(ctx context.Context, agentID string, expectSeq int64) (payment.Payment, error) {
	var out payment.Payment
	var refused error
	_, err := s.changeTopUp(ctx, "begin top-up", agentID, false, func(tx pgx.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		refused = nil
		prior, err := pendingTopUpPayment(ctx, tx, t)
		if err != nil {
			return false, err
		}
		before, pendingBefore := t.Seq, t.PendingPaymentID
		p, failure, berr := topup.Begin(t, expectSeq, prior, now)
		if failure != nil {
			if err := enqueue(ctx, tx, now, pending(event.TopUpFailed, agentID, failure)); err != nil {
				return false, err
			}
		}
		if berr != nil {
			refused = store.Wrap(store.CodeConflict, berr, "top-up of %q", agentID)
			return t.PendingPaymentID != pendingBefore, nil // settled, or not
		}
		var res store.CreatePaymentResult
		if err := s.insertPayment(ctx, tx, p, &res); err != nil {
			return false, err
		}
		if !res.Created {
			return false, store.Errorf(store.CodeInternal, "top-up payment %s (sequence %d) exists already", p.ID, before+1)
		}
		out = res.Payment
		return true, nil
	})
	if err == nil {
		err = refused
	}
	return out, err
}

// SettleTopUp implements store.TopUps.
func (s *Store) SettleTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	return s.changeTopUp(ctx, "settle top-up", agentID, false, func(tx pgx.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		prior, err := pendingTopUpPayment(ctx, tx, t)
		if err != nil {
			return false, err
		}
		failure, changed := topup.Settle(t, prior, now)
		if failure != nil {
			if err := enqueue(ctx, tx, now, pending(event.TopUpFailed, agentID, failure)); err != nil {
				return false, err
			}
		}
		return changed, nil
	})
}

// topUpRow is a listed top-up with its account's creation, the list order.
type topUpRow struct {
	t  topup.TopUp
	at time.Time
}

// ListTopUps implements store.TopUps, on the partial index
// accounts_topup_watched (by account creation, then agent ID).
func (s *Store) ListTopUps(ctx context.Context, p store.Page) ([]topup.TopUp, string, error) {
	q := listQuery{
		name:  "topups",
		from:  `SELECT id, topup, created_at FROM (SELECT agent_id AS id, topup, created_at FROM accounts WHERE topup_watched) a WHERE true`,
		order: "created_at",
	}
	scan := func(r pgx.Row) (topUpRow, error) {
		var row topUpRow
		var id string
		var raw []byte
		if err := r.Scan(&id, &raw, &row.at); err != nil {
			return row, err
		}
		var err error
		row.t, err = decodeTopUp(id, raw)
		return row, err
	}
	rows, next, err := list(ctx, s.pool, q, p, scan, func(r *topUpRow) (time.Time, string) { return r.at, r.t.AgentID })
	if err != nil {
		return nil, "", err
	}
	out := make([]topup.TopUp, len(rows))
	for i := range rows {
		out[i] = rows[i].t
	}
	return out, next, nil
}
