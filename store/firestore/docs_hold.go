package firestore

import (
	"maps"
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
	d := map[string]any{}
	if k.Cons != nil {
		d = consumptionDoc(k.Cons)
	}
	if h := k.Hold; h != nil {
		maps.Copy(d, map[string]any{
			"id":              h.ID,
			"agentId":         h.AgentID,
			"entitlementId":   h.EntitlementID,
			"entitlementType": string(h.EntitlementType),
			"service":         h.Service,
			"tool":            h.Tool,
			"idempotencyKey":  h.IdempotencyKey,
			"fingerprint":     h.Fingerprint,
			"hold":            holdMap(h),
		})
	}
	return d
}

func holdMap(h *entitlement.Hold) map[string]any {
	m := map[string]any{
		"status":    string(h.Status),
		"maxUnits":  h.MaxUnits,
		"createdAt": stamp(h.CreatedAt),
		"expiresAt": stamp(h.ExpiresAt),
	}
	if !h.MaxCost.IsZero() {
		m["maxCost"] = amountDoc(h.MaxCost)
	}
	putTime(m, "endedAt", h.EndedAt)
	if h.Captured != nil {
		c := map[string]any{"units": h.Captured.Units}
		if !h.Captured.Cost.IsZero() {
			c["cost"] = amountDoc(h.Captured.Cost)
		}
		m["captured"] = c
	}
	return m
}

// keyFrom decodes the document of an idempotency key.
func keyFrom(snap *firestore.DocumentSnapshot) (keyDoc, error) {
	var k keyDoc
	f := read(snap)
	if f.has("occurredAt") {
		c, err := consumptionFrom(snap)
		if err != nil {
			return keyDoc{}, err
		}
		k.Cons = &c
	}
	if !f.has("hold") {
		return k, nil
	}
	h := entitlement.Hold{
		ID:              f.str("id"),
		AgentID:         f.str("agentId"),
		EntitlementID:   f.str("entitlementId"),
		EntitlementType: entitlement.Type(f.str("entitlementType")),
		Service:         f.str("service"),
		Tool:            f.str("tool"),
		IdempotencyKey:  f.str("idempotencyKey"),
		Status:          entitlement.HoldStatus(f.str("hold.status")),
		MaxCost:         f.optAmount("hold.maxCost"),
		MaxUnits:        f.integer("hold.maxUnits"),
		CreatedAt:       f.instant("hold.createdAt"),
		ExpiresAt:       f.instant("hold.expiresAt"),
		EndedAt:         f.optInstant("hold.endedAt"),
		Fingerprint:     f.str("fingerprint"),
	}
	if f.has("hold.captured") {
		h.Captured = &entitlement.Charge{Cost: f.optAmount("hold.captured.cost"), Units: f.integer("hold.captured.units")}
		h.ConsumptionID = h.ID
	}
	switch h.Status {
	case entitlement.HoldOpen, entitlement.HoldReleased, entitlement.HoldExpired:
	case entitlement.HoldCaptured:
		if f.err == nil && (h.Captured == nil || k.Cons == nil) {
			f.corrupt("hold.captured", "a captured hold without its charge or consumption")
		}
	default:
		f.corrupt("hold.status", "unknown status %q", h.Status)
	}
	if f.err != nil {
		return keyDoc{}, f.err
	}
	k.Hold = &h
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
