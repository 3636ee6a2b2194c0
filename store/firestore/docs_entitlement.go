package firestore

import (
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// This file maps accounts, entitlements and consumptions to and from their
// documents, field by field. The stored field names are part of the
// deployment (indexes and rules name them); change them only with a migration.

func amountDoc(m money.Money) map[string]any {
	return map[string]any{"cents": m.Cents, "currency": m.Currency}
}

func putTime(d map[string]any, field string, t *time.Time) {
	if t != nil {
		d[field] = stamp(*t)
	}
}

func putStrMap(d map[string]any, field string, m map[string]string) {
	if len(m) > 0 {
		d[field] = m
	}
}

func accountDoc(a *entitlement.Account) map[string]any {
	d := map[string]any{
		"agentId":   a.AgentID,
		"createdAt": stamp(a.CreatedAt),
		"updatedAt": stamp(a.UpdatedAt),
	}
	if a.DisplayName != "" {
		d["displayName"] = a.DisplayName
	}
	putStrMap(d, "metadata", a.Metadata)
	putAccountLimits(d, &a.Limits)
	return d
}

func accountFrom(snap *firestore.DocumentSnapshot) (entitlement.Account, error) {
	f := read(snap)
	a := entitlement.Account{
		AgentID:     f.str("agentId"),
		DisplayName: f.optStr("displayName"),
		Metadata:    f.strMap("metadata"),
		CreatedAt:   f.instant("createdAt"),
		UpdatedAt:   f.instant("updatedAt"),
	}
	readAccountLimits(f, &a.Limits)
	return a, f.err
}

func entitlementDoc(e *entitlement.Entitlement) map[string]any {
	scope := map[string]any{"service": e.Scope.Service}
	if len(e.Scope.Tools) > 0 {
		scope["tools"] = e.Scope.Tools
	}
	d := map[string]any{
		"id":        e.ID,
		"agentId":   e.AgentID,
		"type":      string(e.Type),
		"scope":     scope,
		"status":    string(e.Status),
		"createdAt": stamp(e.CreatedAt),
	}
	putTime(d, "expiresAt", e.ExpiresAt)
	putTime(d, "revokedAt", e.RevokedAt)
	if e.PaymentID != "" {
		d["paymentId"] = e.PaymentID
	}
	putStrMap(d, "metadata", e.Metadata)
	switch e.Type {
	case entitlement.TypeCredits:
		d["credits"] = map[string]any{
			"balance": amountDoc(e.Credits.Balance),
			"granted": amountDoc(e.Credits.Granted),
		}
	case entitlement.TypeQuota:
		d["quota"] = map[string]any{
			"limit":     e.Quota.Limit,
			"period":    string(e.Quota.Period),
			"remaining": e.Quota.Remaining,
			"resetAt":   stamp(e.Quota.ResetAt),
			"anchor":    stamp(e.Quota.Anchor),
		}
	case entitlement.TypeSubscription:
		sub := map[string]any{"validFrom": stamp(e.Subscription.ValidFrom)}
		putTime(sub, "validUntil", e.Subscription.ValidUntil)
		d["subscription"] = sub
	}
	putControls(d, e)
	putHolds(d, e.Holds)
	putLeases(d, e.Leases)
	return d
}

// putHolds stores the open-hold registry and, for the sweep's query
// (ExpireHolds), the earliest expiry among the holds; with no open hold
// neither field is stored.
func putHolds(d map[string]any, holds []entitlement.OpenHold) {
	if len(holds) == 0 {
		return
	}
	list := make([]any, len(holds))
	first := holds[0].ExpiresAt
	for i, o := range holds {
		list[i] = map[string]any{"id": o.ID, "amount": o.Amount, "expiresAt": stamp(o.ExpiresAt)}
		if o.ExpiresAt.Before(first) {
			first = o.ExpiresAt
		}
	}
	d["holds"] = list
	d["holdsExpireAt"] = stamp(first)
}

func entitlementFrom(snap *firestore.DocumentSnapshot) (entitlement.Entitlement, error) {
	f := read(snap)
	e := entitlement.Entitlement{
		ID:        f.str("id"),
		AgentID:   f.str("agentId"),
		Type:      entitlement.Type(f.str("type")),
		Scope:     entitlement.Scope{Service: f.str("scope.service"), Tools: f.strs("scope.tools")},
		Status:    entitlement.Status(f.str("status")),
		CreatedAt: f.instant("createdAt"),
		ExpiresAt: f.optInstant("expiresAt"),
		RevokedAt: f.optInstant("revokedAt"),
		PaymentID: f.optStr("paymentId"),
		Metadata:  f.strMap("metadata"),
	}
	if f.err == nil && !e.Status.Valid() {
		f.corrupt("status", "unknown status %q", e.Status)
	}
	switch e.Type {
	case entitlement.TypeCredits:
		e.Credits = entitlement.Credits{Balance: f.amount("credits.balance"), Granted: f.amount("credits.granted")}
		if f.err == nil && e.Credits.Balance.Cents < 0 {
			f.corrupt("credits.balance.cents", "negative balance %d", e.Credits.Balance.Cents)
		}
	case entitlement.TypeQuota:
		e.Quota = entitlement.Quota{
			Limit:     f.integer("quota.limit"),
			Period:    entitlement.Period(f.str("quota.period")),
			Remaining: f.integer("quota.remaining"),
			ResetAt:   f.instant("quota.resetAt"),
			Anchor:    f.instant("quota.anchor"),
		}
		if f.err == nil && !e.Quota.Period.Valid() {
			f.corrupt("quota.period", "unknown period %q", e.Quota.Period)
		}
	case entitlement.TypeSubscription:
		e.Subscription = entitlement.Subscription{
			ValidFrom:  f.instant("subscription.validFrom"),
			ValidUntil: f.optInstant("subscription.validUntil"),
		}
	default:
		f.corrupt("type", "unknown type %q", e.Type)
	}
	if f.err == nil && (f.has("limits") || f.has("alerts")) {
		readControls(f, &e)
	}
	f.each("holds", func(h *fields) {
		o := entitlement.OpenHold{ID: h.str("id"), Amount: h.integer("amount"), ExpiresAt: h.instant("expiresAt")}
		if h.err == nil && o.Amount < 0 {
			h.corrupt("amount", "negative amount %d", o.Amount)
		}
		e.Holds = append(e.Holds, o)
	})
	leasesFrom(f, &e)
	return e, f.err
}

func consumptionDoc(c *entitlement.Consumption) map[string]any {
	d := map[string]any{
		"id":              c.ID,
		"agentId":         c.AgentID,
		"entitlementId":   c.EntitlementID,
		"entitlementType": string(c.EntitlementType),
		"service":         c.Service,
		"tool":            c.Tool,
		"idempotencyKey":  c.IdempotencyKey,
		"units":           c.Units,
		"occurredAt":      stamp(c.OccurredAt),
		"fingerprint":     c.Fingerprint,
	}
	if !c.Cost.IsZero() {
		d["cost"] = amountDoc(c.Cost)
	}
	if !c.BalanceAfter.IsZero() {
		d["balanceAfter"] = amountDoc(c.BalanceAfter)
	}
	if c.RemainingAfter != nil {
		d["remainingAfter"] = *c.RemainingAfter
	}
	if c.HoldID != "" {
		d["holdId"] = c.HoldID
	}
	if c.Refund != nil {
		r := map[string]any{"units": c.Refund.Units, "refundedAt": stamp(c.Refund.RefundedAt)}
		if !c.Refund.Cost.IsZero() {
			r["cost"] = amountDoc(c.Refund.Cost)
		}
		d["refund"] = r
	}
	return d
}

func consumptionFrom(snap *firestore.DocumentSnapshot) (entitlement.Consumption, error) {
	f := read(snap)
	c := entitlement.Consumption{
		ID:              f.str("id"),
		AgentID:         f.str("agentId"),
		EntitlementID:   f.str("entitlementId"),
		EntitlementType: entitlement.Type(f.str("entitlementType")),
		Service:         f.str("service"),
		Tool:            f.str("tool"),
		IdempotencyKey:  f.str("idempotencyKey"),
		Cost:            f.optAmount("cost"),
		Units:           f.integer("units"),
		OccurredAt:      f.instant("occurredAt"),
		BalanceAfter:    f.optAmount("balanceAfter"),
		HoldID:          f.optStr("holdId"),
		Fingerprint:     f.str("fingerprint"),
	}
	if f.has("remainingAfter") {
		n := f.integer("remainingAfter")
		c.RemainingAfter = &n
	}
	if f.has("refund") {
		c.Refund = &entitlement.Refund{
			Charge:     entitlement.Charge{Cost: f.optAmount("refund.cost"), Units: f.integer("refund.units")},
			RefundedAt: f.instant("refund.refundedAt"),
		}
	}
	return c, f.err
}
