package firestore

import (
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// One (agent, idempotency key) names one consume or one hold, so both live
// in the consumptions collection under entitlement.ConsumptionKey(agent,
// key): the document ID is the consumption ID, the hold ID, and the guard
// against using a key twice. A hold document carries the fields a
// consumption shares with it (id, agentId, entitlementId, entitlementType,
// service, tool, idempotencyKey, fingerprint) and a "hold" map, and no
// occurredAt until it is captured: ListConsumptions orders by occurredAt,
// so an uncaptured hold is never listed. The capture adds the consumption's
// fields (occurredAt, units, cost, balanceAfter or remainingAfter, holdId)
// to the same document.

// keyDoc is the document of one idempotency key: a consumption (Cons), a
// hold (Hold), or a captured hold (both): the charge engine's record.
type keyDoc = charge.Record

// keyDocument is k as stored.
func keyDocument(k *keyDoc) map[string]any {
	var fs []field
	if k.Cons != nil {
		fs = consumptionFields(k.Cons)
	}
	if k.Hold != nil {
		fs = append(fs, holdFields(k.Hold)...)
	}
	return encode(fs)
}

func holdFields(h *entitlement.Hold) []field {
	return append(keyFields(&h.ID, &h.AgentID, &h.EntitlementID, &h.EntitlementType, &h.WalletID, &h.Service, &h.Tool, &h.IdempotencyKey, &h.Fingerprint),
		nested(func(h *entitlement.Hold) []field {
			return []field{str("status", &h.Status), opt(amount("maxCost", &h.MaxCost)), integer("maxUnits", &h.MaxUnits),
				instant("createdAt", &h.CreatedAt), instant("expiresAt", &h.ExpiresAt), ptr("endedAt", &h.EndedAt, instant),
				ptr("captured", &h.Captured, nested(chargeFields))}
		})("hold", h))
}

// keyFrom decodes the document of an idempotency key.
func keyFrom(snap *firestore.DocumentSnapshot) (keyDoc, error) {
	var k keyDoc
	f := read(snap)
	if f.has("occurredAt") {
		k.Cons = new(entitlement.Consumption)
		f.decode(consumptionFields(k.Cons))
	}
	if f.has("hold") {
		h := new(entitlement.Hold)
		f.decode(holdFields(h))
		if h.Captured != nil {
			h.ConsumptionID = h.ID
		}
		switch h.Status {
		case entitlement.HoldOpen, entitlement.HoldReleased, entitlement.HoldExpired:
		case entitlement.HoldCaptured:
			if h.Captured == nil || k.Cons == nil {
				f.corrupt("hold.captured", "a captured hold without its charge or consumption")
			}
		default:
			f.corrupt("hold.status", "unknown status %q", h.Status)
		}
		k.Hold = h
	}
	if f.err != nil {
		return keyDoc{}, f.err
	}
	return k, nil
}

// endHold marks the hold id ended (expired at expiresAt or released at now)
// without reading its document: the registry on the entitlement, read in
// the same transaction, says the hold was open, and only a transaction that
// also writes the entitlement ends a hold.
func (s *Store) endHold(tx *firestore.Transaction, id string, status entitlement.HoldStatus, at time.Time) error {
	return tx.Update(s.col(colConsumptions).Doc(id), []firestore.Update{
		{Path: "hold.status", Value: string(status)},
		{Path: "hold.endedAt", Value: stamp(at)},
	})
}

// expiries maps each open hold of e to its expiry: an expired hold ends at
// its expiry, whenever that is recorded (entitlement.Hold.End).
func expiries(e *entitlement.Entitlement) map[string]time.Time {
	m := make(map[string]time.Time, len(e.Holds))
	for _, o := range e.Holds {
		m[o.ID] = o.ExpiresAt
	}
	return m
}
