package memory

import (
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// consumptionKey finds what an idempotency key was used for: a key is
// unique per agent. It is the rule of entitlement.ConsumptionKey without the
// SHA-256, which only exists to make a valid Firestore document ID.
type consumptionKey struct{ agentID, key string }

// use is what one (agent, key) pair was used for: a consume (consumption
// set), or a hold (hold set, and consumption too once it was captured). The
// pointers are the records of Store.consumptions and Store.holds.
type use struct {
	consumption *entitlement.Consumption
	hold        *entitlement.Hold
}

// used returns copies of what the agent's key was used for, with the hold
// shown as it is at now, and false if the key is unused. Callers hold s.mu.
func (s *Store) used(agentID, key string, now time.Time) (charge.Used, bool) {
	u, ok := s.keys[consumptionKey{agentID, key}]
	if !ok {
		return charge.Used{}, false
	}
	var out charge.Used
	if u.consumption != nil {
		out.Consumption = copyConsumption(u.consumption)
	}
	if u.hold != nil {
		out.Hold = copyHold(u.hold)
		out.Hold.Refresh(now)
	}
	return out, true
}

func consumptionPos(c *entitlement.Consumption) position { return position{At: c.OccurredAt, ID: c.ID} }

// putConsumption stores and indexes c itself, a new consumption (of a
// consume, or of the capture of a hold stored under the same key) that the
// charge engine made and nothing else holds: only what c shares with the
// caller's answer (a quota's remaining count) is copied, so the development
// hot path makes no copy of a credits consumption. Callers hold s.mu.
func (s *Store) putConsumption(c *entitlement.Consumption) {
	stored := c
	if c.RemainingAfter != nil {
		rem := *c.RemainingAfter
		stored.RemainingAfter = &rem
	}
	s.consumptions[c.ID] = stored
	k := consumptionKey{c.AgentID, c.IdempotencyKey}
	u := s.keys[k]
	u.consumption = stored
	s.keys[k] = u
	a := s.agent(c.AgentID)
	a.consumptions = insertSorted(a.consumptions, stored, consumptionPos)
	if c.WalletID != "" { // a wallet's consumptions are its members' charges to it
		w := s.agent(c.WalletID)
		w.consumptions = insertSorted(w.consumptions, stored, consumptionPos)
	}
}

// putHold stores and indexes a copy of h, a new hold. Callers hold s.mu.
func (s *Store) putHold(h *entitlement.Hold) {
	stored := copyHold(h)
	s.holds[h.ID] = &stored
	s.keys[consumptionKey{h.AgentID, h.IdempotencyKey}] = use{hold: &stored}
}

// copyConsumption returns a copy of c that shares nothing with it
// (charge.Record.Clone).
func copyConsumption(c *entitlement.Consumption) entitlement.Consumption {
	return *(&charge.Record{Cons: c}).Clone().Cons
}

// copyHold returns a copy of h that shares nothing with it.
func copyHold(h *entitlement.Hold) entitlement.Hold { return *(&charge.Record{Hold: h}).Clone().Hold }
