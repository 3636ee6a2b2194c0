package entitlement

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// Limits on a consume request.
const (
	MaxKeyLength = 255
	MaxNameLen   = 200 // service, tool and agent IDs
	MaxUnits     = 1_000_000
)

// ConsumeRequest asks to charge one tool call to an agent's entitlements.
type ConsumeRequest struct {
	AgentID        string
	Service        string
	Tool           string
	IdempotencyKey string
	// Cost is charged to a credits entitlement. Nil means the call carries no
	// price, and credits entitlements cannot pay for it.
	Cost *money.Money
	// Units is charged to a quota entitlement; 0 means 1.
	Units int64
	// EntitlementID, if set, names the one entitlement to charge; otherwise
	// candidates are chosen by SortCandidates.
	EntitlementID string
}

// Normalize fills defaults (Units 1) and validates r. Errors are *field.Error
// values naming the JSON field.
func (r *ConsumeRequest) Normalize() error {
	if r.Units == 0 {
		r.Units = 1
	}
	switch {
	case !ValidName(r.AgentID):
		return &field.Error{Field: "agentId", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", MaxNameLen)}
	case !ValidName(r.Service) || r.Service == AnyService:
		return &field.Error{Field: "service", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters and not %q", MaxNameLen, AnyService)}
	case !ValidName(r.Tool):
		return &field.Error{Field: "tool", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", MaxNameLen)}
	case !ValidIdempotencyKey(r.IdempotencyKey):
		return &field.Error{Field: "idempotencyKey", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", MaxKeyLength)}
	case r.Units < 1 || r.Units > MaxUnits:
		return &field.Error{Field: "units", Reason: fmt.Sprintf("must be between 1 and %d", MaxUnits)}
	case r.EntitlementID != "" && !ValidName(r.EntitlementID):
		return &field.Error{Field: "entitlementId", Reason: "must be an entitlement ID"}
	}
	if r.Cost != nil {
		if err := r.Cost.Validate(); err != nil {
			return field.Within("cost", err)
		}
		if r.Cost.Cents < 0 {
			return &field.Error{Field: "cost.cents", Reason: "must not be negative"}
		}
	}
	return nil
}

// ValidIdempotencyKey reports whether k is 1–255 printable ASCII characters.
func ValidIdempotencyKey(k string) bool { return printable(k, MaxKeyLength) }

// ValidName reports whether s is a valid agent, service, tool or entitlement
// ID: 1–MaxNameLen printable ASCII characters (spaces allowed).
func ValidName(s string) bool { return printable(s, MaxNameLen) }

func printable(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Fingerprint identifies the parameters of r: a replay of the same key with a
// different fingerprint is a conflict. It is the hex form of FingerprintSum.
func (r *ConsumeRequest) Fingerprint() string {
	sum := r.FingerprintSum()
	return hex.EncodeToString(sum[:])
}

// FingerprintSum is the SHA-256 of r's parameters (agent, service, tool,
// entitlement, units, cost); length-prefixed fields make it unambiguous.
func (r *ConsumeRequest) FingerprintSum() [sha256.Size]byte {
	// One stack buffer and one hash call: this runs on every consume.
	var buf [512]byte
	b := buf[:0]
	b = appendField(b, r.AgentID)
	b = appendField(b, r.Service)
	b = appendField(b, r.Tool)
	b = appendField(b, r.EntitlementID)
	var num [20]byte
	b = appendField(b, strconv.AppendInt(num[:0], units(r), 10))
	if r.Cost != nil {
		b = appendField(b, r.Cost.Currency)
		b = appendField(b, strconv.AppendInt(num[:0], r.Cost.Cents, 10))
	} else {
		b = appendField(b, "-")
	}
	return sha256.Sum256(b)
}

func appendField[T string | []byte](b []byte, s T) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// ConsumptionKey derives the storage key of an agent's consumption for an
// idempotency key: a key is unique per agent, so two agents sending the same
// key never meet. The result is a hex SHA-256, valid as a Firestore document ID
// whatever the key holds, and never reveals the key.
func ConsumptionKey(agentID, idempotencyKey string) string {
	var buf [512]byte
	b := appendField(buf[:0], agentID)
	b = append(b, idempotencyKey...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Reason says why an entitlement could not pay for a call.
type Reason string

// The denial reasons.
const (
	ReasonNotFound            Reason = "not_found"
	ReasonRevoked             Reason = "revoked"
	ReasonExpired             Reason = "expired"
	ReasonScopeMismatch       Reason = "scope_mismatch"
	ReasonCurrencyMismatch    Reason = "currency_mismatch"
	ReasonInsufficientBalance Reason = "insufficient_balance"
	ReasonQuotaExhausted      Reason = "quota_exhausted"
	// ReasonMaxPerCall and ReasonSpendLimit are in limits.go.
	// ReasonCostRequired: a credits entitlement cannot pay for a call that
	// carries no cost.
	ReasonCostRequired Reason = "cost_required"
)

// Denial is one entitlement's reason for refusing a call. EntitlementID is
// empty when the agent had no entitlement at all.
type Denial struct {
	EntitlementID string `json:"entitlementId,omitempty"`
	Reason        Reason `json:"reason"`
	// MemberID and Limit say, for ReasonMemberLimit, which member's cap on
	// the wallet refused the call and which of its limits (LimitSpend, …).
	MemberID string `json:"memberId,omitempty"`
	Limit    string `json:"limit,omitempty"`
}

// Consumption records one charged tool call.
type Consumption struct {
	ID              string `json:"id"`
	AgentID         string `json:"agentId"`
	EntitlementID   string `json:"entitlementId"`
	EntitlementType Type   `json:"entitlementType"`
	// WalletID names the wallet whose entitlement paid, when AgentID (the
	// caller) charged it as a member; empty for a charge to the caller's own.
	WalletID       string      `json:"walletId,omitempty"`
	Service        string      `json:"service"`
	Tool           string      `json:"tool"`
	IdempotencyKey string      `json:"idempotencyKey"`
	Cost           money.Money `json:"cost,omitzero"`
	Units          int64       `json:"units"`
	OccurredAt     time.Time   `json:"occurredAt"`
	// BalanceAfter (credits) and RemainingAfter (quota) are the entitlement's
	// state right after this call.
	BalanceAfter   money.Money `json:"balanceAfter,omitzero"`
	RemainingAfter *int64      `json:"remainingAfter,omitempty"`
	// HoldID names the hold whose capture made this consumption; empty for
	// a one-step consume.
	HoldID string `json:"holdId,omitempty"`
	// Refund is set once the consumption has been refunded (RefundConsumption).
	Refund *Refund `json:"refund,omitempty"`
	// LowBalance is true on the charge that crossed one or more armed
	// low-balance alerts of its entitlement (alerts.go): the store writes an
	// entitlement.balance_low event in the same transaction. It is not
	// stored.
	LowBalance bool `json:"-"`
	// Fingerprint is the request's Fingerprint, for the replay check; it is
	// never shown. Consumptions read back from a store carry it; the result
	// of a fresh charge may leave it empty.
	Fingerprint string `json:"-"`
}

// Refresh applies the lazy quota reset at now: once now ≥ ResetAt, Remaining
// becomes Limit and ResetAt the first boundary after now. The spend limit's
// period resets the same way, and alerts that the balance is above again
// are armed again. It reports whether anything changed. It also sets Credits.Held or Quota.Held to what the open
// holds not yet expired at now reserve (a view of Holds that is never stored
// on its own, so it is not counted as a change).
func (e *Entitlement) Refresh(now time.Time) bool {
	e.tally(now)
	changed := e.refreshSpend(now)
	if e.Type == TypeQuota && !now.Before(e.Quota.ResetAt) {
		e.Quota.Remaining = e.Quota.Limit
		e.Quota.ResetAt = e.Quota.Period.NextBoundary(e.Quota.Anchor, now)
		changed = true
	}
	if len(e.Alerts) > 0 {
		_, rearmed := e.settleAlerts(now, false)
		changed = changed || rearmed
	}
	return changed
}

// Check reports why e cannot pay for r at now, or "" if it can. Only what is
// free counts: the balance (or remaining quota) less what open holds and
// leases reserve (Free). It applies the lazy quota reset to e first, so a
// caller about to write e writes the reset too. The spend controls come
// last (limits.go): a call above the most per call, or one that would take
// the period's spend (with what holds reserve) above its limit, is refused.
func (e *Entitlement) Check(now time.Time, r *ConsumeRequest) Reason {
	switch {
	case e.Status == StatusRevoked:
		return ReasonRevoked
	case e.Expired(now):
		return ReasonExpired
	case !e.Scope.Covers(r.Service, r.Tool):
		return ReasonScopeMismatch
	}
	switch e.Type {
	case TypeCredits:
		if r.Cost == nil {
			return ReasonCostRequired
		}
		if r.Cost.Currency != e.Credits.Balance.Currency {
			return ReasonCurrencyMismatch
		}
		if e.Free() < r.Cost.Cents {
			return ReasonInsufficientBalance
		}
	case TypeQuota:
		e.Refresh(now)
		if e.Free() < units(r) {
			return ReasonQuotaExhausted
		}
	}
	if e.Limits.IsZero() {
		return ""
	}
	e.refreshSpend(now)
	return e.checkLimits(now, r)
}

// Consume charges r to e at now: it checks (applying the lazy reset), debits
// the balance or quota, and returns the consumption to store with id as its ID
// and fingerprint as its Fingerprint (r.Fingerprint(), which callers compute
// once per request). On denial e is unchanged but for a lazy reset, and the reason is returned.
func (e *Entitlement) Consume(now time.Time, r *ConsumeRequest, id, fingerprint string) (Consumption, Reason) {
	if reason := e.Check(now, r); reason != "" {
		return Consumption{}, reason
	}
	c := e.consumption(now, r, id, fingerprint)
	switch e.Type {
	case TypeCredits:
		e.Credits.Balance.Cents -= r.Cost.Cents // Check proved it stays ≥ 0
		c.Cost = *r.Cost
		c.BalanceAfter = e.Credits.Balance
	case TypeQuota:
		e.Quota.Remaining -= c.Units
		rem := e.Quota.Remaining
		c.RemainingAfter = &rem
	}
	c.LowBalance = e.spent(now, e.reserve(r))
	return c, ""
}

// consumption is the record of r charged to e at now, before its cost and
// what is left after it are filled in.
func (e *Entitlement) consumption(now time.Time, r *ConsumeRequest, id, fingerprint string) Consumption {
	return Consumption{
		ID:              id,
		AgentID:         r.AgentID,
		EntitlementID:   e.ID,
		EntitlementType: e.Type,
		WalletID:        e.walletOf(r.AgentID),
		Service:         r.Service,
		Tool:            r.Tool,
		IdempotencyKey:  r.IdempotencyKey,
		Units:           units(r),
		OccurredAt:      now,
		Fingerprint:     fingerprint,
	}
}

// spent records a charge of n (in e's terms) made at now: it counts toward
// the period's spend and may cross alerts, which it reports. The caller has
// applied the lazy resets.
func (e *Entitlement) spent(now time.Time, n int64) (crossed bool) {
	e.addSpend(n)
	if len(e.Alerts) == 0 {
		return false
	}
	crossed, _ = e.settleAlerts(now, true)
	return crossed
}

func units(r *ConsumeRequest) int64 {
	if r.Units == 0 {
		return 1
	}
	return r.Units
}

// Depleted reports whether this charge emptied its entitlement: a credits
// charge of more than zero that left the balance at zero, or a quota charge
// that used the last unit. Stores write an entitlement.depleted event in the
// same transaction as such a charge.
func (c *Consumption) Depleted() bool {
	switch c.EntitlementType {
	case TypeCredits:
		return c.Cost.Cents > 0 && c.BalanceAfter.Cents == 0
	case TypeQuota:
		return c.RemainingAfter != nil && *c.RemainingAfter == 0
	}
	return false
}
