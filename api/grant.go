package api

import (
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
)

// MaxQuotaLimit bounds a quota's calls per period (2^40); the quotalimit
// validator tag refers to it.
const MaxQuotaLimit = 1 << 40

// scopeBody is an entitlement scope in a request.
type scopeBody struct {
	Service string   `json:"service" validate:"required,name"`
	Tools   []string `json:"tools" validate:"max=100,dive,required,name"`
}

// grantBody is the template of an entitlement: the "grant" of a payment,
// and, embedded in entitlementBody, the body of a direct grant.
type grantBody struct {
	Type       entitlement.Type   `json:"type" validate:"required,oneof=credits quota subscription"`
	Scope      scopeBody          `json:"scope" validate:"required"`
	Limit      int64              `json:"limit" validate:"quotalimit"`
	Period     entitlement.Period `json:"period" validate:"omitempty,oneof=hour day week month"`
	ValidUntil *time.Time         `json:"validUntil"`
	ExpiresAt  *time.Time         `json:"expiresAt"`
}

// validate checks the rules across fields; prefix is the grant's JSON path
// with a trailing dot ("grant.") or "".
func (g *grantBody) validate(prefix string) error {
	if g.Type == entitlement.TypeQuota {
		if g.Limit < 1 {
			return Invalid(prefix+"limit", "is required for a quota and must be at least 1")
		}
		if g.Period == "" {
			return Invalid(prefix+"period", "is required for a quota")
		}
	} else {
		if g.Limit != 0 {
			return Invalid(prefix+"limit", "is only for quota grants")
		}
		if g.Period != "" {
			return Invalid(prefix+"period", "is only for quota grants")
		}
	}
	if g.ValidUntil != nil && g.Type != entitlement.TypeSubscription {
		return Invalid(prefix+"validUntil", "is only for subscription grants")
	}
	for name, t := range map[string]*time.Time{"validUntil": g.ValidUntil, "expiresAt": g.ExpiresAt} {
		if t != nil && !entitlement.ValidInstant(*t) {
			return Invalid(prefix+name, "must be within the years 0001–9999 in UTC")
		}
	}
	return nil
}

// ahead checks that every instant g gives is later than now: an entitlement
// that would be expired from the start is refused, since it is almost
// always a mistake (a date in the wrong year, or a zero value such as
// 0001-01-01T00:00:00Z sent for "none"; leave the member out for that).
// prefix is as for validate. A payment's grant is checked when the payment
// is created; if its instant has passed by the time the payment succeeds,
// the entitlement is granted expired (docs/api.md).
func (g *grantBody) ahead(prefix string, now time.Time) error {
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"validUntil", g.ValidUntil}, {"expiresAt", g.ExpiresAt}} {
		if f.t != nil && !f.t.After(now) {
			return Invalid(prefix+f.name, "must be later than now ("+now.Format(time.RFC3339)+"); leave it out for no end")
		}
	}
	return nil
}

// template returns g as a payment grant, with instants in UTC.
func (g *grantBody) template() payment.Grant {
	return payment.Grant{
		Type:       g.Type,
		Scope:      entitlement.Scope{Service: g.Scope.Service, Tools: g.Scope.Tools},
		Limit:      g.Limit,
		Period:     g.Period,
		ValidUntil: utc(g.ValidUntil),
		ExpiresAt:  utc(g.ExpiresAt),
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
