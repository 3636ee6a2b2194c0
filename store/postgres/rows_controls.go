package postgres

import (
	"github.com/stipend-mcp/stipend/entitlement"
)

// controlsJSON is the controls column: an entitlement's spend controls and
// low-balance alerts, in the shape the API shows them.
type controlsJSON struct {
	Limits entitlement.Limits  `json:"limits,omitzero"`
	Alerts []entitlement.Alert `json:"alerts,omitempty"`
}

// controlsArg encodes e's spend controls and alerts for the controls column.
// An entitlement without either (most) is "{}" both ways, without the
// JSON codec, which cost a charge's read and write several microseconds.
func controlsArg(e *entitlement.Entitlement) ([]byte, error) {
	if e.Limits.IsZero() && len(e.Alerts) == 0 {
		return []byte(noControls), nil // what jsonArg writes: Limits is omitzero
	}
	return jsonArg(controlsJSON{Limits: e.Limits, Alerts: e.Alerts})
}

const noControls = "{}"

// controls decodes the controls column into e strictly.
func (r *row) controls(raw []byte, e *entitlement.Entitlement) {
	if string(raw) == noControls {
		e.Limits, e.Alerts = entitlement.Limits{}, nil
		return
	}
	var c controlsJSON
	if err := strictJSON(raw, &c); err != nil {
		r.corrupt("controls", "not spend controls and alerts: %v", err)
		return
	}
	if p := c.Limits.Spend.Period; p != "" && !p.Valid() {
		r.corrupt("controls", "unknown spend-limit period %q", p)
		return
	}
	for i, a := range c.Alerts {
		if a.Amount == nil && a.Percent == nil && a.Units == nil {
			r.corrupt("controls", "alert %d has no threshold", i)
			return
		}
	}
	e.Limits, e.Alerts = c.Limits, c.Alerts
	e.Limits.Spend.ResetAt, e.Limits.Spend.Anchor = e.Limits.Spend.ResetAt.UTC(), e.Limits.Spend.Anchor.UTC()
	for i := range e.Alerts {
		if t := e.Alerts[i].TriggeredAt; t != nil {
			u := t.UTC()
			e.Alerts[i].TriggeredAt = &u
		}
	}
}

// accountLimits decodes the limits column of accounts strictly.
func (r *row) accountLimits(raw []byte) entitlement.AccountLimits {
	var l entitlement.AccountLimits
	if err := strictJSON(raw, &l); err != nil {
		r.corrupt("limits", "not account limits: %v", err)
	}
	return l
}
