// Package charge is the consume path both stores share: the candidate rules
// of EntitlementStore.CheckAndConsume and Check, written once on top of the
// lookups and the one atomic step each adapter provides (Charger). Only the
// adapters under store/ import it; callers use the store.EntitlementStore
// contract.
package charge

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// Charger is the part of an adapter that Consume and Check build on. It
// keeps the candidate-selection rules of CheckAndConsume in one place, so the
// adapters only provide lookups and the one atomic step.
type Charger interface {
	// FindConsumption returns the consumption stored under
	// entitlement.ConsumptionKey(agentID, key), or store.ErrNotFound.
	FindConsumption(ctx context.Context, agentID, key string) (entitlement.Consumption, error)
	// ActiveEntitlements returns every active entitlement of the agent, in
	// any order, as stored (lazy resets not applied). The values may share
	// scope tools, metadata and expiry times with stored state: callers must
	// not modify those.
	ActiveEntitlements(ctx context.Context, agentID string) ([]entitlement.Entitlement, error)
	// ConsumeOne is the atomic step: inside one transaction it re-checks the
	// consumption key (Replay/Conflict), reads the entitlement (a Denied with
	// not_found if absent or owned by another agent), applies
	// entitlement.Consume, and writes the entitlement and the consumption.
	ConsumeOne(ctx context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error)
	// GetEntitlement is store.EntitlementStore.GetEntitlement.
	GetEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error)
}

// ReplayOf answers a request whose key already has consumption c: Replay if
// the parameters match, Conflict otherwise.
func ReplayOf(c entitlement.Consumption, req *entitlement.ConsumeRequest) store.ConsumeResult {
	if c.Fingerprint != req.Fingerprint() {
		return store.ConsumeResult{Outcome: store.Conflict}
	}
	return store.ConsumeResult{Outcome: store.Replay, Consumption: c}
}

// Consume implements store.EntitlementStore.CheckAndConsume on top of c.
func Consume(ctx context.Context, c Charger, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	if err := req.Normalize(); err != nil {
		return store.ConsumeResult{}, store.Wrap(store.CodeInvalid, err, "consume request")
	}
	if prior, err := c.FindConsumption(ctx, req.AgentID, req.IdempotencyKey); err == nil {
		return ReplayOf(prior, &req), nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.ConsumeResult{}, err
	}
	if req.EntitlementID != "" {
		return c.ConsumeOne(ctx, &req, req.EntitlementID)
	}
	candidates, denials, err := candidates(ctx, c, &req)
	if err != nil {
		return store.ConsumeResult{}, err
	}
	for _, e := range candidates {
		res, err := c.ConsumeOne(ctx, &req, e.ID)
		if err != nil {
			return store.ConsumeResult{}, err
		}
		if res.Outcome != store.Denied {
			return res, nil
		}
		denials = append(denials, res.Denials...)
	}
	return Denied(denials), nil
}

// Check implements store.EntitlementStore.Check on top of c at now.
func Check(ctx context.Context, c Charger, req entitlement.ConsumeRequest, now time.Time) (store.ConsumeResult, error) {
	if err := req.Normalize(); err != nil {
		return store.ConsumeResult{}, store.Wrap(store.CodeInvalid, err, "check request")
	}
	if prior, err := c.FindConsumption(ctx, req.AgentID, req.IdempotencyKey); err == nil {
		return ReplayOf(prior, &req), nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.ConsumeResult{}, err
	}
	candidates, denials, err := candidates(ctx, c, &req)
	if err != nil {
		return store.ConsumeResult{}, err
	}
	for i := range candidates {
		e := candidates[i]
		if reason := e.Check(now, &req); reason != "" {
			denials = append(denials, entitlement.Denial{EntitlementID: e.ID, Reason: reason})
			continue
		}
		// Candidates may share parts with stored state (Charger); the
		// answer shares nothing.
		return store.ConsumeResult{Outcome: store.Allowed, Entitlement: e.Clone()}, nil
	}
	return Denied(denials), nil
}

// candidates returns the agent's entitlements worth trying for req, in the
// order to try them, and the denials of those ruled out without a transaction
// (out of scope). With req.EntitlementID set, only that entitlement is
// returned, whatever its status, so the caller's check gives the exact reason.
func candidates(ctx context.Context, c Charger, req *entitlement.ConsumeRequest) ([]entitlement.Entitlement, []entitlement.Denial, error) {
	if req.EntitlementID != "" {
		e, err := c.GetEntitlement(ctx, req.EntitlementID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && e.AgentID != req.AgentID) {
			return nil, []entitlement.Denial{{EntitlementID: req.EntitlementID, Reason: entitlement.ReasonNotFound}}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return []entitlement.Entitlement{e}, nil, nil
	}
	all, err := c.ActiveEntitlements(ctx, req.AgentID)
	if err != nil {
		return nil, nil, err
	}
	ptrs := make([]*entitlement.Entitlement, len(all))
	for i := range all {
		ptrs[i] = &all[i]
	}
	ordered, denials := entitlement.Candidates(ptrs[:0:0], ptrs, req.Service, req.Tool)
	out := make([]entitlement.Entitlement, len(ordered))
	for i, e := range ordered {
		out[i] = *e
	}
	return out, denials, nil
}

// Denied is the Denied answer with every reason; an agent with no
// entitlement at all gets one not_found denial.
func Denied(d []entitlement.Denial) store.ConsumeResult {
	if len(d) == 0 {
		d = []entitlement.Denial{{Reason: entitlement.ReasonNotFound}}
	}
	return store.ConsumeResult{Outcome: store.Denied, Denials: d}
}

// DeniedBy is the Denied answer of the atomic step when the one entitlement
// it tried refused, for reason.
func DeniedBy(entitlementID string, reason entitlement.Reason) store.ConsumeResult {
	return store.ConsumeResult{Outcome: store.Denied, Denials: []entitlement.Denial{{EntitlementID: entitlementID, Reason: reason}}}
}
