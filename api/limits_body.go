package api

import (
	"reflect"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// nullable is a member of a body where null means "remove": Set when the
// member was given, Null when it was given as null, V its value otherwise.
// The decoder leaves a null to the Go type (and never calls a method for
// it), so the members are read by decodeNullable.
type nullable[T any] struct {
	Set, Null bool
	V         T
}

// UnmarshalJSONFrom makes nullable a member type of its own.
func (n *nullable[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error { return decodeNullable(dec, n) }

// decodeNullable reads the next value into n: null, or a T with the
// decoder's (strict) options.
func decodeNullable[T any](dec *jsontext.Decoder, n *nullable[T]) error {
	n.Set = true
	if dec.PeekKind() == 'n' {
		n.Null = true
		_, err := dec.ReadToken()
		return err
	}
	return json.UnmarshalDecode(dec, &n.V)
}

// decodeMembers reads a JSON object whose members are named in read, each
// read by its function; a member read does not name is given to other
// (nil: an unknown-field error naming it).
func decodeMembers(dec *jsontext.Decoder, goType reflect.Type, read map[string]func() error, other func(name string) error) error {
	if k := dec.PeekKind(); k != '{' {
		if k == 0 {
			_, err := dec.ReadToken()
			return err
		}
		return &json.SemanticError{JSONKind: k, GoType: goType}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String()
		switch f, ok := read[name]; {
		case ok:
			err = f()
		case other != nil:
			err = other(name)
		default:
			err = &json.SemanticError{JSONPointer: dec.StackPointer(), Err: json.ErrUnknownName}
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// limitsBody is the "limits" of a grant or of PATCH /v1/entitlements/{id}:
// absent members stay as they are (a grant has none yet), null removes one.
type limitsBody struct {
	MaxPerCall      nullable[money.Money]
	MaxUnitsPerCall nullable[int64]
	SpendLimit      nullable[spendLimitBody]
}

// UnmarshalJSONFrom reads the members maxPerCall, maxUnitsPerCall and
// spendLimit, each possibly null.
func (l *limitsBody) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return decodeMembers(dec, reflect.TypeFor[limitsBody](), map[string]func() error{
		"maxPerCall":      func() error { return decodeNullable(dec, &l.MaxPerCall) },
		"maxUnitsPerCall": func() error { return decodeNullable(dec, &l.MaxUnitsPerCall) },
		"spendLimit":      func() error { return decodeNullable(dec, &l.SpendLimit) },
	}, nil)
}

// spendLimitBody is a spend limit as a request sets it: a period and the
// most per period, money (credits) or units (quota).
type spendLimitBody struct {
	Period   entitlement.Period `json:"period"`
	Max      *money.Money       `json:"max"`
	MaxUnits *int64             `json:"maxUnits"`
}

// alertBody is a low-balance alert as a request sets it: exactly one
// threshold.
type alertBody struct {
	Amount  *money.Money `json:"amount"`
	Percent *int64       `json:"percent"`
	Units   *int64       `json:"units"`
}

// validate checks what the domain's rules cannot tell from an Update: an
// object given as the spend limit names its period (only null removes it).
func (l *limitsBody) validate() error {
	if l != nil && l.SpendLimit.Set && !l.SpendLimit.Null && l.SpendLimit.V.Period == "" {
		return Invalid("limits.spendLimit.period", "is required (null removes the spend limit)")
	}
	return nil
}

// controls adds the limits (nil: none given) and alerts (Set false: none
// given) of a body to u.
func controls(u *entitlement.Update, l *limitsBody, alerts nullable[[]alertBody]) {
	if l != nil {
		if l.MaxPerCall.Set {
			u.MaxPerCall = &entitlement.Set[*money.Money]{To: orNil(l.MaxPerCall)}
		}
		if l.MaxUnitsPerCall.Set {
			u.MaxUnitsPerCall = &entitlement.Set[*int64]{To: orNil(l.MaxUnitsPerCall)}
		}
		if l.SpendLimit.Set {
			var s entitlement.SpendLimit
			if b := l.SpendLimit.V; !l.SpendLimit.Null {
				s.Period = b.Period
				if b.Max != nil {
					s.Max = *b.Max
				}
				if b.MaxUnits != nil {
					s.MaxUnits = *b.MaxUnits
				}
			}
			u.SpendLimit = &entitlement.Set[entitlement.SpendLimit]{To: s}
		}
	}
	if alerts.Set {
		as := make([]entitlement.Alert, len(alerts.V))
		for i, a := range alerts.V {
			as[i] = entitlement.Alert{Amount: a.Amount, Percent: a.Percent, Units: a.Units}
		}
		u.Alerts = &entitlement.Set[[]entitlement.Alert]{To: as}
	}
}

// orNil is n's value, or nil for null.
func orNil[T any](n nullable[T]) *T {
	if n.Null {
		return nil
	}
	v := n.V
	return &v
}

// removeAllLimits is the update of "limits": null.
func removeAllLimits(u *entitlement.Update) {
	u.MaxPerCall = &entitlement.Set[*money.Money]{}
	u.MaxUnitsPerCall = &entitlement.Set[*int64]{}
	u.SpendLimit = &entitlement.Set[entitlement.SpendLimit]{}
}

// expiry is the update of "expiresAt".
func expiry(n nullable[time.Time]) *entitlement.Set[*time.Time] {
	if !n.Set {
		return nil
	}
	return &entitlement.Set[*time.Time]{To: orNil(n)}
}
