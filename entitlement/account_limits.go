package entitlement

import (
	"fmt"
	"slices"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// AccountLimits are the spend controls of a whole account: they bound every
// call of its agent, whichever entitlement would pay, before any is tried.
// They need no state, so checking them writes nothing: the charge path reads
// the account (never written by a charge) beside the key lookup.
type AccountLimits struct {
	// MaxPerCall is the most one call may cost, at most one amount per
	// currency; a call priced in another currency is not bounded by it.
	MaxPerCall []money.Money `json:"maxPerCall,omitempty"`
	// MaxUnitsPerCall is the most units one call may ask for.
	MaxUnitsPerCall *int64 `json:"maxUnitsPerCall,omitempty"`
}

// IsZero reports whether l bounds nothing.
func (l AccountLimits) IsZero() bool { return len(l.MaxPerCall) == 0 && l.MaxUnitsPerCall == nil }

// Check reports ReasonMaxPerCall when r asks for more than l allows one
// call (its cost in a capped currency, or its units), or "".
func (l *AccountLimits) Check(r *ConsumeRequest) Reason {
	if l.MaxUnitsPerCall != nil && units(r) > *l.MaxUnitsPerCall {
		return ReasonMaxPerCall
	}
	if r.Cost == nil {
		return ""
	}
	for _, m := range l.MaxPerCall {
		if m.Currency == r.Cost.Currency && r.Cost.Cents > m.Cents {
			return ReasonMaxPerCall
		}
	}
	return ""
}

// Validate checks l. Errors are *field.Error values naming its fields
// ("maxPerCall[1].currency").
func (l *AccountLimits) Validate() error {
	for i, m := range l.MaxPerCall {
		path := fmt.Sprintf("maxPerCall[%d]", i)
		if err := moneyField(path, m); err != nil {
			return err
		}
		if m.Cents < 1 {
			return &field.Error{Field: path + ".cents", Reason: "must be positive"}
		}
		if slices.IndexFunc(l.MaxPerCall[:i], func(o money.Money) bool { return o.Currency == m.Currency }) >= 0 {
			return &field.Error{Field: path + ".currency", Reason: "has an amount already: give one per currency"}
		}
	}
	if n := l.MaxUnitsPerCall; n != nil && (*n < 1 || *n > MaxUnits) {
		return &field.Error{Field: "maxUnitsPerCall", Reason: fmt.Sprintf("must be between 1 and %d", MaxUnits)}
	}
	return nil
}

// Clone returns a copy of l that shares nothing with it.
func (l AccountLimits) Clone() AccountLimits {
	return AccountLimits{MaxPerCall: slices.Clone(l.MaxPerCall), MaxUnitsPerCall: ClonePtr(l.MaxUnitsPerCall)}
}
