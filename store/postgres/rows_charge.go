package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
)

// consumptionColumns are the columns scanConsumption reads, in its order.
const consumptionColumns = `id, agent_id, idempotency_key, entitlement_id, entitlement_type, service, tool,
	cost_cents, cost_currency, units, occurred_at, balance_after_cents, balance_after_currency, remaining_after,
	hold_id, fingerprint, refund_cost_cents, refund_cost_currency, refund_units, refunded_at, wallet_id`

// scanConsumption reads one row of consumptionColumns strictly.
func scanConsumption(rows pgx.Row) (entitlement.Consumption, error) {
	var (
		c                                entitlement.Consumption
		typ, costCur, balCur             string
		costCents, balCents              int64
		occurred, refundedAt             *time.Time
		refundCents, refundUnits, remain *int64
		refundCur                        *string
	)
	err := rows.Scan(&c.ID, &c.AgentID, &c.IdempotencyKey, &c.EntitlementID, &typ, &c.Service, &c.Tool,
		&costCents, &costCur, &c.Units, &occurred, &balCents, &balCur, &remain,
		&c.HoldID, &c.Fingerprint, &refundCents, &refundCur, &refundUnits, &refundedAt, &c.WalletID)
	if err != nil {
		return entitlement.Consumption{}, err
	}
	r := &row{table: "consumptions", id: c.ID}
	return r.consumption(c, typ, costCents, costCur, balCents, balCur, occurred, remain, refundCents, refundCur, refundUnits, refundedAt)
}

// consumption finishes a scanned consumption, checking what it holds.
func (r *row) consumption(c entitlement.Consumption, typ string, costCents int64, costCur string, balCents int64, balCur string,
	occurred *time.Time, remain, refundCents *int64, refundCur *string, refundUnits *int64, refundedAt *time.Time,
) (entitlement.Consumption, error) {
	c.EntitlementType = entitlement.Type(r.oneOf("entitlement_type", typ, entitlement.Type(typ).Valid()))
	c.Cost = r.money("cost_cents", costCents, costCur)
	c.Units = r.nonNegative("units", c.Units)
	c.OccurredAt = r.required("occurred_at", occurred)
	c.BalanceAfter = r.money("balance_after_cents", balCents, balCur)
	if remain != nil {
		n := r.nonNegative("remaining_after", *remain)
		c.RemainingAfter = &n
	}
	if refundedAt != nil {
		if refundCents == nil || refundCur == nil || refundUnits == nil {
			r.corrupt("refunded_at", "set without the refund's amount")
		} else {
			c.Refund = &entitlement.Refund{
				Charge: entitlement.Charge{
					Cost:  r.money("refund_cost_cents", *refundCents, *refundCur),
					Units: r.nonNegative("refund_units", *refundUnits),
				},
				RefundedAt: refundedAt.UTC(),
			}
		}
	}
	if c.Fingerprint == "" {
		r.corrupt("fingerprint", "missing")
	}
	if r.err != nil {
		return entitlement.Consumption{}, r.err
	}
	return c, nil
}

// insertConsumptionSQL inserts one new consumption (with no refund).
const insertConsumptionSQL = `INSERT INTO consumptions (id, agent_id, idempotency_key, entitlement_id,
	entitlement_type, service, tool, cost_cents, cost_currency, units, occurred_at, balance_after_cents,
	balance_after_currency, remaining_after, hold_id, fingerprint, wallet_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`

func consumptionArgs(c *entitlement.Consumption) []any {
	return []any{c.ID, c.AgentID, c.IdempotencyKey, c.EntitlementID, string(c.EntitlementType), c.Service, c.Tool,
		c.Cost.Cents, c.Cost.Currency, c.Units, c.OccurredAt, c.BalanceAfter.Cents, c.BalanceAfter.Currency,
		c.RemainingAfter, c.HoldID, c.Fingerprint, c.WalletID}
}

// holdColumns are the columns scanHold reads, in its order.
const holdColumns = `id, agent_id, entitlement_id, entitlement_type, service, tool, idempotency_key, status,
	max_cost_cents, max_cost_currency, max_units, created_at, expires_at, ended_at,
	captured_cost_cents, captured_cost_currency, captured_units, consumption_id, fingerprint, wallet_id`

