package conformance

import (
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// holdLife is one hold of a round: as it ended, and the steps that tried to end it.
type holdLife struct {
	final            entitlement.Hold
	captures, drops  []*holdOp
	capturedBy       *holdOp // the capture that won
	releasedByAnswer bool
}

// checkHolds checks that every hold ended exactly once, in the way the
// answers of its captures and releases say, and returns the holds by ID.
func (r *holdRound) checkHolds() map[string]*holdLife {
	holds := map[string]*holdLife{}
	for c := range r.ops {
		for i := range r.ops[c] {
			op := &r.ops[c][i]
			id := op.held.Hold.ID
			if op.kind != opHold || id == "" {
				continue
			}
			life := holds[id]
			if life == nil {
				final, err := r.s.GetHold(r.t.Context(), id)
				if err != nil {
					r.errorf("GetHold(%s): %v", id, err)
					continue
				}
				life = &holdLife{final: final}
				holds[id] = life
			}
			switch op.end {
			case opCapture:
				life.captures = append(life.captures, op)
			case opRelease:
				life.drops = append(life.drops, op)
			}
		}
	}
	expired := 0
	for id, life := range holds {
		h := life.final
		if h.Status == entitlement.HoldExpired {
			expired++
		}
		if h.EndedAt == nil || h.Status == entitlement.HoldOpen || (h.Status == entitlement.HoldExpired && !h.EndedAt.Equal(h.ExpiresAt)) {
			r.errorf("hold %s ended %s at %v (expires %v): want captured, released or expired, and expired at its expiry", id, h.Status, h.EndedAt, h.ExpiresAt)
		}
		r.checkEnds(id, life)
	}
	if r.swept > expired {
		r.errorf("ExpireHolds reported %d holds ended, but only %d holds expired: a hold was ended twice", r.swept, expired)
	}
	return holds
}

// checkEnds checks the answers of the captures and releases of one hold
// against how it ended.
func (r *holdRound) checkEnds(id string, life *holdLife) {
	h := life.final
	won := map[store.Outcome]int{}
	for _, op := range append(life.captures, life.drops...) {
		if op.endErr == nil {
			won[op.ended.Outcome]++
		}
	}
	if won[store.Captured] > 1 || won[store.Released] > 1 || won[store.Captured]+won[store.Released] > 1 {
		r.errorf("hold %s: %d captures and %d releases won, want at most one in all", id, won[store.Captured], won[store.Released])
	}
	for _, op := range life.captures {
		want, _ := h.Settle(op.amount)
		switch {
		case h.Status == entitlement.HoldCaptured && h.Captured != nil && *h.Captured == want:
			if op.endErr != nil || (op.ended.Outcome != store.Captured && op.ended.Outcome != store.Replay) || op.ended.Consumption.ID != h.ConsumptionID {
				r.errorf("hold %s captured %+v, but a capture of that amount answered %s %v (consumption %q, want %q)", id, want, op.ended.Outcome, op.endErr, op.ended.Consumption.ID, h.ConsumptionID)
			}
			if op.ended.Outcome == store.Captured {
				life.capturedBy = op
			}
		case store.CodeOf(op.endErr) != store.CodeConflict:
			r.errorf("hold %s ended %s (captured %+v), but a capture of %+v answered %s, %v; want a conflict", id, h.Status, h.Captured, want, op.ended.Outcome, op.endErr)
		}
	}
	if h.Status == entitlement.HoldCaptured && (life.capturedBy == nil || h.ConsumptionID == "") {
		r.errorf("hold %s is captured (consumption %q), but no capture answered captured", id, h.ConsumptionID)
	}
	for _, op := range life.drops {
		switch h.Status {
		case entitlement.HoldCaptured:
			if store.CodeOf(op.endErr) != store.CodeConflict {
				r.errorf("hold %s is captured, but a release answered %s, %v; want a conflict", id, op.ended.Outcome, op.endErr)
			}
		default:
			if op.endErr != nil || (op.ended.Outcome != store.Released && op.ended.Outcome != store.Replay) || op.ended.Hold.ID != id {
				r.errorf("hold %s ended %s, but a release answered %s, %v", id, h.Status, op.ended.Outcome, op.endErr)
			}
			life.releasedByAnswer = life.releasedByAnswer || op.ended.Outcome == store.Released
		}
	}
	if (h.Status == entitlement.HoldReleased) != life.releasedByAnswer {
		r.errorf("hold %s ended %s, but a release answered released: %v", id, h.Status, life.releasedByAnswer)
	}
}

// checkKeys checks that each key made at most one call (a consume or a
// hold) and that every other answer with it agrees.
func (r *holdRound) checkKeys() {
	byKey := map[callKey][]*holdOp{}
	for c := range r.ops {
		for i := range r.ops[c] {
			if op := &r.ops[c][i]; op.kind == opConsume || op.kind == opHold {
				byKey[op.key()] = append(byKey[op.key()], op)
			}
		}
	}
	for k, ops := range byKey {
		var first *holdOp
		for _, op := range ops {
			if op.held.Outcome == store.Held || op.consumed.Outcome == store.Consumed {
				if first != nil {
					r.errorf("key %s/%s made two calls", k.agent, k.key)
				}
				first = op
			}
		}
		for _, op := range ops {
			outcome := op.consumed.Outcome
			if op.kind == opHold {
				outcome = op.held.Outcome
			}
			same := first != nil && first.kind == op.kind && op.fingerprint() == first.fingerprint()
			switch {
			case outcome == store.Replay && !same:
				r.errorf("%s/%s: replay, but the call made with the key was another", k.agent, k.key)
			case outcome == store.Replay && op.kind == opHold && op.held.Hold.ID != first.held.Hold.ID,
				outcome == store.Replay && op.kind == opConsume && op.consumed.Consumption.ID != first.consumed.Consumption.ID:
				r.errorf("%s/%s: the replay answered another hold or consumption than the call made", k.agent, k.key)
			case outcome == store.Conflict && (first == nil || same):
				r.errorf("%s/%s: conflict, but the call made with the key (if any) was this one", k.agent, k.key)
			}
		}
	}
}

// request is the consume request of a consume step, or the one a hold step embeds.
func (op *holdOp) request() *entitlement.ConsumeRequest {
	if op.kind == opHold {
		return &op.hold.ConsumeRequest
	}
	return &op.consume
}

func (op *holdOp) key() callKey { return callKey{op.request().AgentID, op.request().IdempotencyKey} }

// fingerprint is the fingerprint of the step's request.
func (op *holdOp) fingerprint() string {
	if op.kind == opHold {
		return op.hold.Fingerprint()
	}
	return op.consume.Fingerprint()
}

// checkCharges compares the stored consumptions with the consumes and
// captures that answered, and the balances with what was charged: initial −
// final = Σ consumes + Σ captures, nothing held once every hold ended.
func (r *holdRound) checkCharges(holds map[string]*holdLife) {
	consumed := map[callKey]*holdOp{}
	for c := range r.ops {
		for i := range r.ops[c] {
			if op := &r.ops[c][i]; op.consumed.Outcome == store.Consumed {
				consumed[callKey{op.consume.AgentID, op.consume.IdempotencyKey}] = op
			}
		}
	}
	charged := map[string]int64{}
	seen := map[string]bool{}
	for _, agent := range r.agents {
		for _, c := range listConsumptionPages(r.t, r.s, agent, time.Time{}, store.MaxPageSize) {
			seen[c.ID] = true
			var want entitlement.Consumption
			if c.HoldID == "" {
				if op := consumed[callKey{agent, c.IdempotencyKey}]; op != nil {
					want = op.consumed.Consumption
				}
			} else if life := holds[c.HoldID]; life != nil && life.capturedBy != nil && life.final.ConsumptionID == c.ID {
				want = life.capturedBy.ended.Consumption
			}
			if d := cmpDiff(want, c); d != "" {
				r.errorf("stored consumption %s (hold %q) differs from what its call answered (-answered +stored):\n%s", c.ID, c.HoldID, d)
			}
			if c.EntitlementType == entitlement.TypeCredits {
				charged[c.EntitlementID] += c.Cost.Cents
			} else if c.EntitlementType == entitlement.TypeQuota {
				charged[c.EntitlementID] += c.Units
			}
		}
	}
	for k, op := range consumed {
		if !seen[op.consumed.Consumption.ID] {
			r.errorf("%s/%s was consumed, but its consumption is not stored", k.agent, k.key)
		}
	}
	for id, life := range holds {
		if life.final.Status == entitlement.HoldCaptured && !seen[life.final.ConsumptionID] {
			r.errorf("hold %s was captured, but its consumption %s is not stored", id, life.final.ConsumptionID)
		}
	}
	for _, initial := range r.ents {
		final := getEntitlement(r.t, r.s, initial.ID)
		r.checkAvailable(final, "after the round")
		lost := initial.Credits.Balance.Cents - final.Credits.Balance.Cents
		if initial.Type == entitlement.TypeQuota {
			lost = initial.Quota.Remaining - final.Quota.Remaining
		}
		if lost != charged[initial.ID] || heldOf(final) != 0 {
			r.errorf("entitlement %s lost %d, but its consumptions charged %d (held %d, want 0)", initial.ID, lost, charged[initial.ID], heldOf(final))
		}
	}
}

// checkHoldReplays sends a few holds again as they were made, and their
// captures and releases: each answers Replay with the hold as it ended.
func (r *holdRound) checkHoldReplays(holds map[string]*holdLife) {
	n := 0
	for c := range r.ops {
		for i := range r.ops[c] {
			op := &r.ops[c][i]
			if op.held.Outcome != store.Held || n >= 8 {
				continue
			}
			n++
			life := holds[op.held.Hold.ID]
			res, err := r.s.Authorize(r.t.Context(), op.hold)
			if err != nil || res.Outcome != store.Replay || cmpDiff(life.final, res.Hold) != "" {
				r.errorf("resending hold %s = %s %+v, %v; want a replay of %+v", op.held.Hold.ID, res.Outcome, res.Hold, err, life.final)
			}
			switch life.final.Status {
			case entitlement.HoldCaptured:
				again, err := r.s.CaptureHold(r.t.Context(), life.final.ID, life.final.AgentID, life.capturedBy.amount)
				if err != nil || again.Outcome != store.Replay || cmpDiff(life.capturedBy.ended.Consumption, again.Consumption) != "" {
					r.errorf("capturing hold %s again = %s, %v; want a replay of consumption %s", life.final.ID, again.Outcome, err, life.final.ConsumptionID)
				}
			default:
				again, err := r.s.ReleaseHold(r.t.Context(), life.final.ID, life.final.AgentID)
				if d := cmpDiff(life.final, again.Hold); err != nil || again.Outcome != store.Replay || d != "" {
					r.errorf("releasing hold %s (%s) again = %s, %v; want a replay of the hold as it ended (-ended +replayed):\n%s", life.final.ID, life.final.Status, again.Outcome, err, d)
				}
			}
		}
	}
}
