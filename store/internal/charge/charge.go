// Package charge is the charge path every store shares: the candidate rules
// of EntitlementStore.CheckAndConsume, Check and Authorize, written once on
// top of the lookups and the one atomic step each adapter provides
// (Charger, charge.go), and the charge engine that applies consumes, holds,
// captures, releases, consumption refunds and hold expiry to an entitlement
// inside that step (Batch, engine.go). Only the adapters under store/
// import it; callers use the store.EntitlementStore contract.
package charge

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// Charger is the part of an adapter that Consume, Check and Authorize build
// on. It keeps the candidate-selection rules of CheckAndConsume in one place,
// so the adapters only provide lookups and the atomic steps.
type Charger interface {
	// FindKey returns what the agent's idempotency key was used for (the
	// record stored under entitlement.ConsumptionKey(agentID, key)), or
	// store.ErrNotFound.
	FindKey(ctx context.Context, agentID, key string) (Used, error)
	// ActiveEntitlements returns what a call of the agent may be charged
	// to, in one lookup: every active entitlement of the agent and of each
	// wallet it is a member of, in any order, as stored (lazy resets not
	// applied), and its memberships. The values may share scope tools,
	// metadata, expiry times and holds with stored state: callers must not
	// modify those.
	ActiveEntitlements(ctx context.Context, agentID string) (Pool, error)
	// ConsumeOne is the atomic step of a consume: inside one transaction it
	// re-checks the key (ReplayOf), reads the entitlement (a Denied with
	// not_found if absent or owned by another agent), ends its expired holds,
	// applies entitlement.Consume, and writes the entitlement and the
	// consumption.
	ConsumeOne(ctx context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error)
	// AuthorizeOne is the atomic step of a hold, as ConsumeOne but with
	// HoldReplayOf and entitlement.Authorize, writing the entitlement (with
	// its open hold) and the hold.
	AuthorizeOne(ctx context.Context, req *entitlement.HoldRequest, entitlementID string) (store.HoldResult, error)
	// GetEntitlement is store.EntitlementStore.GetEntitlement.
	GetEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error)
	// CallerAccount returns the agent's account (its account-wide limits
	// and its kind; the zero account when there is none), read outside any
	// transaction; it may run concurrently with the other lookups
	// (account.go).
	CallerAccount(ctx context.Context, agentID string) (entitlement.Account, error)
}

// Used is what an (agent, idempotency key) pair was used for: a consume
// (Consumption), or a hold (Hold.ID set; Consumption too once it was
// captured). Hold is as shown at the time of the lookup (Hold.Refresh).
type Used struct {
	Consumption entitlement.Consumption
	Hold        entitlement.Hold
}

// ReplayOf answers a consume whose key was already used: Replay with the
// consumption if it was a consume with the same parameters, Conflict
// otherwise (other parameters, or a hold).
func ReplayOf(u Used, req *entitlement.ConsumeRequest) store.ConsumeResult {
	if u.Hold.ID != "" || u.Consumption.Fingerprint != req.Fingerprint() {
		return store.ConsumeResult{Outcome: store.Conflict}
	}
	return store.ConsumeResult{Outcome: store.Replay, Consumption: u.Consumption}
}

// HoldReplayOf answers an Authorize whose key was already used: Replay with
// the hold (and its consumption, if captured) if it was a hold with the same
// parameters, Conflict otherwise.
func HoldReplayOf(u Used, req *entitlement.HoldRequest) store.HoldResult {
	if u.Hold.ID == "" || u.Hold.Fingerprint != req.Fingerprint() {
		return store.HoldResult{Outcome: store.Conflict}
	}
	return store.HoldResult{Outcome: store.Replay, Hold: u.Hold, Consumption: u.Consumption}
}

// answerFirst answers what a consume or a check answers before any
// entitlement: a request that is wrong (named what), the replay of a used
// key, the account's limits refusing it. done is false when none did.
func answerFirst(ctx context.Context, c Charger, req *entitlement.ConsumeRequest, what string) (res store.ConsumeResult, done bool, err error) {
	if err := req.Normalize(); err != nil {
		return store.ConsumeResult{}, true, store.Wrap(store.CodeInvalid, err, "%s", what)
	}
	account := readAccount(ctx, c, req.AgentID)
	if prior, err := c.FindKey(ctx, req.AgentID, req.IdempotencyKey); err == nil {
		return ReplayOf(prior, req), true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.ConsumeResult{}, true, err
	}
	if d, err := account.refuse(req); err != nil {
		return store.ConsumeResult{}, true, err
	} else if d != nil {
		return AccountDenied(d), true, nil
	}
	return store.ConsumeResult{}, false, nil
}

// Consume implements store.EntitlementStore.CheckAndConsume on top of c.
func Consume(ctx context.Context, c Charger, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	if res, done, err := answerFirst(ctx, c, &req, "consume request"); done {
		return res, err
	}
	if req.EntitlementID != "" {
		return c.ConsumeOne(ctx, &req, req.EntitlementID)
	}
	res, denials, err := first(ctx, c, &req, func(id string) (store.ConsumeResult, []entitlement.Denial, error) {
		res, err := c.ConsumeOne(ctx, &req, id)
		return res, res.Denials, err
	}, func(r store.ConsumeResult) bool { return r.Outcome != store.Denied })
	if err != nil || len(denials) == 0 {
		return res, err
	}
	return Denied(denials), nil
}

