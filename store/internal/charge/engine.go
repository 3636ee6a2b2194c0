package charge

import (
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// The charge engine: the one place where a consume, a hold, a capture, a
// release, a consumption refund and the expiry of holds are applied to an
// entitlement. Every store's transaction on an entitlement reads the
// entitlement and the records its calls name, applies each call in order
// with a Batch, and writes what the Batch changed: the entitlement (if
// Changed), the records it changed, the holds it ended by expiry and its
// events. The rules themselves (what a consume charges, what a hold
// reserves) are the entitlement package's; the engine decides replays,
// conflicts, ownership and the state machine of a hold.

// Record is what one (agent, idempotency key) names: a consumption (Cons),
// a hold (Hold), or a captured hold (both). The zero Record is an unused
// key.
type Record struct {
	Cons *entitlement.Consumption
	Hold *entitlement.Hold
}

// Unused reports whether the key names nothing yet.
func (r *Record) Unused() bool { return r.Cons == nil && r.Hold == nil }

// Used is what the key was used for, as ReplayOf and HoldReplayOf take it,
// with the hold shown as it is at now.
func (r *Record) Used(now time.Time) Used {
	var u Used
	if r.Cons != nil {
		u.Consumption = *r.Cons
	}
	if r.Hold != nil {
		u.Hold = *r.Hold
		u.Hold.Refresh(now)
	}
	return u
}

// Clone returns a copy of r that shares nothing with it.
func (r *Record) Clone() Record {
	var c Record
	if r.Cons != nil {
		cons := *r.Cons
		if cons.Refund != nil {
			ref := *cons.Refund
			cons.Refund = &ref
		}
		if cons.RemainingAfter != nil {
			n := *cons.RemainingAfter
			cons.RemainingAfter = &n
		}
		c.Cons = &cons
	}
	if r.Hold != nil {
		h := *r.Hold
		if h.EndedAt != nil {
			t := *h.EndedAt
			h.EndedAt = &t
		}
		if h.Captured != nil {
			ch := *h.Captured
			h.Captured = &ch
		}
		c.Hold = &h
	}
	return c
}

// Event is an outbox event a Batch raised, for the store to write in the
// same transaction.
type Event struct {
	Type    event.Type
	AgentID string
	Data    any
}

// Batch applies the calls of one transaction to one entitlement, in
// memory. Set Now (read after the transaction's reads: see the stores'
// clock), ID, and E and Found as read; call Start before the first call.
type Batch struct {
	Now   time.Time
	ID    string // the entitlement the calls name
	E     entitlement.Entitlement
	Found bool
	// Changed says E must be written.
	Changed bool
	// Events are the events the calls raised, in order.
	Events []Event
	// Consumption looks up a consumption by ID: the capture of a hold
	// captured before, when its Record carries no Cons (a store that keeps
	// holds and consumptions apart). Nil when Records carry it.
	Consumption func(id string) (entitlement.Consumption, error)
	// Members are the memberships in E's wallet of the calls' agents other
	// than E's owner, by member ID, as the store read them in the
	// transaction (locked where it locks): a consume or hold of an agent
	// with none is refused on E, its caps are checked and counted; a
	// capture, release or refund of a member's charge counts on its
	// membership if it is still there. The store sets it (nil: none) and
	// writes back those MembersChanged names.
	Members        map[string]*entitlement.Membership
	MembersChanged map[string]bool
}

// Start applies what every transaction on an entitlement does first: the
// lazy resets, and the end of the holds past their expiry, whose IDs it
// returns (the store marks them expired, EndExpired).
func (b *Batch) Start() (expired []string) {
	if !b.Found {
		return nil
	}
	b.Changed = b.E.Refresh(b.Now)
	expired = b.E.ExpireHolds(b.Now)
	b.Changed = b.Changed || len(expired) > 0
	return expired
}

// EndExpired marks the hold in r expired if Start ended it.
func EndExpired(r *Record, expired []string, now time.Time) bool {
	if r.Hold == nil {
		return false
	}
	for _, id := range expired {
		if id == r.Hold.ID {
			r.Hold.End(entitlement.HoldExpired, now)
			return true
		}
	}
	return false
}

// After is the entitlement as a call's answer shows it now.
func (b *Batch) After() entitlement.Entitlement {
	e := b.E.Clone()
	e.Refresh(b.Now)
	return e
}

// payer reports whether agentID may charge the entitlement: it exists and
// is agentID's own (m nil) or its wallet's, agentID being a member (m its
// membership).
func (b *Batch) payer(agentID string) (m *entitlement.Membership, ok bool) {
	if !b.Found {
		return nil, false
	}
	if b.E.AgentID == agentID {
		return nil, true
	}
	m = b.Members[agentID]
	return m, m != nil
}

// refuse answers why a member's call req may not charge the wallet's
// entitlement: the entitlement's own reason first, then the member's caps.
func (b *Batch) refuse(m *entitlement.Membership, req *entitlement.ConsumeRequest) []entitlement.Denial {
	if reason := b.E.Check(b.Now, req); reason != "" {
		return []entitlement.Denial{{EntitlementID: b.ID, Reason: reason}}
	}
	if limit := m.Check(b.Now, &b.E, req); limit != "" {
		return []entitlement.Denial{entitlement.MemberDenial(b.ID, m.MemberID, limit)}
	}
	return nil
}

// memberChanged records that a call changed m, for the store to write it.
func (b *Batch) memberChanged(m *entitlement.Membership, changed bool) {
	if !changed {
		return
	}
	if b.MembersChanged == nil {
		b.MembersChanged = map[string]bool{}
	}
	b.MembersChanged[m.MemberID] = true
}

// memberCharged counts the consumption c on m (nil: not a member's) and
// raises wallet.member_limit_reached when it took m's spend to its cap.
func (b *Batch) memberCharged(m *entitlement.Membership, c *entitlement.Consumption) {
	if m == nil {
		return
	}
	changed, events := MemberCharged(m, b.Now, &b.E, c)
	b.memberChanged(m, changed)
	b.Events = append(b.Events, events...)
}

// MemberCharged counts the consumption c of a member on the wallet's
// entitlement e on its membership m at now (Membership.Charge), and returns
// whether m changed and the wallet.member_limit_reached event when the
// charge took m's spend to its cap. A Batch applies it to every member's
// charge; a charge served elsewhere (a Firestore lease) applies it too.
func MemberCharged(m *entitlement.Membership, now time.Time, e *entitlement.Entitlement, c *entitlement.Consumption) (changed bool, events []Event) {
	changed, reached := m.Charge(now, e, c)
	if reached {
		events = []Event{{event.WalletMemberLimitReached, m.WalletID,
			&entitlement.MemberLimitReached{Membership: m.Clone(), ConsumptionID: c.ID}}}
	}
	return changed, events
}

// memberOf is the membership a record of agentID on the wallet's
// entitlement counts on: nil for a charge that was not a member's
// (walletID empty), or whose membership is gone.
func (b *Batch) memberOf(walletID, agentID string) *entitlement.Membership {
	if walletID == "" {
		return nil
	}
	return b.Members[agentID]
}

// Consume charges req to the entitlement under the key whose record is r
// (a replay or conflict if the key was used), storing the new consumption,
// with ID id, in r.
func (b *Batch) Consume(req *entitlement.ConsumeRequest, r *Record, id, fingerprint string) store.ConsumeResult {
	if !r.Unused() {
		return ReplayOf(r.Used(b.Now), req)
	}
	m, ok := b.payer(req.AgentID)
	if !ok {
		return DeniedBy(b.ID, entitlement.ReasonNotFound)
	}
	if m != nil {
		if d := b.refuse(m, req); d != nil {
			return Denied(d)
		}
	}
	cons, reason := b.E.Consume(b.Now, req, id, fingerprint)
	if reason != "" {
		return DeniedBy(b.ID, reason)
	}
	b.Changed = b.Changed || b.E.Type != entitlement.TypeSubscription
	b.memberCharged(m, &cons)
	r.Cons = &cons
	after := b.After()
	b.chargeEvents(&cons, after)
	return store.ConsumeResult{Outcome: store.Consumed, Consumption: cons, Entitlement: after}
}

// Authorize reserves req's maximum on the entitlement under the key whose
// record is r, storing the new hold, with ID id, in r.
func (b *Batch) Authorize(req *entitlement.HoldRequest, r *Record, id, fingerprint string) store.HoldResult {
	if !r.Unused() {
		return HoldReplayOf(r.Used(b.Now), req)
	}
	m, ok := b.payer(req.AgentID)
	if !ok {
		return HoldDeniedBy(b.ID, entitlement.ReasonNotFound)
	}
	if m != nil {
		if d := b.refuse(m, &req.ConsumeRequest); d != nil {
			return store.HoldResult{Outcome: store.Denied, Denials: d}
		}
	}
	h, reason := b.E.Authorize(b.Now, req, id, fingerprint)
	if reason != "" {
		return HoldDeniedBy(b.ID, reason)
	}
	b.Changed = true
	if m != nil {
		b.memberChanged(m, m.Hold(b.Now, &b.E, &h))
	}
	r.Hold = &h
	return store.HoldResult{Outcome: store.Held, Hold: h, Entitlement: b.After()}
}

// Capture charges amount (nil fields: the hold's maximum) to agentID's
// hold in r, storing the consumption, with ID consumptionID, in r. The
// error is the call's own (NotFound, Invalid, Conflict) or, Internal, data
// that disagree.
func (b *Batch) Capture(r *Record, holdID, agentID string, amount entitlement.Amount, consumptionID string) (store.HoldResult, error) {
	ch, done, err := SettleCapture(r, holdID, agentID, amount)
	if err != nil || done {
		if err == nil && r.Cons == nil {
			return b.capturedReplay(r)
		}
		return store.HoldResult{Outcome: store.Replay, Hold: holdOf(r), Consumption: consOf(r)}, err
	}
	h := r.Hold
	if !b.Found || h.EntitlementID != b.E.ID {
		return store.HoldResult{}, corrupt(h.ID, "open, but its entitlement is missing")
	}
	cons, ok := b.E.Capture(b.Now, h, ch, consumptionID)
	if !ok {
		// Open in its record but not on the entitlement (Start ended the
		// holds past their expiry, and EndExpired marked their records).
		return store.HoldResult{}, corrupt(h.ID, "open, but not on its entitlement")
	}
	b.Changed = true
	if m := b.memberOf(h.WalletID, h.AgentID); m != nil {
		b.memberChanged(m, m.EndHold(b.Now, h.ID))
		b.memberCharged(m, &cons)
	}
	r.Cons = &cons
	after := b.After()
	b.chargeEvents(&cons, after)
	return store.HoldResult{Outcome: store.Captured, Hold: *h, Entitlement: after, Consumption: cons}, nil
}

// capturedReplay answers a replayed capture whose record lacks the
// consumption, looking it up.
func (b *Batch) capturedReplay(r *Record) (store.HoldResult, error) {
	if b.Consumption == nil {
		return store.HoldResult{}, corrupt(r.Hold.ID, "captured, but its consumption is missing")
	}
	c, err := b.Consumption(r.Hold.ConsumptionID)
	if err != nil {
		return store.HoldResult{}, err
	}
	return store.HoldResult{Outcome: store.Replay, Hold: *r.Hold, Consumption: c}, nil
}

// SettleCapture resolves what a capture of amount by agentID of the hold in
// r charges, or answers it (done, or an error) when that needs no
// entitlement: the hold is unknown or another agent's, the amount is not
// covered, or the hold has ended (a replay if it was captured with the same
// charge, else a conflict). An ended hold never changes again, so the
// answer holds outside a transaction too.
func SettleCapture(r *Record, holdID, agentID string, amount entitlement.Amount) (ch entitlement.Charge, done bool, err error) {
	h := r.Hold
	if h == nil || h.AgentID != agentID {
		return ch, false, holdNotFound(holdID)
	}
	ch, err = h.Settle(amount)
	switch {
	case err != nil:
		return ch, false, store.Wrap(store.CodeInvalid, err, "capture hold %q", h.ID)
	case h.Status == entitlement.HoldOpen:
		return ch, false, nil
	case h.Status == entitlement.HoldCaptured && *h.Captured == ch:
		return ch, true, nil
	case h.Status == entitlement.HoldCaptured:
		return ch, false, store.Errorf(store.CodeConflict, "hold %q was captured with another amount", h.ID)
	case h.Status == entitlement.HoldExpired:
		return ch, false, store.Wrap(store.CodeConflict, entitlement.ErrHoldExpired, "hold %q", h.ID)
	}
	return ch, false, store.Errorf(store.CodeConflict, "hold %q was %s", h.ID, h.Status)
}

// Release returns all that agentID's hold in r reserved.
func (b *Batch) Release(r *Record, holdID, agentID string) (store.HoldResult, error) {
	if done, err := CheckRelease(r, holdID, agentID); err != nil || done {
		return store.HoldResult{Outcome: store.Replay, Hold: holdOf(r)}, err
	}
	h := r.Hold
	if !b.Found || h.EntitlementID != b.E.ID || !b.E.Release(b.Now, h) {
		return store.HoldResult{}, corrupt(h.ID, "open, but not on its entitlement")
	}
	b.Changed = true
	if m := b.memberOf(h.WalletID, h.AgentID); m != nil {
		b.memberChanged(m, m.EndHold(b.Now, h.ID))
	}
	return store.HoldResult{Outcome: store.Released, Hold: *h, Entitlement: b.After()}, nil
}

// CheckRelease answers a release by agentID of the hold in r when that
// needs no entitlement (as SettleCapture does): an unknown or other
// agent's hold (an error), a replay of a hold released or expired (done),
// a conflict for a captured one.
func CheckRelease(r *Record, holdID, agentID string) (done bool, err error) {
	h := r.Hold
	switch {
	case h == nil || h.AgentID != agentID:
		return false, holdNotFound(holdID)
	case h.Status == entitlement.HoldOpen:
		return false, nil
	case h.Status == entitlement.HoldCaptured:
		return false, store.Errorf(store.CodeConflict, "hold %q was captured", h.ID)
	}
	return true, nil
}

// Refund gives amount (nil fields: all that was charged) of the
// consumption in r back to the entitlement and raises consumption.refunded.
// fence, if set, runs once the refund is known to change something, and its
// error is the call's (store/fence.go).
func (b *Batch) Refund(r *Record, consumptionID string, amount entitlement.Amount, fence func() error) (store.RefundResult, error) {
	ch, err := CheckRefund(r, consumptionID, amount)
	if err != nil {
		return store.RefundResult{}, err
	}
	cons := *r.Cons
	if cons.Refund != nil {
		if cons.Refund.Charge != ch {
			return store.RefundResult{}, store.Wrap(store.CodeConflict, entitlement.ErrRefundRefused, "consumption %q was refunded with another amount", cons.ID)
		}
		return store.RefundResult{Consumption: cons, Entitlement: b.After(), Replayed: true}, nil
	}
	if !b.Found {
		return store.RefundResult{}, corrupt(cons.ID, "a consumption whose entitlement is missing")
	}
	// Refund changes nothing when it refuses, but for the lazy reset
	// Start has applied already; the copy keeps that from mattering.
	e := b.E.Clone()
	if err := e.Refund(b.Now, &cons, amount); err != nil {
		if errors.Is(err, entitlement.ErrRefundRefused) {
			return store.RefundResult{}, store.Wrap(store.CodeConflict, err, "refund consumption %q", cons.ID)
		}
		return store.RefundResult{}, store.Wrap(store.CodeInvalid, err, "refund consumption %q", cons.ID)
	}
	if fence != nil {
		if err := fence(); err != nil {
			return store.RefundResult{}, err
		}
	}
	b.E, b.Changed = e, true
	if m := b.memberOf(cons.WalletID, cons.AgentID); m != nil {
		b.memberChanged(m, m.Refund(b.Now, &b.E, &cons, cons.Refund.Charge))
	}
	r.Cons = &cons
	b.Events = append(b.Events, Event{event.ConsumptionRefunded, cons.AgentID, &cons})
	return store.RefundResult{Consumption: cons, Entitlement: b.After()}, nil
}

// CheckRefund resolves what a refund of amount of the consumption in r
// gives back, or refuses it whatever the entitlement's state: an unknown
// consumption, or an amount it does not cover.
func CheckRefund(r *Record, consumptionID string, amount entitlement.Amount) (entitlement.Charge, error) {
	if r.Cons == nil {
		return entitlement.Charge{}, store.Errorf(store.CodeNotFound, "consumption %q", consumptionID)
	}
	ch, err := r.Cons.RefundCharge(amount)
	if err != nil {
		return ch, store.Wrap(store.CodeInvalid, err, "refund consumption %q", r.Cons.ID)
	}
	return ch, nil
}

// chargeEvents raises the events of a charge: balance_low when it crossed
// an alert, depleted when it emptied the entitlement. after is taken by
// value: only a charge that raises an event puts a copy on the heap (the
// memory store's hot path allocates nothing here).
func (b *Batch) chargeEvents(c *entitlement.Consumption, after entitlement.Entitlement) {
	if !c.LowBalance && !c.Depleted() {
		return
	}
	shown := after // declared here, so that only this branch allocates it
	data := &shown
	if c.LowBalance {
		b.Events = append(b.Events, Event{event.EntitlementBalanceLow, after.AgentID, data})
	}
	if c.Depleted() {
		b.Events = append(b.Events, Event{event.EntitlementDepleted, after.AgentID, data})
	}
}

func holdOf(r *Record) entitlement.Hold {
	if r.Hold == nil {
		return entitlement.Hold{}
	}
	return *r.Hold
}

func consOf(r *Record) entitlement.Consumption {
	if r.Cons == nil {
		return entitlement.Consumption{}
	}
	return *r.Cons
}

func holdNotFound(id string) error { return store.Errorf(store.CodeNotFound, "hold %q", id) }

// corrupt is the error of a record and its entitlement that disagree.
func corrupt(id, what string) error {
	return store.Errorf(store.CodeInternal, "corrupt data: %s: %s", id, what)
}
