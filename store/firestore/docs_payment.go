package firestore

import (
	"encoding/json"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
)

// This file maps payments, receipts and outbox events to and from their
// documents, field by field.

func putStr(d map[string]any, field, s string) {
	if s != "" {
		d[field] = s
	}
}

func scopeDoc(s entitlement.Scope) map[string]any {
	d := map[string]any{"service": s.Service}
	if len(s.Tools) > 0 {
		d["tools"] = s.Tools
	}
	return d
}

func scopeFrom(f *fields, field string) entitlement.Scope {
	return entitlement.Scope{Service: f.str(field + ".service"), Tools: f.strs(field + ".tools")}
}

func paymentDoc(p *payment.Payment) map[string]any {
	g := map[string]any{"type": string(p.Grant.Type), "scope": scopeDoc(p.Grant.Scope)}
	if p.Grant.Limit != 0 {
		g["limit"] = p.Grant.Limit
	}
	putStr(g, "period", string(p.Grant.Period))
	putTime(g, "validUntil", p.Grant.ValidUntil)
	putTime(g, "expiresAt", p.Grant.ExpiresAt)
	d := map[string]any{
		"id":             p.ID,
		"agentId":        p.AgentID,
		"amount":         amountDoc(p.Amount),
		"provider":       string(p.Provider),
		"grant":          g,
		"status":         string(p.Status),
		"createdAt":      stamp(p.CreatedAt),
		"updatedAt":      stamp(p.UpdatedAt),
		"idempotencyKey": p.IdempotencyKey,
		"fingerprint":    p.Fingerprint,
	}
	putStr(d, "providerIntentId", p.ProviderIntentID)
	putStr(d, "description", p.Description)
	putTime(d, "succeededAt", p.SucceededAt)
	putTime(d, "failedAt", p.FailedAt)
	putStr(d, "failureReason", p.FailureReason)
	putTime(d, "refundedAt", p.RefundedAt)
	putStr(d, "receiptId", p.ReceiptID)
	putStr(d, "refundReceiptId", p.RefundReceiptID)
	if len(p.EntitlementIDs) > 0 {
		d["entitlementIds"] = p.EntitlementIDs
	}
	if p.RefundedAmount != nil {
		d["refundedAmount"] = amountDoc(*p.RefundedAmount)
	}
	putTime(d, "disputedAt", p.DisputedAt)
	putStr(d, "disputeReason", p.DisputeReason)
	putTime(d, "disputeWonAt", p.DisputeWonAt)
	if c := p.Checkout; c != nil {
		d["checkout"] = map[string]any{"sessionId": c.SessionID, "url": c.URL, "expiresAt": stamp(c.ExpiresAt)}
	}
	return d
}

func paymentFrom(snap *firestore.DocumentSnapshot) (payment.Payment, error) {
	f := read(snap)
	p := payment.Payment{
		ID:               f.str("id"),
		AgentID:          f.str("agentId"),
		Amount:           f.amount("amount"),
		Provider:         payment.Provider(f.str("provider")),
		ProviderIntentID: f.optStr("providerIntentId"),
		Description:      f.optStr("description"),
		Grant: payment.Grant{
			Type:       entitlement.Type(f.str("grant.type")),
			Scope:      scopeFrom(f, "grant.scope"),
			Period:     entitlement.Period(f.optStr("grant.period")),
			ValidUntil: f.optInstant("grant.validUntil"),
			ExpiresAt:  f.optInstant("grant.expiresAt"),
		},
		Status:          payment.Status(f.str("status")),
		CreatedAt:       f.instant("createdAt"),
		UpdatedAt:       f.instant("updatedAt"),
		SucceededAt:     f.optInstant("succeededAt"),
		FailedAt:        f.optInstant("failedAt"),
		FailureReason:   f.optStr("failureReason"),
		RefundedAt:      f.optInstant("refundedAt"),
		ReceiptID:       f.optStr("receiptId"),
		RefundReceiptID: f.optStr("refundReceiptId"),
		EntitlementIDs:  f.strs("entitlementIds"),
		IdempotencyKey:  f.str("idempotencyKey"),
		Fingerprint:     f.str("fingerprint"),
	}
	if f.has("grant.limit") {
		p.Grant.Limit = f.integer("grant.limit")
	}
	if f.has("refundedAmount") {
		r := f.amount("refundedAmount")
		p.RefundedAmount = &r
	}
	p.DisputedAt, p.DisputeReason = f.optInstant("disputedAt"), f.optStr("disputeReason")
	p.DisputeWonAt = f.optInstant("disputeWonAt")
	if f.has("checkout") {
		p.Checkout = &payment.Checkout{SessionID: f.str("checkout.sessionId"), URL: f.str("checkout.url"), ExpiresAt: f.instant("checkout.expiresAt")}
	}
	return p, f.err
}

