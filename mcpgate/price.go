package mcpgate

import (
	"strconv"

	"github.com/stipend-mcp/stipend/money"
)

// Price is what one call of a tool costs. A zero Price is not free: it
// charges one unit of a quota or a subscription. Its JSON form is
// {"free":true} or {"cost":{"cents":5,"currency":"USD"},"units":1}.
type Price struct {
	// Free tools run without a call to Stipend.
	Free bool `json:"free,omitempty"`
	// Cost is charged to a credits entitlement; nil means credits cannot
	// pay for the tool.
	Cost *money.Money `json:"cost,omitempty"`
	// Units is charged to a quota entitlement; 0 means 1.
	Units int64 `json:"units,omitempty"`
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

// Policy says when the gate charges a priced call.
type Policy string

// PolicyBefore charges a call before its tool runs; the charge stands
// whatever the tool then does. It is the gate's only policy today.
const PolicyBefore Policy = "before"

// Terms is how a tool is charged, as the gate shows it to clients: in the
// tool's tools/list entry under MetaPrice and in refusals. Unlike a Price it
// spells out the units a quota pays, so a host can show the price as it is.
type Terms struct {
	// Free is true for a tool that is never charged; the other fields are
	// then empty.
	Free bool `json:"free,omitempty"`
	// Cost is what credits pay per call; nil if credits cannot pay.
	Cost *money.Money `json:"cost,omitempty"`
	// Units is what a quota pays per call (at least 1).
	Units int64 `json:"units,omitempty"`
	// Policy says when the call is charged.
	Policy Policy `json:"policy,omitempty"`
}

// Terms returns p as the gate shows it.
func (p Price) Terms() Terms {
	if p.Free {
		return Terms{Free: true}
	}
	t := Terms{Units: max(p.Units, 1), Policy: PolicyBefore}
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