// scanHold reads one row of holdColumns strictly.
func scanHold(rows pgx.Row) (entitlement.Hold, error) {
	var (
		h                       entitlement.Hold
		typ, status, maxCur     string
		maxCents                int64
		created, expires, ended *time.Time
		capCents, capUnits      *int64
		capCur                  *string
	)
	err := rows.Scan(&h.ID, &h.AgentID, &h.EntitlementID, &typ, &h.Service, &h.Tool, &h.IdempotencyKey, &status,
		&maxCents, &maxCur, &h.MaxUnits, &created, &expires, &ended,
		&capCents, &capCur, &capUnits, &h.ConsumptionID, &h.Fingerprint, &h.WalletID)
	if err != nil {
		return entitlement.Hold{}, err
	}
	r := &row{table: "holds", id: h.ID}
	return r.hold(h, typ, status, maxCents, maxCur, created, expires, ended, capCents, capCur, capUnits)
}

// hold finishes a scanned hold, checking what it holds.
func (r *row) hold(h entitlement.Hold, typ, status string, maxCents int64, maxCur string, created, expires, ended *time.Time,
	capCents *int64, capCur *string, capUnits *int64,
) (entitlement.Hold, error) {
	h.EntitlementType = entitlement.Type(r.oneOf("entitlement_type", typ, entitlement.Type(typ).Valid()))
	h.Status = entitlement.HoldStatus(r.oneOf("status", status, validHoldStatus(status)))
	h.MaxCost = r.money("max_cost_cents", maxCents, maxCur)
	h.MaxUnits = r.nonNegative("max_units", h.MaxUnits)
	h.CreatedAt = r.required("created_at", created)
	h.ExpiresAt = r.required("expires_at", expires)
	h.EndedAt = instantPtr(ended)
	if (h.Status == entitlement.HoldOpen) != (h.EndedAt == nil) {
		r.corrupt("ended_at", "does not agree with status %s", status)
	}
	if capUnits != nil {
		if capCents == nil || capCur == nil {
			r.corrupt("captured_units", "set without the captured cost")
		} else {
			h.Captured = &entitlement.Charge{Cost: r.money("captured_cost_cents", *capCents, *capCur), Units: r.nonNegative("captured_units", *capUnits)}
		}
	}
	if (h.Status == entitlement.HoldCaptured) != (h.Captured != nil && h.ConsumptionID != "") {
		r.corrupt("captured_units", "does not agree with status %s", status)
	}
	if h.Fingerprint == "" {
		r.corrupt("fingerprint", "missing")
	}
	if r.err != nil {
		return entitlement.Hold{}, r.err
	}
	return h, nil
}

func validHoldStatus(s string) bool {
	switch entitlement.HoldStatus(s) {
	case entitlement.HoldOpen, entitlement.HoldCaptured, entitlement.HoldReleased, entitlement.HoldExpired:
		return true
	}
	return false
}

// insertHoldSQL inserts one new (open) hold.
const insertHoldSQL = `INSERT INTO holds (id, agent_id, entitlement_id, entitlement_type, service, tool,
	idempotency_key, status, max_cost_cents, max_cost_currency, max_units, created_at, expires_at, fingerprint, wallet_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`

func holdArgs(h *entitlement.Hold) []any {
	return []any{h.ID, h.AgentID, h.EntitlementID, string(h.EntitlementType), h.Service, h.Tool,
		h.IdempotencyKey, string(h.Status), h.MaxCost.Cents, h.MaxCost.Currency, h.MaxUnits, h.CreatedAt, h.ExpiresAt, h.Fingerprint, h.WalletID}
}

// endHoldSQL records how an open hold ended: captured (with what and the
// consumption) or released. Expired holds end through expireHoldsSQL.
const endHoldSQL = `UPDATE holds SET status = $2, ended_at = $3, captured_cost_cents = $4,
	captured_cost_currency = $5, captured_units = $6, consumption_id = $7 WHERE id = $1 AND status = 'held'`

func endHoldArgs(h *entitlement.Hold) []any {
	var cents, units *int64
	var cur *string
	if h.Captured != nil {
		cents, cur, units = &h.Captured.Cost.Cents, &h.Captured.Cost.Currency, &h.Captured.Units
	}
	return []any{h.ID, string(h.Status), h.EndedAt, cents, cur, units, h.ConsumptionID}
}

// endHoldsSQL ends the open holds $1 with status $2 (released, by a
// revoke) or, for expired ones, at their expiry (what Hold.End records).
const endHoldsSQL = `UPDATE holds SET status = $2,
	ended_at = CASE WHEN $2 = 'expired' THEN expires_at ELSE $3 END
	WHERE id = ANY($1) AND status = 'held'`
