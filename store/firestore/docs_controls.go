package firestore

import (
	"github.com/stipend-mcp/stipend/entitlement"
)

// putControls stores an entitlement's spend controls ("limits") and
// low-balance alerts ("alerts"); an entitlement without them stores
// neither field. An alert is triggered exactly when it stores triggeredAt.
func putControls(d map[string]any, e *entitlement.Entitlement) {
	if l := &e.Limits; !l.IsZero() {
		m := map[string]any{}
		if l.MaxPerCall != nil {
			m["maxPerCall"] = amountDoc(*l.MaxPerCall)
		}
		if l.MaxUnitsPerCall != nil {
			m["maxUnitsPerCall"] = *l.MaxUnitsPerCall
		}
		if s := &l.Spend; s.Period != "" {
			sd := map[string]any{"period": string(s.Period), "resetAt": stamp(s.ResetAt), "anchor": stamp(s.Anchor)}
			if e.Type == entitlement.TypeCredits {
				sd["max"], sd["spent"] = amountDoc(s.Max), amountDoc(s.Spent)
			} else {
				sd["maxUnits"], sd["spentUnits"] = s.MaxUnits, s.SpentUnits
			}
			m["spend"] = sd
		}
		d["limits"] = m
	}
	if len(e.Alerts) == 0 {
		return
	}
	list := make([]any, len(e.Alerts))
	for i, a := range e.Alerts {
		ad := map[string]any{}
		switch {
		case a.Amount != nil:
			ad["amount"] = amountDoc(*a.Amount)
		case a.Percent != nil:
			ad["percent"] = *a.Percent
		case a.Units != nil:
			ad["units"] = *a.Units
		}
		putTime(ad, "triggeredAt", a.TriggeredAt)
		list[i] = ad
	}
	d["alerts"] = list
}

// readControls decodes what putControls stored into e, strictly (every
// field of its stored type).
func readControls(f *fields, e *entitlement.Entitlement) {
	if f.has("limits.maxPerCall") {
		m := f.amount("limits.maxPerCall")
		e.Limits.MaxPerCall = &m
	}
	if f.has("limits.maxUnitsPerCall") {
		n := f.integer("limits.maxUnitsPerCall")
		e.Limits.MaxUnitsPerCall = &n
	}
	if f.has("limits.spend") {
		s := entitlement.SpendLimit{
			Period:  entitlement.Period(f.str("limits.spend.period")),
			ResetAt: f.instant("limits.spend.resetAt"),
			Anchor:  f.instant("limits.spend.anchor"),
		}
		if e.Type == entitlement.TypeCredits {
			s.Max, s.Spent = f.amount("limits.spend.max"), f.amount("limits.spend.spent")
		} else {
			s.MaxUnits, s.SpentUnits = f.integer("limits.spend.maxUnits"), f.integer("limits.spend.spentUnits")
		}
		if f.err == nil && !s.Period.Valid() {
			f.corrupt("limits.spend.period", "unknown period %q", s.Period)
		}
		e.Limits.Spend = s
	}
	f.each("alerts", func(h *fields) {
		var a entitlement.Alert
		switch {
		case h.has("amount"):
			m := h.amount("amount")
			a.Amount = &m
		case h.has("percent"):
			n := h.integer("percent")
			a.Percent = &n
		case h.has("units"):
			n := h.integer("units")
			a.Units = &n
		default:
			h.corrupt("amount", "absent, as are percent and units: an alert with no threshold")
		}
		a.TriggeredAt = h.optInstant("triggeredAt")
		a.Triggered = a.TriggeredAt != nil
		e.Alerts = append(e.Alerts, a)
	})
}

// putAccountLimits stores an account's limits ("limits"); an account
// without them stores no such field.
func putAccountLimits(d map[string]any, l *entitlement.AccountLimits) {
	if l.IsZero() {
		return
	}
	m := map[string]any{}
	if len(l.MaxPerCall) > 0 {
		list := make([]any, len(l.MaxPerCall))
		for i, a := range l.MaxPerCall {
			list[i] = map[string]any{"amount": amountDoc(a)} // an element is a map, as each reads it
		}
		m["maxPerCall"] = list
	}
	if l.MaxUnitsPerCall != nil {
		m["maxUnitsPerCall"] = *l.MaxUnitsPerCall
	}
	d["limits"] = m
}

// readAccountLimits decodes what putAccountLimits stored.
func readAccountLimits(f *fields, l *entitlement.AccountLimits) {
	f.each("limits.maxPerCall", func(h *fields) {
		l.MaxPerCall = append(l.MaxPerCall, h.amount("amount"))
	})
	if f.has("limits.maxUnitsPerCall") {
		n := f.integer("limits.maxUnitsPerCall")
		l.MaxUnitsPerCall = &n
	}
}
