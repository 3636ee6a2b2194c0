package entitlement

import (
	"cmp"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/money"
)

// Balance totals what an agent can spend now, over its usable entitlements:
// those active and not expired (a subscription inside its window), with
// lazy quota resets applied and the holds not yet expired counted as held.
type Balance struct {
	AgentID string `json:"agentId"`
	// AsOf is the instant the balance was read at.
	AsOf time.Time `json:"asOf"`
	// Credits has one entry per currency, by currency code.
	Credits []CreditsBalance `json:"credits"`
	// Quotas has one entry per scope service ("*" included), by service.
	Quotas []QuotaBalance `json:"quotas"`
	// Subscriptions lists the subscriptions in force, earliest end first
	// (those without an end last), then by ID.
	Subscriptions []SubscriptionBalance `json:"subscriptions"`
}

// CreditsBalance totals an agent's credits in one currency: Total is the
// balance left, Held what open holds reserve of it, Available the rest.
type CreditsBalance struct {
	Currency     string      `json:"currency"`
	Total        money.Money `json:"total"`
	Held         money.Money `json:"held"`
	Available    money.Money `json:"available"`
	Entitlements int         `json:"entitlements"`
}

// QuotaBalance totals an agent's quotas on one scope service: units
// Remaining in their current periods, Held by open holds, Available (the
// rest), and the earliest reset among them.
type QuotaBalance struct {
	Service      string    `json:"service"`
	Limit        int64     `json:"limit"`
	Remaining    int64     `json:"remaining"`
	Held         int64     `json:"held"`
	Available    int64     `json:"available"`
	NextResetAt  time.Time `json:"nextResetAt"`
	Entitlements int       `json:"entitlements"`
}

// SubscriptionBalance is one subscription in force and when it ends (the
// earlier of its window's end and its expiry; nil when it has neither).
type SubscriptionBalance struct {
	EntitlementID string     `json:"entitlementId"`
	Scope         Scope      `json:"scope"`
	ValidFrom     time.Time  `json:"validFrom"`
	EndsAt        *time.Time `json:"endsAt,omitempty"`
}

// BalanceOf totals es, an agent's entitlements as stored (any status), at
// now. It refreshes copies, never es itself. A total past money.MaxCents
// (2^53−1: credits, or a quota's limit, remaining or held units) is capped
// at it rather than shown as a number no JSON client reads exactly; docs/api.md
// says so.
func BalanceOf(agentID string, es []Entitlement, now time.Time) Balance {
	b := Balance{AgentID: agentID, AsOf: now.UTC(),
		Credits: []CreditsBalance{}, Quotas: []QuotaBalance{}, Subscriptions: []SubscriptionBalance{}}
	credits := map[string]*CreditsBalance{}
	quotas := map[string]*QuotaBalance{}
	for i := range es {
		e := es[i].Clone()
		if e.Status != StatusActive || e.Expired(now) {
			continue
		}
		e.Refresh(now)
		switch e.Type {
		case TypeCredits:
			cur := e.Credits.Balance.Currency
			c := credits[cur]
			if c == nil {
				c = &CreditsBalance{Currency: cur}
				credits[cur] = c
			}
			c.Total.Cents = capped(c.Total.Cents, e.Credits.Balance.Cents)
			c.Held.Cents = capped(c.Held.Cents, e.Credits.Held.Cents)
			c.Entitlements++
		case TypeQuota:
			q := quotas[e.Scope.Service]
			if q == nil {
				q = &QuotaBalance{Service: e.Scope.Service, NextResetAt: e.Quota.ResetAt}
				quotas[e.Scope.Service] = q
			}
			q.Limit = capped(q.Limit, e.Quota.Limit)
			q.Remaining = capped(q.Remaining, e.Quota.Remaining)
			q.Held = capped(q.Held, e.Quota.Held)
			if e.Quota.ResetAt.Before(q.NextResetAt) {
				q.NextResetAt = e.Quota.ResetAt
			}
			q.Entitlements++
		case TypeSubscription:
			s := SubscriptionBalance{EntitlementID: e.ID, Scope: e.Scope, ValidFrom: e.Subscription.ValidFrom}
			if end, ok := e.EffectiveExpiry(); ok {
				s.EndsAt = &end
			}
			b.Subscriptions = append(b.Subscriptions, s)
		}
	}
	for _, c := range credits {
		c.Total.Currency, c.Held.Currency, c.Available.Currency = c.Currency, c.Currency, c.Currency
		c.Available.Cents = c.Total.Cents - c.Held.Cents
		b.Credits = append(b.Credits, *c)
	}
	for _, q := range quotas {
		q.Available = q.Remaining - q.Held
		b.Quotas = append(b.Quotas, *q)
	}
	slices.SortFunc(b.Credits, func(x, y CreditsBalance) int { return cmp.Compare(x.Currency, y.Currency) })
	slices.SortFunc(b.Quotas, func(x, y QuotaBalance) int { return cmp.Compare(x.Service, y.Service) })
	slices.SortFunc(b.Subscriptions, func(x, y SubscriptionBalance) int {
		switch {
		case x.EndsAt != nil && y.EndsAt != nil:
			if c := x.EndsAt.Compare(*y.EndsAt); c != 0 {
				return c
			}
		case x.EndsAt != nil:
			return -1
		case y.EndsAt != nil:
			return 1
		}
		return cmp.Compare(x.EntitlementID, y.EntitlementID)
	})
	return b
}

// capped is total+n capped at money.MaxCents. Each term and each running
// total is at most money.MaxCents, so the sum never overflows first.
func capped(total, n int64) int64 { return min(total+n, money.MaxCents) }
