package entitlement

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// A hold is the first half of a two-step charge: Authorize reserves up to a
// maximum on the entitlement a consume would choose, and the hold then ends
// exactly once, by capture (charge the actual amount, ≤ the hold, and return
// the rest), release (return it all) or expiry (released when its time is
// up). While it is open, what it reserves is not available to any other call.

// Limits on holds.
const (
	// DefaultHoldTTL is how long a hold lasts when the request names no TTL.
	DefaultHoldTTL = 5 * time.Minute
	// MaxHoldTTL is the longest a hold may last.
	MaxHoldTTL = 24 * time.Hour
	// MaxOpenHolds bounds the open holds of one entitlement. They are kept
	// with the entitlement (on Firestore, in its document), and a revoke ends
	// them all in one transaction, which takes at most 500 writes there.
	MaxOpenHolds = 256
)

// ReasonTooManyHolds: the entitlement already has MaxOpenHolds open holds.
const ReasonTooManyHolds Reason = "too_many_holds"

// HoldStatus is where a hold is in its life.
type HoldStatus string

// The hold statuses. A hold is HoldOpen until it ends in exactly one of the
// others, for good.
const (
	HoldOpen     HoldStatus = "held"
	HoldCaptured HoldStatus = "captured"
	HoldReleased HoldStatus = "released"
	HoldExpired  HoldStatus = "expired"
)

// ErrHoldExpired is wrapped by the conflict a store answers when a hold is
// captured after its expiry.
var ErrHoldExpired = errors.New("the hold has expired")

// OpenHold is an entitlement's record of one open hold: what it reserves
// (cents for credits, units for quota, nothing for a subscription) and until
// when.
type OpenHold struct {
	ID        string
	Amount    int64
	ExpiresAt time.Time
	// MemberID names the member whose hold it is when e is a wallet's
	// (Hold.WalletID set), so that a revoke can end the hold on the
	// member's caps too (Membership.EndHold); empty otherwise.
	MemberID string
}

// HoldRequest asks to reserve the most a tool call may cost. In the embedded
// ConsumeRequest, Cost is the most the call may cost (credits) and Units the
// most units it may use (quota); both are chosen and checked exactly as a
// consume's.
type HoldRequest struct {
	ConsumeRequest
	// TTL is how long the hold lasts before it is released by itself; 0
	// means DefaultHoldTTL.
	TTL time.Duration
}

// Normalize fills defaults (Units 1, TTL DefaultHoldTTL) and validates r.
// Errors are *field.Error values naming the JSON field.
func (r *HoldRequest) Normalize() error {
	if err := r.ConsumeRequest.Normalize(); err != nil {
		var fe *field.Error
		if errors.As(err, &fe) {
			if name, ok := holdFields[fe.Field]; ok {
				fe.Field = name
			}
		}
		return err
	}
	if r.TTL == 0 {
		r.TTL = DefaultHoldTTL
	}
	if r.TTL < time.Second || r.TTL > MaxHoldTTL {
		return &field.Error{Field: "ttlSeconds", Reason: fmt.Sprintf("must be between 1 and %d", int64(MaxHoldTTL/time.Second))}
	}
	return nil
}

// holdFields names a hold request's fields where they differ from a consume's.
var holdFields = map[string]string{
	"cost": "maxCost", "cost.cents": "maxCost.cents", "cost.currency": "maxCost.currency", "units": "maxUnits",
}

