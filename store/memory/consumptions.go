package memory

import "github.com/stipend-mcp/stipend/entitlement"

// consumptionKey finds a consumption: an idempotency key is unique per
// agent. It is the rule of entitlement.ConsumptionKey without the SHA-256,
// which only exists to make a valid Firestore document ID.
type consumptionKey struct{ agentID, key string }

func consumptionPos(c *entitlement.Consumption) position { return position{c.OccurredAt, c.ID} }

// putConsumption stores and indexes a copy of c, a new consumption. Callers
// hold s.mu.
func (s *Store) putConsumption(c *entitlement.Consumption) {
	stored := copyConsumption(c)
	s.consumptions[consumptionKey{c.AgentID, c.IdempotencyKey}] = &stored
	a := s.agent(c.AgentID)
	a.consumptions = insertSorted(a.consumptions, &stored, byPosition(consumptionPos))
}

// copyConsumption returns a copy of c that shares nothing with it.
func copyConsumption(c *entitlement.Consumption) entitlement.Consumption {
	out := *c
	if c.RemainingAfter != nil {
		rem := *c.RemainingAfter
		out.RemainingAfter = &rem
	}
	return out
}