// Authorize implements store.EntitlementStore.Authorize on top of c: the
// candidates of Consume, each tried with AuthorizeOne.
func Authorize(ctx context.Context, c Charger, req entitlement.HoldRequest) (store.HoldResult, error) {
	if err := req.Normalize(); err != nil {
		return store.HoldResult{}, store.Wrap(store.CodeInvalid, err, "authorize request")
	}
	account := readAccount(ctx, c, req.AgentID)
	if prior, err := c.FindKey(ctx, req.AgentID, req.IdempotencyKey); err == nil {
		return HoldReplayOf(prior, &req), nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.HoldResult{}, err
	}
	if d, err := account.refuse(&req.ConsumeRequest); err != nil {
		return store.HoldResult{}, err
	} else if d != nil {
		return store.HoldResult{Outcome: store.Denied, Denials: d}, nil
	}
	if req.EntitlementID != "" {
		return c.AuthorizeOne(ctx, &req, req.EntitlementID)
	}
	res, denials, err := first(ctx, c, &req.ConsumeRequest, func(id string) (store.HoldResult, []entitlement.Denial, error) {
		res, err := c.AuthorizeOne(ctx, &req, id)
		return res, res.Denials, err
	}, func(r store.HoldResult) bool { return r.Outcome != store.Denied })
	if err != nil || len(denials) == 0 {
		return res, err
	}
	return store.HoldResult{Outcome: store.Denied, Denials: denied(denials)}, nil
}

// first tries req's candidates in order with try until one answers done, and
// returns that answer; if none does, it returns every denial (never empty).
func first[R any](ctx context.Context, c Charger, req *entitlement.ConsumeRequest, try func(entitlementID string) (R, []entitlement.Denial, error), done func(R) bool) (R, []entitlement.Denial, error) {
	var zero R
	candidates, _, denials, err := candidates(ctx, c, req)
	if err != nil {
		return zero, nil, err
	}
	for _, e := range candidates {
		res, d, err := try(e.ID)
		if err != nil {
			return zero, nil, err
		}
		if done(res) {
			return res, nil, nil
		}
		denials = append(denials, d...)
	}
	return zero, denied(denials), nil
}

// Check implements store.EntitlementStore.Check on top of c at now.
func Check(ctx context.Context, c Charger, req entitlement.ConsumeRequest, now time.Time) (store.ConsumeResult, error) {
	if res, done, err := answerFirst(ctx, c, &req, "check request"); done {
		return res, err
	}
	candidates, members, denials, err := candidates(ctx, c, &req)
	if err != nil {
		return store.ConsumeResult{}, err
	}
	for i := range candidates {
		// Candidates may share parts with stored state (Charger): the
		// holds an atomic step would end first are ended on a copy.
		e := candidates[i].Clone()
		e.ExpireHolds(now)
		if reason := e.Check(now, &req); reason != "" {
			denials = append(denials, entitlement.Denial{EntitlementID: e.ID, Reason: reason})
			continue
		}
		if e.AgentID != req.AgentID {
			m := members.of(e.AgentID)
			if m == nil {
				denials = append(denials, entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonNotFound})
				continue
			}
			if limit := m.Check(now, &e, &req); limit != "" {
				denials = append(denials, entitlement.MemberDenial(e.ID, req.AgentID, limit))
				continue
			}
		}
		return store.ConsumeResult{Outcome: store.Allowed, Entitlement: e}, nil
	}
	return Denied(denials), nil
}

// candidates returns the entitlements worth trying for req, in the order to
// try them (Order: the agent's own and its wallets'), the agent's
// memberships, and the denials of those ruled out without a transaction
// (out of scope). With req.EntitlementID set, only that entitlement is
// returned, whatever its status, so the caller's check gives the exact
// reason; a wallet's is the agent's to try when it is a member.
func candidates(ctx context.Context, c Charger, req *entitlement.ConsumeRequest) ([]entitlement.Entitlement, members, []entitlement.Denial, error) {
	if req.EntitlementID != "" {
		e, err := c.GetEntitlement(ctx, req.EntitlementID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil, err
		}
		var ms members
		if err == nil && e.AgentID != req.AgentID {
			pool, perr := c.ActiveEntitlements(ctx, req.AgentID)
			if perr != nil {
				return nil, nil, nil, perr
			}
			ms = pool.Members
		}
		if err != nil || (e.AgentID != req.AgentID && ms.of(e.AgentID) == nil) {
			return nil, nil, []entitlement.Denial{{EntitlementID: req.EntitlementID, Reason: entitlement.ReasonNotFound}}, nil
		}
		return []entitlement.Entitlement{e}, ms, nil, nil
	}
	pool, err := c.ActiveEntitlements(ctx, req.AgentID)
	if err != nil {
		return nil, nil, nil, err
	}
	ordered, denials := pool.Order(req.AgentID, req.Service, req.Tool)
	out := make([]entitlement.Entitlement, len(ordered))
	for i, e := range ordered {
		out[i] = *e
	}
	return out, pool.Members, denials, nil
}

// Denied is the Denied answer with every reason; an agent with no
// entitlement at all gets one not_found denial.
func Denied(d []entitlement.Denial) store.ConsumeResult {
	return store.ConsumeResult{Outcome: store.Denied, Denials: denied(d)}
}

func denied(d []entitlement.Denial) []entitlement.Denial {
	if len(d) == 0 {
		return []entitlement.Denial{{Reason: entitlement.ReasonNotFound}}
	}
	return d
}

// HoldDeniedBy is DeniedBy for AuthorizeOne.
func HoldDeniedBy(entitlementID string, reason entitlement.Reason) store.HoldResult {
	return store.HoldResult{Outcome: store.Denied, Denials: []entitlement.Denial{{EntitlementID: entitlementID, Reason: reason}}}
}

// DeniedBy is the Denied answer of the atomic step when the one entitlement
// it tried refused, for reason.
func DeniedBy(entitlementID string, reason entitlement.Reason) store.ConsumeResult {
	return store.ConsumeResult{Outcome: store.Denied, Denials: []entitlement.Denial{{EntitlementID: entitlementID, Reason: reason}}}
}
