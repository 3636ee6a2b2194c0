package mcpgate

import (
	"fmt"
	"strconv"

	"github.com/stipend-mcp/stipend/money"
)

// Price is what one call of a tool costs, and when it is charged. A zero
// Price is not free: it charges one unit of a quota or a subscription, on
// success. Under PolicyOnSuccess the price is the most a call may cost: a
// tool that knows its real cost only afterwards reports it with Charge, and
// is charged that (never more than the price). Its JSON form is
// {"free":true} or {"cost":{"cents":5,"currency":"USD"},"units":1,"policy":"before"}.
type Price struct {
	// Free tools run without a call to Stipend.
	Free bool `json:"free,omitempty"`
	// Cost is charged to a credits entitlement; nil means credits cannot
	// pay for the tool.
	Cost *money.Money `json:"cost,omitempty"`
	// Units is charged to a quota entitlement; 0 means 1.
	Units int64 `json:"units,omitempty"`
	// Policy says when the call is charged; "" means PolicyOnSuccess.
	Policy Policy `json:"policy,omitempty"`
}

// Free is the price of a tool that runs without being charged.
func Free() Price { return Price{Free: true} }

// Credits is a price of cents in currency, paid from credits (or with one
// quota unit, or covered by a subscription).
func Credits(cents int64, currency string) Price {
	return Price{Cost: &money.Money{Cents: cents, Currency: currency}}
}

// Units is a price of n quota units (or covered by a subscription).
func Units(n int64) Price { return Price{Units: n} }

// CreditsOrUnits is a price payable either way: cents from credits or n
// units from a quota.
func CreditsOrUnits(cents int64, currency string, n int64) Price {
	p := Credits(cents, currency)
	p.Units = n
	return p
}

// ChargedBefore returns p charged under PolicyBefore: for a tool whose
// effect cannot be undone, such as one that sends a message or places an
// order.
func (p Price) ChargedBefore() Price {
	p.Policy = PolicyBefore
	return p
}

// Policy says when the gate charges a priced call.
type Policy string

// The policies.
const (
	// PolicyOnSuccess (the default) reserves the price before the tool runs
	// (a hold) and charges it only when the tool returns a result that is
	// not isError; a failing, panicking or cancelled call is not charged.
	PolicyOnSuccess Policy = "on_success"
	// PolicyBefore charges a call before its tool runs; the charge stands
	// whatever the tool then does.
	PolicyBefore Policy = "before"
)

// policy returns p's policy, checked.
func (p Price) policy() (Policy, error) {
	switch p.Policy {
	case "", PolicyOnSuccess:
		return PolicyOnSuccess, nil
	case PolicyBefore:
		return PolicyBefore, nil
	}
	return "", fmt.Errorf("unknown policy %q (want %q or %q)", p.Policy, PolicyOnSuccess, PolicyBefore)
}

// Terms is how a tool is charged, as the gate shows it to clients: in the
// tool's tools/list entry under MetaPrice and in refusals. Unlike a Price it
// spells out the units a quota pays, so a host can show the price as it is.
type Terms struct {
	// Free is true for a tool that is never charged; the other fields are
	// then empty.
	Free bool `json:"free,omitempty"`
	// Cost is what credits pay per call (under PolicyOnSuccess: at most);
	// nil if credits cannot pay.
	Cost *money.Money `json:"cost,omitempty"`
	// Units is what a quota pays per call (at least 1; under
	// PolicyOnSuccess: at most).
	Units int64 `json:"units,omitempty"`
	// Policy says when the call is charged.
	Policy Policy `json:"policy,omitempty"`
}

// Terms returns p as the gate shows it.
func (p Price) Terms() Terms {
	if p.Free {
		return Terms{Free: true}
	}
	policy, err := p.policy()
	if err != nil {
		policy = p.Policy // New refuses it; shown as it is
	}
	t := Terms{Units: max(p.Units, 1), Policy: policy}
	if p.Cost != nil {
		c := *p.Cost
		t.Cost = &c
	}
	return t
}

// String describes p for people, such as "5 cents USD or 1 unit".
func (p Price) String() string { return p.Terms().String() }

// String describes t for people, such as "5 cents USD or 1 unit".
func (t Terms) String() string {
	switch {
	case t.Free:
		return "free"
	case t.Cost != nil:
		return cost(t.Cost) + " or " + units(t.Units)
	}
	return units(t.Units)
}

// cost says an amount in minor units, which is what Stipend counts in.
func cost(m *money.Money) string {
	return strconv.FormatInt(m.Cents, 10) + " cents " + m.Currency
}

func units(n int64) string {
	if n == 1 {
		return "1 unit"
	}
	return strconv.FormatInt(n, 10) + " units"
}
