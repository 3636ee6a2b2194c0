package postgres

import (
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// entitlementColumns are the columns scanEntitlement reads, in its order.
const entitlementColumns = `id, agent_id, type, scope_service, scope_tools, status, created_at, expires_at,
	revoked_at, payment_id, metadata, balance_cents, balance_currency, granted_cents, granted_currency,
	quota_limit, quota_period, quota_remaining, quota_reset_at, quota_anchor, valid_from, valid_until, holds, controls`

// openHoldJSON is one element of the holds column.
type openHoldJSON struct {
	ID        string    `json:"id"`
	Amount    int64     `json:"amount"`
	ExpiresAt time.Time `json:"expiresAt"`
	MemberID  string    `json:"memberId,omitempty"`
}

// scanEntitlement reads one row of entitlementColumns strictly, and into
// extra the columns the row has after them.
func scanEntitlement(rows pgx.Row, extra ...any) (entitlement.Entitlement, error) {
	var (
		e                                      entitlement.Entitlement
		typ, status, period, balCur, grantCur  string
		created, expires, revoked              *time.Time
		resetAt, anchor, validFrom, validUntil *time.Time
		metadata, holds, controls              []byte
		balCents, grantCents, limit, remaining int64
	)
	err := rows.Scan(append([]any{&e.ID, &e.AgentID, &typ, &e.Scope.Service, &e.Scope.Tools, &status, &created, &expires,
		&revoked, &e.PaymentID, &metadata, &balCents, &balCur, &grantCents, &grantCur,
		&limit, &period, &remaining, &resetAt, &anchor, &validFrom, &validUntil, &holds, &controls}, extra...)...)
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	r := &row{table: "entitlements", id: e.ID}
	e.Type = entitlement.Type(r.oneOf("type", typ, entitlement.Type(typ).Valid()))
	e.Status = entitlement.Status(r.oneOf("status", status, entitlement.Status(status).Valid()))
	e.CreatedAt = r.required("created_at", created)
	e.ExpiresAt, e.RevokedAt = instantPtr(expires), instantPtr(revoked)
	e.Metadata = r.strings("metadata", metadata)
	if len(e.Scope.Tools) == 0 {
		e.Scope.Tools = nil
	}
	switch e.Type {
	case entitlement.TypeCredits:
		e.Credits.Balance = r.amount("balance_cents", balCents, balCur)
		if e.Credits.Balance.Cents < 0 {
			r.corrupt("balance_cents", "%d is negative", balCents)
		}
		e.Credits.Granted = r.money("granted_cents", grantCents, grantCur)
	case entitlement.TypeQuota:
		e.Quota = entitlement.Quota{
			Limit:     r.nonNegative("quota_limit", limit),
			Period:    entitlement.Period(r.oneOf("quota_period", period, entitlement.Period(period).Valid())),
			Remaining: r.nonNegative("quota_remaining", remaining),
			ResetAt:   r.required("quota_reset_at", resetAt),
			Anchor:    r.required("quota_anchor", anchor),
		}
	case entitlement.TypeSubscription:
		e.Subscription = entitlement.Subscription{ValidFrom: instant(validFrom), ValidUntil: instantPtr(validUntil)}
	}
	e.Holds = r.openHolds(holds)
	r.controls(controls, &e)
	if r.err != nil {
		return entitlement.Entitlement{}, r.err
	}
	return e, nil
}

// openHolds decodes the holds column: every hold reserves a non-negative
// amount within money's range and has an ID and an expiry.
func (r *row) openHolds(raw []byte) []entitlement.OpenHold {
	var list []openHoldJSON
	if err := strictJSON(raw, &list); err != nil {
		r.corrupt("holds", "not an array of open holds: %v", err)
		return nil
	}
	if len(list) == 0 {
		return nil
	}
	out := make([]entitlement.OpenHold, len(list))
	for i, h := range list {
		if h.ID == "" || h.ExpiresAt.IsZero() || h.Amount < 0 || h.Amount > money.MaxCents {
			r.corrupt("holds", "element %d: %+v is not an open hold", i, h)
			return nil
		}
		out[i] = entitlement.OpenHold{ID: h.ID, Amount: h.Amount, ExpiresAt: h.ExpiresAt.UTC(), MemberID: h.MemberID}
	}
	return out
}

// holdsArg is e's open holds for the holds column (pgx encodes a jsonb
// parameter as its JSON, as it does metadata's map).
func holdsArg(e *entitlement.Entitlement) []openHoldJSON {
	list := make([]openHoldJSON, len(e.Holds))
	for i, h := range e.Holds {
		list[i] = openHoldJSON{ID: h.ID, Amount: h.Amount, ExpiresAt: stamp(h.ExpiresAt), MemberID: h.MemberID}
	}
	return list
}

// insertEntitlementSQL inserts one entitlement unless its ID exists.
const insertEntitlementSQL = `INSERT INTO entitlements (` + entitlementColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
	ON CONFLICT (id) DO NOTHING`

// entitlementArgs are the parameters of insertEntitlementSQL for e.
func entitlementArgs(e *entitlement.Entitlement) ([]any, error) {
	controls, err := controlsArg(e)
	if err != nil {
		return nil, err
	}
	tools := e.Scope.Tools
	if tools == nil {
		tools = []string{}
	}
	return []any{
		e.ID, e.AgentID, string(e.Type), e.Scope.Service, tools, string(e.Status), e.CreatedAt, nullTimePtr(e.ExpiresAt),
		nullTimePtr(e.RevokedAt), e.PaymentID, metadataOrEmpty(e.Metadata), e.Credits.Balance.Cents, e.Credits.Balance.Currency,
		e.Credits.Granted.Cents, e.Credits.Granted.Currency,
		e.Quota.Limit, string(e.Quota.Period), e.Quota.Remaining, nullTime(e.Quota.ResetAt), nullTime(e.Quota.Anchor),
		nullTime(e.Subscription.ValidFrom), nullTimePtr(e.Subscription.ValidUntil), holdsArg(e), controls,
	}, nil
}

// updateEntitlementSQL writes what transactions change on an entitlement:
// its balance or quota, its open holds, its status, and what an update may
// change (spend controls and alerts, metadata, expiry).
const updateEntitlementSQL = `UPDATE entitlements SET balance_cents = $2, quota_remaining = $3,
	quota_reset_at = $4, holds = $5, status = $6, revoked_at = $7, controls = $8, metadata = $9,
	expires_at = $10 WHERE id = $1`

// updateEntitlementArgs are the parameters of updateEntitlementSQL for e.
func updateEntitlementArgs(e *entitlement.Entitlement) ([]any, error) {
	controls, err := controlsArg(e)
	if err != nil {
		return nil, err
	}
	return []any{e.ID, e.Credits.Balance.Cents, e.Quota.Remaining, nullTime(e.Quota.ResetAt), holdsArg(e),
		string(e.Status), nullTimePtr(e.RevokedAt), controls, metadataOrEmpty(e.Metadata), nullTimePtr(e.ExpiresAt)}, nil
}

func metadataOrEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// sameState reports whether a and b, one entitlement before and after a
// change, hold the same mutable state (what updateEntitlementSQL writes).
func sameState(a, b *entitlement.Entitlement) bool {
	return a.Credits.Balance == b.Credits.Balance && a.Quota.Remaining == b.Quota.Remaining &&
		a.Quota.ResetAt.Equal(b.Quota.ResetAt) && a.Status == b.Status && slices.Equal(a.Holds, b.Holds) &&
		((a.RevokedAt == nil) == (b.RevokedAt == nil))
}