// Fingerprint identifies the parameters of r. It can never equal a
// ConsumeRequest's, so a key used for a consume and then for a hold (or the
// other way round) is a conflict.
func (r *HoldRequest) Fingerprint() string {
	inner := r.ConsumeRequest.FingerprintSum()
	var buf [128]byte
	b := appendField(buf[:0], "hold")
	b = appendField(b, inner[:])
	var num [20]byte
	b = appendField(b, strconv.AppendInt(num[:0], int64(r.TTL), 10))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Hold is one reservation on an entitlement and, once it has ended, how.
type Hold struct {
	ID              string `json:"id"`
	AgentID         string `json:"agentId"`
	EntitlementID   string `json:"entitlementId"`
	EntitlementType Type   `json:"entitlementType"`
	// WalletID names the wallet whose entitlement the hold is on, when
	// AgentID (the caller) holds it as a member; empty otherwise.
	WalletID       string     `json:"walletId,omitempty"`
	Service        string     `json:"service"`
	Tool           string     `json:"tool"`
	IdempotencyKey string     `json:"idempotencyKey"`
	Status         HoldStatus `json:"status"`
	// MaxCost is the most the call may cost (set when the request carried
	// a cost); MaxUnits the most units. On a credits entitlement MaxCost is
	// reserved, on a quota MaxUnits; a subscription reserves nothing.
	MaxCost   money.Money `json:"maxCost,omitzero"`
	MaxUnits  int64       `json:"maxUnits"`
	CreatedAt time.Time   `json:"createdAt"`
	ExpiresAt time.Time   `json:"expiresAt"`
	// EndedAt is when the hold was captured, released or expired.
	EndedAt *time.Time `json:"endedAt,omitempty"`
	// Captured is what the capture charged; ConsumptionID the consumption it
	// made.
	Captured      *Charge `json:"captured,omitempty"`
	ConsumptionID string  `json:"consumptionId,omitempty"`
	// Fingerprint is the HoldRequest's Fingerprint, for the replay check;
	// it is never shown.
	Fingerprint string `json:"-"`
}

// Charge is an amount charged or given back: Cost for credits (zero
// otherwise), Units always.
type Charge struct {
	Cost  money.Money `json:"cost,omitzero"`
	Units int64       `json:"units"`
}

// Amount is what a capture charges or a refund gives back. A nil field
// means "all of it": the hold's maximum for a capture, what was charged for a
// refund.
type Amount struct {
	Cost  *money.Money
	Units *int64
}

// Refund records what a refund gave back to a consumption's entitlement.
type Refund struct {
	Charge
	RefundedAt time.Time `json:"refundedAt"`
}

// ExpiredAt reports whether h is past its expiry at now (an expiry exactly
// at now counts as passed), whatever its recorded status.
func (h *Hold) ExpiredAt(now time.Time) bool { return !now.Before(h.ExpiresAt) }

// Settle resolves what a capture of h with a charges, checked against the
// hold: the currency must be the hold's, and neither cents nor units may be
// negative or above the hold's maximum. Errors are *field.Error values naming
// the JSON field (cost.cents, cost.currency, units).
func (h *Hold) Settle(a Amount) (Charge, error) {
	return settle(Charge{Cost: h.MaxCost, Units: h.MaxUnits}, a, "the hold")
}

// settle checks a against the most it may be (max) and fills what a leaves out.
func settle(max Charge, a Amount, what string) (Charge, error) {
	out := max
	if a.Cost != nil {
		if err := moneyField("cost", *a.Cost); err != nil {
			return Charge{}, err
		}
		switch {
		case max.Cost.Currency == "":
			return Charge{}, &field.Error{Field: "cost", Reason: what + " carries no cost"}
		case a.Cost.Currency != max.Cost.Currency:
			return Charge{}, &field.Error{Field: "cost.currency", Reason: fmt.Sprintf("must be %s, the currency of %s", max.Cost.Currency, what)}
		case a.Cost.Cents < 0:
			return Charge{}, &field.Error{Field: "cost.cents", Reason: "must not be negative"}
		case a.Cost.Cents > max.Cost.Cents:
			return Charge{}, &field.Error{Field: "cost.cents", Reason: fmt.Sprintf("must be at most %d, the amount of %s", max.Cost.Cents, what)}
		}
		out.Cost = *a.Cost
	}
	if a.Units != nil {
		switch {
		case *a.Units < 0:
			return Charge{}, &field.Error{Field: "units", Reason: "must not be negative"}
		case *a.Units > max.Units:
			return Charge{}, &field.Error{Field: "units", Reason: fmt.Sprintf("must be at most %d, the units of %s", max.Units, what)}
		}
		out.Units = *a.Units
	}
	return out, nil
}

// reserve is what a hold for r reserves on e.
func (e *Entitlement) reserve(r *ConsumeRequest) int64 {
	switch e.Type {
	case TypeCredits:
		return r.Cost.Cents
	case TypeQuota:
		return units(r)
	}
	return 0
}

// held is what e's open holds reserve. Every hold on e counts until a
// transaction removes it (ExpireHolds, Capture, Release, ReleaseAll), also
// one past its expiry: so a clock that runs ahead on one instance can end a
// hold early, but never free its reservation while another instance can
// still capture it.
func (e *Entitlement) held() int64 {
	var n int64
	for i := range e.Holds {
		n += e.Holds[i].Amount
	}
	return n
}

// heldAt is what e's holds not yet expired at now reserve: what a read
// shows, as if the expired ones had been released already (the next
// transaction on e does release them).
func (e *Entitlement) heldAt(now time.Time) int64 {
	var n int64
	for i := range e.Holds {
		if now.Before(e.Holds[i].ExpiresAt) {
			n += e.Holds[i].Amount
		}
	}
	return n
}

// tally sets the Held view of e at now. Nothing held is the zero value, as
// on an entitlement no rule has refreshed (Credits.MarshalJSON shows its
// currency), so one state has one value.
func (e *Entitlement) tally(now time.Time) {
	held := e.heldAt(now)
	switch e.Type {
	case TypeCredits:
		e.Credits.Held = money.Money{}
		if held != 0 {
			e.Credits.Held = money.Money{Cents: held, Currency: e.Credits.Balance.Currency}
		}
	case TypeQuota:
		e.Quota.Held = held
	}
}

// openHold returns the index of hold id in e.Holds, or -1.
func (e *Entitlement) openHold(id string) int {
	return slices.IndexFunc(e.Holds, func(o OpenHold) bool { return o.ID == id })
}

// Authorize reserves r on e at now: it checks exactly as Consume does (what
// is available, after the lazy reset), records the open hold on e and
// returns the hold to store with id as its ID and fingerprint as its
// Fingerprint (r.Fingerprint()). Callers end e's expired holds first
// (ExpireHolds), so they do not count against MaxOpenHolds. On denial e is
// unchanged but for a lazy reset, and the reason is returned.
func (e *Entitlement) Authorize(now time.Time, r *HoldRequest, id, fingerprint string) (Hold, Reason) {
	if reason := e.Check(now, &r.ConsumeRequest); reason != "" {
		return Hold{}, reason
	}
	if len(e.Holds) >= MaxOpenHolds {
		return Hold{}, ReasonTooManyHolds
	}
	h := Hold{
		ID:              id,
		AgentID:         r.AgentID,
		EntitlementID:   e.ID,
		EntitlementType: e.Type,
		WalletID:        e.walletOf(r.AgentID),
		Service:         r.Service,
		Tool:            r.Tool,
		IdempotencyKey:  r.IdempotencyKey,
		Status:          HoldOpen,
		MaxUnits:        units(&r.ConsumeRequest),
		CreatedAt:       now,
		ExpiresAt:       now.Add(r.TTL),
		Fingerprint:     fingerprint,
	}
	if r.Cost != nil {
		h.MaxCost = *r.Cost
	}
	o := OpenHold{ID: id, Amount: e.reserve(&r.ConsumeRequest), ExpiresAt: h.ExpiresAt}
	if h.WalletID != "" {
		o.MemberID = r.AgentID
	}
	e.Holds = append(e.Holds, o)
	e.tally(now)
	return h, ""
}

// Capture ends the open hold h on e at now by charging ch (from h.Settle):
// the hold's reservation is returned, ch is debited, and the consumption to
// store is returned with consumptionID as its ID. It reports false, changing
// nothing, when h is not open on e (already ended, or past its expiry: a
// capture then is refused and the hold expires instead).
func (e *Entitlement) Capture(now time.Time, h *Hold, ch Charge, consumptionID string) (Consumption, bool) {
	i := e.openHold(h.ID)
	if i < 0 || h.ExpiredAt(now) {
		return Consumption{}, false
	}
	e.Holds = slices.Delete(e.Holds, i, i+1)
	e.Refresh(now)
	c := Consumption{
		ID:              consumptionID,
		AgentID:         h.AgentID,
		EntitlementID:   e.ID,
		EntitlementType: e.Type,
		WalletID:        h.WalletID,
		Service:         h.Service,
		Tool:            h.Tool,
		IdempotencyKey:  h.IdempotencyKey,
		Units:           ch.Units,
		OccurredAt:      now,
		HoldID:          h.ID,
		Fingerprint:     h.Fingerprint,
	}
	// The reservation covered ch (Settle bounds it by the hold), and what
	// a hold reserves stays in the balance or quota until it ends, so the
	// debit never goes below zero, across a quota reset too.
	switch e.Type {
	case TypeCredits:
		e.Credits.Balance.Cents -= ch.Cost.Cents
		c.Cost = ch.Cost
		c.BalanceAfter = e.Credits.Balance
	case TypeQuota:
		e.Quota.Remaining -= ch.Units
		rem := e.Quota.Remaining
		c.RemainingAfter = &rem
	}
	var n int64
	switch e.Type {
	case TypeCredits:
		n = ch.Cost.Cents
	case TypeQuota:
		n = ch.Units
	}
	c.LowBalance = e.spent(now, n)
	h.end(HoldCaptured, now)
	h.Captured, h.ConsumptionID = &ch, consumptionID
	return c, true
}

// Release ends the open hold h on e at now and returns what it reserved. It
// reports false, changing nothing, when h is not open on e.
func (e *Entitlement) Release(now time.Time, h *Hold) bool {
	i := e.openHold(h.ID)
	if i < 0 {
		return false
	}
	e.Holds = slices.Delete(e.Holds, i, i+1)
	e.tally(now)
	h.end(HoldReleased, now)
	return true
}

// ExpireHolds removes from e the open holds past their expiry at now and
// returns their IDs; a store writing e back marks each of those holds
// expired in the same transaction (EndExpired). It is how an expired hold
// is released exactly once.
func (e *Entitlement) ExpireHolds(now time.Time) []string {
	var ids []string
	e.Holds = slices.DeleteFunc(e.Holds, func(o OpenHold) bool {
		if now.Before(o.ExpiresAt) {
			return false
		}
		ids = append(ids, o.ID)
		return true
	})
	e.tally(now)
	return ids
}

// ReleaseAll removes every open hold from e (a revoke returns what they
// reserved) and returns their IDs, which the store marks released.
func (e *Entitlement) ReleaseAll(now time.Time) []string {
	ids := make([]string, len(e.Holds))
	for i := range e.Holds {
		ids[i] = e.Holds[i].ID
	}
	e.Holds = nil
	e.tally(now)
	return ids
}

// End records that the open hold h ended in status at now: how a store marks
// the holds ExpireHolds or ReleaseAll removed. A hold that has ended keeps
// its first ending.
func (h *Hold) End(status HoldStatus, now time.Time) { h.end(status, now) }

func (h *Hold) end(status HoldStatus, now time.Time) {
	if h.Status != HoldOpen {
		return
	}
	if status == HoldExpired {
		now = h.ExpiresAt // it ended when its time was up, whenever that is recorded
	}
	h.Status, h.EndedAt = status, &now
}

// Refresh shows h as it is at now: an open hold past its expiry is shown
// expired, as the next transaction on its entitlement will record it.
func (h *Hold) Refresh(now time.Time) {
	if h.Status == HoldOpen && h.ExpiredAt(now) {
		h.end(HoldExpired, now)
	}
}

// ErrRefundRefused is wrapped by the errors Refund returns when the
// entitlement's state refuses a refund (a conflict, not bad input).
var ErrRefundRefused = errors.New("refund refused")

// RefundCharge is what a refund of a (nil fields: all that was charged)
// gives back for c: the cost of a credits consumption, the units of any
// other. Errors are *field.Error values (more than was charged, a wrong
// currency, a negative amount, or nothing at all). A store compares it with
// c.Refund to tell a replayed refund from a conflicting one.
func (c *Consumption) RefundCharge(a Amount) (Charge, error) {
	ch, err := settle(Charge{Cost: c.Cost, Units: c.Units}, a, "the consumption")
	if err != nil {
		return Charge{}, err
	}
	switch c.EntitlementType {
	case TypeCredits:
		if ch.Cost.Cents == 0 {
			return Charge{}, &field.Error{Field: "cost.cents", Reason: "must be more than zero"}
		}
		ch.Units = 0
	default:
		if ch.Units == 0 {
			return Charge{}, &field.Error{Field: "units", Reason: "must be more than zero"}
		}
		ch.Cost = money.Money{}
	}
	return ch, nil
}

// Refund gives a (from Amount; nil fields: all that was charged) of the
// consumption c back to e at now and marks c refunded. A consumption is
// refunded at most once. What it gives back no longer counts toward the
// spend limit if c was charged in the limit's current period (a refund
// never adds room to a later period), and alerts the balance is above
// again are armed again. Errors: a *field.Error from RefundCharge, checked
// first, or an error wrapping ErrRefundRefused (c already refunded, e
// revoked, or a quota consumption of an earlier period: its units are not
// given back into another period).
func (e *Entitlement) Refund(now time.Time, c *Consumption, a Amount) error {
	ch, err := c.RefundCharge(a)
	if err != nil {
		return err
	}
	if c.Refund != nil {
		return fmt.Errorf("%w: the consumption was already refunded", ErrRefundRefused)
	}
	e.Refresh(now)
	switch {
	case e.ID != c.EntitlementID:
		return fmt.Errorf("%w: the consumption belongs to another entitlement", ErrRefundRefused)
	case e.Status == StatusRevoked:
		return fmt.Errorf("%w: entitlement %s is revoked", ErrRefundRefused, e.ID)
	}
	var n int64
	switch e.Type {
	case TypeCredits:
		e.Credits.Balance.Cents += ch.Cost.Cents
		n = ch.Cost.Cents
	case TypeQuota:
		if !e.Quota.Period.NextBoundary(e.Quota.Anchor, c.OccurredAt).Equal(e.Quota.ResetAt) {
			return fmt.Errorf("%w: the consumption is from an earlier quota period", ErrRefundRefused)
		}
		e.Quota.Remaining = min(e.Quota.Remaining+ch.Units, e.Quota.Limit)
		n = ch.Units
	}
	if e.inSpendPeriod(c.OccurredAt) {
		e.addSpend(-n) // a refund gives back to the period it was charged in, never to a later one
	}
	e.settleAlerts(now, false)
	e.tally(now)
	c.Refund = &Refund{Charge: ch, RefundedAt: now}
	return nil
}
