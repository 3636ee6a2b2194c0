package entitlement

import (
	"fmt"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// A wallet is an account that holds entitlements, as an agent's does, and
// never calls: its members (agents) spend from it. A member's call may be
// charged to the member's own entitlements and to those of each wallet it
// belongs to, in the order its Membership says, and each membership may cap
// what the member spends from the wallet per call and per period. The
// member's spend of the period is counted on the membership (one record per
// wallet × member), so a cap holds across all the wallet's entitlements.

// AccountKind says whether an account is an agent's or a wallet's.
type AccountKind string

// The account kinds. The zero kind is an agent's.
const (
	KindAgent  AccountKind = "agent"
	KindWallet AccountKind = "wallet"
)

// Valid reports whether k is a known kind (or the zero kind, an agent's).
func (k AccountKind) Valid() bool { return k == "" || k == KindAgent || k == KindWallet }

// IsWallet reports whether a is a wallet's account.
func (a *Account) IsWallet() bool { return a.Kind == KindWallet }

// ReasonMemberLimit: the caps of the caller's membership in the wallet that
// owns the entitlement refuse the call; the denial names the member and the
// limit (Denial.MemberID, Denial.Limit).
const ReasonMemberLimit Reason = "member_limit_reached"

// The limits of a member's caps a call may reach (Denial.Limit).
const (
	// LimitMaxPerCall: the call costs more than the caps' MaxPerCall.
	LimitMaxPerCall = "maxPerCall"
	// LimitMaxUnitsPerCall: the call uses more units than MaxUnitsPerCall.
	LimitMaxUnitsPerCall = "maxUnitsPerCall"
	// LimitSpend: the call would take the member's spend of the period,
	// with what its open holds reserve, above the period's most.
	LimitSpend = "spendLimit"
	// LimitCurrency: the caps bound money in another currency than the
	// call's.
	LimitCurrency = "currency"
)

// MemberDenial is the denial of a call that the caps of memberID refuse on
// the wallet's entitlement entitlementID, for limit.
func MemberDenial(entitlementID, memberID, limit string) Denial {
	return Denial{EntitlementID: entitlementID, Reason: ReasonMemberLimit, MemberID: memberID, Limit: limit}
}

// Order says where a member's wallet comes among the candidates of its calls.
type Order string

// The orders of a membership.
const (
	// OrderOwnFirst: the member's own entitlements are tried first, then the
	// wallet's (the default).
	OrderOwnFirst Order = "own_first"
	// OrderWalletFirst: the wallet's entitlements come before the member's own.
	OrderWalletFirst Order = "wallet_first"
)

// Valid reports whether o is a known order.
func (o Order) Valid() bool { return o == OrderOwnFirst || o == OrderWalletFirst }

// Membership is an agent's (MemberID) membership in a wallet (WalletID):
// where the wallet comes among its candidates, and its caps. Caps reuse
// Limits: MaxPerCall (money) and MaxUnitsPerCall bound one call, Spend the
// period (Max in money, MaxUnits in units, or both); Spend's Spent,
// SpentUnits, ResetAt and Anchor are the member's counters, which only the
// rules below change. Money caps bound credits charges (all in the caps'
// one currency), units caps quota charges; a subscription spends nothing.
type Membership struct {
	WalletID  string    `json:"walletId"`
	MemberID  string    `json:"memberId"`
	Order     Order     `json:"order"`
	Caps      Limits    `json:"caps,omitzero"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Holds are the member's open holds on the wallet's entitlements while
	// the caps have a period: what each reserves against it, until when.
	// An entry past its expiry stops counting at once, with no write, and
	// is pruned when the membership is next written (Refresh).
	Holds []MemberHold `json:"-"`
}

// MemberHold is what one open hold of a member reserves against its caps'
// period: Cents (credits, in the caps' currency) or Units (quota).
type MemberHold struct {
	ID           string
	Cents, Units int64
	ExpiresAt    time.Time
}

// Clone returns a copy of m that shares no slice or pointer with it.
func (m *Membership) Clone() Membership {
	c := *m
	c.Caps.MaxPerCall = ClonePtr(m.Caps.MaxPerCall)
	c.Caps.MaxUnitsPerCall = ClonePtr(m.Caps.MaxUnitsPerCall)
	c.Holds = slices.Clone(m.Holds)
	return c
}

// Start makes m, as an admin gives it (names, order, caps; the counters are
// ignored), a new membership at now: the default order, a period of the
// caps starting now, no holds. Errors are *field.Error values naming the
// JSON field (memberId, order, caps.spendLimit.max, …).
func (m *Membership) Start(now time.Time) error {
	if m.Order == "" {
		m.Order = OrderOwnFirst
	}
	m.Caps = (&Membership{}).capsAt(m.Caps, now)
	m.Holds = nil
	m.CreatedAt, m.UpdatedAt = now, now
	return m.Validate()
}

// Apply changes m's order and caps at now (nil: unchanged). Caps replace
// the old ones whole; the member's spend of the period is kept while the
// period (and the currency of its most) stays the same, and a new period
// starts at now otherwise. On error m is unchanged.
func (m *Membership) Apply(order *Order, caps *Limits, now time.Time) error {
	next := m.Clone()
	next.Refresh(now)
	if order != nil {
		next.Order = *order
	}
	if caps != nil {
		next.Caps = next.capsAt(*caps, now)
	}
	if err := next.Validate(); err != nil {
		return err
	}
	next.UpdatedAt = now
	*m = next
	return nil
}

// capsAt is want as it replaces m's caps at now (see Apply).
func (m *Membership) capsAt(want Limits, now time.Time) Limits {
	out := Limits{MaxPerCall: ClonePtr(want.MaxPerCall), MaxUnitsPerCall: ClonePtr(want.MaxUnitsPerCall)}
	out.Spend = m.Caps.Spend.replaced(want.Spend, now)
	if !out.Spend.Max.IsZero() {
		out.Spend.Spent.Currency = out.Spend.Max.Currency
	}
	return out
}

// Validate checks m's names, order and caps. Errors are *field.Error values
// naming the JSON field.
func (m *Membership) Validate() error {
	switch {
	case !ValidName(m.WalletID):
		return &field.Error{Field: "walletId", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", MaxNameLen)}
	case !ValidName(m.MemberID):
		return &field.Error{Field: "memberId", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", MaxNameLen)}
	case m.MemberID == m.WalletID:
		return &field.Error{Field: "memberId", Reason: "must not be the wallet itself"}
	case !m.Order.Valid():
		return &field.Error{Field: "order", Reason: "must be own_first or wallet_first"}
	}
	return field.Within("caps", validateCaps(&m.Caps))
}

// validateCaps checks a membership's caps. Errors name the field under caps.
func validateCaps(l *Limits) error {
	if l.MaxPerCall != nil {
		if err := positiveMoney("maxPerCall", *l.MaxPerCall); err != nil {
			return err
		}
	}
	if n := l.MaxUnitsPerCall; n != nil && (*n < 1 || *n > MaxUnits) {
		return &field.Error{Field: "maxUnitsPerCall", Reason: fmt.Sprintf("must be between 1 and %d", MaxUnits)}
	}
	s := &l.Spend
	if s.Period == "" {
		if !s.Max.IsZero() || s.MaxUnits != 0 {
			return &field.Error{Field: "spendLimit.period", Reason: "is required"}
		}
		return nil
	}
	if !s.Period.Valid() {
		return &field.Error{Field: "spendLimit.period", Reason: "must be hour, day, week or month"}
	}
	if s.Max.IsZero() && s.MaxUnits == 0 {
		return &field.Error{Field: "spendLimit.max", Reason: "is required: give max, maxUnits or both"}
	}
	if !s.Max.IsZero() {
		if err := positiveMoney("spendLimit.max", s.Max); err != nil {
			return err
		}
		if l.MaxPerCall != nil && l.MaxPerCall.Currency != s.Max.Currency {
			return &field.Error{Field: "spendLimit.max.currency", Reason: fmt.Sprintf("must be %s, the currency of maxPerCall: caps bound one currency", l.MaxPerCall.Currency)}
		}
	}
	if s.MaxUnits != 0 && (s.MaxUnits < 1 || s.MaxUnits > money.MaxCents) {
		return &field.Error{Field: "spendLimit.maxUnits", Reason: fmt.Sprintf("must be between 1 and %d", int64(money.MaxCents))}
	}
	if s.Spent.Cents < 0 || s.SpentUnits < 0 {
		return &field.Error{Field: "spendLimit.spent", Reason: "must not be negative"}
	}
	return nil
}

// positiveMoney checks that m is a valid amount of more than zero.
func positiveMoney(path string, m money.Money) error {
	if err := moneyField(path, m); err != nil {
		return err
	}
	if m.Cents < 1 {
		return &field.Error{Field: path + ".cents", Reason: "must be positive"}
	}
	return nil
}

// Refresh applies the lazy reset of the caps' period at now and prunes the
// holds past their expiry; it reports whether it changed anything (what a
// store writes back).
func (m *Membership) Refresh(now time.Time) bool {
	changed := m.Caps.Spend.refresh(now)
	n := len(m.Holds)
	m.Holds = slices.DeleteFunc(m.Holds, func(h MemberHold) bool { return !now.Before(h.ExpiresAt) })
	if len(m.Holds) == 0 {
		m.Holds = nil
	}
	return changed || len(m.Holds) != n
}

// currency is the currency the money caps bound; ok is false without any.
func (m *Membership) currency() (string, bool) {
	switch {
	case m.Caps.MaxPerCall != nil:
		return m.Caps.MaxPerCall.Currency, true
	case !m.Caps.Spend.Max.IsZero():
		return m.Caps.Spend.Max.Currency, true
	}
	return "", false
}

// counted is what a charge of cents in currency, or of units, to an
// entitlement of type t counts toward the caps' period: zero when the
// period does not bound it.
func (m *Membership) counted(t Type, cost money.Money, units int64) int64 {
	s := &m.Caps.Spend
	switch {
	case s.Period == "":
		return 0
	case t == TypeCredits && !s.Max.IsZero() && cost.Currency == s.Max.Currency:
		return cost.Cents
	case t == TypeQuota && s.MaxUnits > 0:
		return units
	}
	return 0
}

// Room is what the caps' period leaves for charges to an entitlement of
// type t at now (cents for credits, units for a quota): the most, less what
// was spent in the current period (nothing once it has ended) and what the
// unexpired holds reserve; it may be below zero. ok is false when the
// period does not bound t.
func (m *Membership) Room(now time.Time, t Type) (int64, bool) {
	s := &m.Caps.Spend
	var most int64
	switch {
	case s.Period == "":
		return 0, false
	case t == TypeCredits && !s.Max.IsZero():
		most = s.Max.Cents
	case t == TypeQuota && s.MaxUnits > 0:
		most = s.MaxUnits
	default:
		return 0, false
	}
	room := most - s.spentAt(now, t)
	for _, h := range m.Holds {
		switch {
		case !now.Before(h.ExpiresAt):
		case t == TypeCredits:
			room -= h.Cents
		default:
			room -= h.Units
		}
	}
	return room, true
}

// Check reports which limit of m's caps refuses r on the wallet's
// entitlement e at now (LimitMaxPerCall, LimitMaxUnitsPerCall, LimitSpend,
// LimitCurrency), or "". What the member's unexpired holds reserve counts
// against the period. A call the entitlement refuses on its own (a credits
// call with no cost) is left to the entitlement's check.
func (m *Membership) Check(now time.Time, e *Entitlement, r *ConsumeRequest) string {
	c := &m.Caps
	var n int64
	switch e.Type {
	case TypeCredits:
		cur, capped := m.currency()
		if r.Cost == nil || !capped {
			return ""
		}
		if r.Cost.Currency != cur {
			return LimitCurrency
		}
		if c.MaxPerCall != nil && r.Cost.Cents > c.MaxPerCall.Cents {
			return LimitMaxPerCall
		}
		n = r.Cost.Cents
	case TypeQuota:
		n = units(r)
		if c.MaxUnitsPerCall != nil && n > *c.MaxUnitsPerCall {
			return LimitMaxUnitsPerCall
		}
	default:
		return ""
	}
	if room, ok := m.Room(now, e.Type); ok && n > room {
		return LimitSpend
	}
	return ""
}

// Charge counts the consumption c (made on the wallet's entitlement e) toward
// the caps' period at now. changed says m must be written; reached that
// this charge took the period's spend to its most (in money or in units)
// from below it: the store raises wallet.member_limit_reached.
func (m *Membership) Charge(now time.Time, e *Entitlement, c *Consumption) (changed, reached bool) {
	changed = m.Refresh(now)
	n := m.counted(e.Type, c.Cost, c.Units)
	if n == 0 {
		return changed, false
	}
	s := &m.Caps.Spend
	before := s.spentAt(now, e.Type)
	s.add(e.Type, n)
	most := s.MaxUnits
	if e.Type == TypeCredits {
		most = s.Max.Cents
	}
	return true, before < most && s.spentAt(now, e.Type) >= most
}

// Hold records the open hold h (made on the wallet's entitlement e) against
// the caps' period at now, and reports whether m changed. A hold reserves
// nothing on the caps when their period does not bound e's type.
func (m *Membership) Hold(now time.Time, e *Entitlement, h *Hold) bool {
	changed := m.Refresh(now)
	n := m.counted(e.Type, h.MaxCost, h.MaxUnits)
	if n == 0 {
		return changed
	}
	mh := MemberHold{ID: h.ID, ExpiresAt: h.ExpiresAt}
	if e.Type == TypeCredits {
		mh.Cents = n
	} else {
		mh.Units = n
	}
	m.Holds = append(m.Holds, mh)
	return true
}

// EndHold ends the hold id on m at now (a capture, a release, an expiry or
// a revoke) and reports whether m changed: what it reserved no longer
// counts. A capture then counts what it charged (Charge).
func (m *Membership) EndHold(now time.Time, id string) bool {
	changed := m.Refresh(now)
	n := len(m.Holds)
	m.Holds = slices.DeleteFunc(m.Holds, func(h MemberHold) bool { return h.ID == id })
	if len(m.Holds) == 0 {
		m.Holds = nil
	}
	return changed || len(m.Holds) != n
}

// Refund gives ch, refunded of the consumption c on the wallet's
// entitlement e, back to the caps' period at now when c was charged in the
// current period (a refund never adds room to a later one), and reports
// whether m changed.
func (m *Membership) Refund(now time.Time, e *Entitlement, c *Consumption, ch Charge) bool {
	changed := m.Refresh(now)
	n := m.counted(e.Type, ch.Cost, ch.Units)
	if n == 0 || !m.Caps.Spend.inPeriod(c.OccurredAt) {
		return changed
	}
	m.Caps.Spend.add(e.Type, -n)
	return true
}

// walletOf is the wallet that pays when caller charges e: e's owner when
// caller is not the owner (a member of e's wallet), else "".
func (e *Entitlement) walletOf(caller string) string {
	if caller == e.AgentID {
		return ""
	}
	return e.AgentID
}

// MemberLimitReached is the data of a wallet.member_limit_reached event: the
// membership right after the charge that took its spend to the cap, and that
// charge's consumption.
type MemberLimitReached struct {
	Membership
	ConsumptionID string `json:"consumptionId"`
}