func receiptDoc(r *receipt.Signed) map[string]any {
	grants := make([]any, len(r.Grants))
	for i, g := range r.Grants {
		d := map[string]any{"entitlementId": g.EntitlementID, "type": string(g.Type), "scope": scopeDoc(g.Scope)}
		if !g.Balance.IsZero() {
			d["balance"] = amountDoc(g.Balance)
		}
		if g.Limit != 0 {
			d["limit"] = g.Limit
		}
		putStr(d, "period", string(g.Period))
		putTime(d, "validUntil", g.ValidUntil)
		putTime(d, "expiresAt", g.ExpiresAt)
		grants[i] = d
	}
	return map[string]any{
		"id":        r.ID,
		"version":   int64(r.Version),
		"kind":      string(r.Kind),
		"issuer":    r.Issuer,
		"agentId":   r.AgentID,
		"paymentId": r.PaymentID,
		"amount":    amountDoc(r.Amount),
		"grants":    grants,
		"issuedAt":  stamp(r.IssuedAt),
		"jws":       r.JWS,
	}
}

func receiptFrom(snap *firestore.DocumentSnapshot) (receipt.Signed, error) {
	f := read(snap)
	r := receipt.Signed{Receipt: receipt.Receipt{
		ID:        f.str("id"),
		Version:   int(f.integer("version")),
		Kind:      receipt.Kind(f.str("kind")),
		Issuer:    f.str("issuer"),
		AgentID:   f.str("agentId"),
		PaymentID: f.str("paymentId"),
		Amount:    f.amount("amount"),
		IssuedAt:  f.instant("issuedAt"),
	}, JWS: f.str("jws")}
	r.Grants = []receipt.Grant{}
	f.each("grants", func(g *fields) {
		grant := receipt.Grant{
			EntitlementID: g.str("entitlementId"),
			Type:          entitlement.Type(g.str("type")),
			Scope:         scopeFrom(g, "scope"),
			Balance:       g.optAmount("balance"),
			Period:        entitlement.Period(g.optStr("period")),
			ValidUntil:    g.optInstant("validUntil"),
			ExpiresAt:     g.optInstant("expiresAt"),
		}
		if g.has("limit") {
			grant.Limit = g.integer("limit")
		}
		r.Grants = append(r.Grants, grant)
	})
	return r, f.err
}

// eventDoc stores Data as a string, so the exact bytes come back.
func eventDoc(e *event.Event) map[string]any {
	d := map[string]any{
		"id":         e.ID,
		"type":       string(e.Type),
		"occurredAt": stamp(e.OccurredAt),
		"data":       string(e.Data),
		"dispatched": false,
	}
	putStr(d, "agentId", e.AgentID)
	return d
}

func eventFrom(snap *firestore.DocumentSnapshot) (event.Event, error) {
	f := read(snap)
	e := event.Event{
		ID:         f.str("id"),
		Type:       event.Type(f.str("type")),
		AgentID:    f.optStr("agentId"),
		OccurredAt: f.instant("occurredAt"),
		Data:       json.RawMessage(f.str("data")),
	}
	return e, f.err
}
