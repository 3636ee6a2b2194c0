package firestore

import (
	"encoding/json"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
)

// The documents of payments, receipts and outbox events.

// grantFields are the fields a payment's grant and a receipt's grant share.
func grantFields(typ *entitlement.Type, scope *entitlement.Scope, limit *int64, period *entitlement.Period, validUntil, expiresAt **time.Time) []field {
	return []field{str("type", typ), nested(scopeFields)("scope", scope), opt(integer("limit", limit)), opt(str("period", period)),
		ptr("validUntil", validUntil, instant), ptr("expiresAt", expiresAt, instant)}
}

func paymentFields(p *payment.Payment) []field {
	return []field{
		str("id", &p.ID), str("agentId", &p.AgentID), amount("amount", &p.Amount), str("provider", &p.Provider),
		opt(str("providerIntentId", &p.ProviderIntentID)), opt(str("description", &p.Description)),
		nested(func(g *payment.Grant) []field {
			return grantFields(&g.Type, &g.Scope, &g.Limit, &g.Period, &g.ValidUntil, &g.ExpiresAt)
		})("grant", &p.Grant),
		str("status", &p.Status), instant("createdAt", &p.CreatedAt), instant("updatedAt", &p.UpdatedAt),
		ptr("succeededAt", &p.SucceededAt, instant), ptr("failedAt", &p.FailedAt, instant),
		opt(str("failureReason", &p.FailureReason)), ptr("refundedAt", &p.RefundedAt, instant),
		opt(str("receiptId", &p.ReceiptID)), opt(str("refundReceiptId", &p.RefundReceiptID)),
		opt(strs("entitlementIds", &p.EntitlementIDs)), ptr("refundedAmount", &p.RefundedAmount, amount),
		ptr("disputedAt", &p.DisputedAt, instant), opt(str("disputeReason", &p.DisputeReason)),
		ptr("disputeWonAt", &p.DisputeWonAt, instant),
		ptr("checkout", &p.Checkout, nested(func(c *payment.Checkout) []field {
			return []field{str("sessionId", &c.SessionID), str("url", &c.URL), instant("expiresAt", &c.ExpiresAt)}
		})),
		str("idempotencyKey", &p.IdempotencyKey), str("fingerprint", &p.Fingerprint),
	}
}

func paymentDoc(p *payment.Payment) map[string]any { return encode(paymentFields(p)) }

var paymentFrom = decoder(paymentFields)

func receiptFields(r *receipt.Signed) []field {
	return []field{
		str("id", &r.ID), integer("version", &r.Version), str("kind", &r.Kind), str("issuer", &r.Issuer),
		str("agentId", &r.AgentID), str("paymentId", &r.PaymentID), amount("amount", &r.Amount),
		array("grants", &r.Grants, func(g *receipt.Grant) []field {
			return append(grantFields(&g.Type, &g.Scope, &g.Limit, &g.Period, &g.ValidUntil, &g.ExpiresAt),
				str("entitlementId", &g.EntitlementID), opt(amount("balance", &g.Balance)))
		}),
		instant("issuedAt", &r.IssuedAt), str("jws", &r.JWS),
	}
}

func receiptDoc(r *receipt.Signed) map[string]any { return encode(receiptFields(r)) }

func receiptFrom(snap *firestore.DocumentSnapshot) (receipt.Signed, error) {
	r, err := decoder(receiptFields)(snap)
	if r.Grants == nil {
		r.Grants = []receipt.Grant{}
	}
	return r, err
}

// eventFields: Data is stored as a string, so the exact bytes come back.
func eventFields(e *event.Event) []field {
	return []field{
		str("id", &e.ID), str("type", &e.Type), opt(str("agentId", &e.AgentID)), instant("occurredAt", &e.OccurredAt),
		leaf("data", &e.Data, func(d json.RawMessage) any { return string(d) },
			func(f *fields, n string) json.RawMessage { return json.RawMessage(f.str(n)) }),
	}
}

// eventDoc also stores dispatched, false until the event is delivered.
func eventDoc(e *event.Event) map[string]any {
	d := encode(eventFields(e))
	d["dispatched"] = false
	return d
}

var eventFrom = decoder(eventFields)
