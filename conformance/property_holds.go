package conformance

import (
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// holdRound is one round of the hold property: the population of a
// consume round (populate), concurrent callers mixing consumes, holds and
// their captures (a random amount up to the hold) and releases, ExpireHolds
// sweeps and moves of the clock, on a small pool of keys; then every hold is
// left to expire and the invariants are checked.
type holdRound struct {
	*property
	s     store.EntitlementStore
	clock *Clock

	holdKeys map[callKey]bool          // the key names a hold (else a consume)
	ttls     map[callKey]time.Duration // the TTL of a hold key
	ops      [][]holdOp                // per caller
	swept    int                       // holds ExpireHolds reported ended, in all
}

// maxHoldRoundTTL bounds the TTL of the holds of a round.
const maxHoldRoundTTL = 3 * time.Minute

// opKind is what a step of a hold round does.
type opKind int

const (
	opConsume opKind = iota + 1
	opHold
	opCapture
	opRelease
	opSweep
	opAdvance
)

// holdOp is one step of a caller and what the store answered.
type holdOp struct {
	kind    opKind
	consume entitlement.ConsumeRequest
	hold    entitlement.HoldRequest
	end     opKind // opCapture, opRelease, or 0: left to expire
	amount  entitlement.Amount
	limit   int           // of a sweep
	advance time.Duration // of a move of the clock
	look    int           // the entitlement read after the step

	consumed store.ConsumeResult
	held     store.HoldResult
	ended    store.HoldResult // the answer of the capture or release
	endErr   error
	swept    int
	err      error // of the consume, the authorize or the sweep
}

func (r *holdRound) run(maxCallers int) {
	r.t.Helper()
	r.populate(r.s, r.clock.Now())
	callers := minCallers + r.rng.IntN(maxCallers-minCallers+1)
	if r.round == 0 {
		callers = maxCallers
	}
	r.plan(callers)
	together(callers, func(c int) {
		for i := range r.ops[c] {
			r.do(&r.ops[c][i])
		}
	})
	for c := range r.ops {
		for i := range r.ops[c] {
			r.swept += r.ops[c][i].swept
		}
	}
	// Every hold left open expires now; the sweep ends the idle ones.
	r.clock.Advance(maxHoldRoundTTL)
	for range 1000 {
		var n int
		var err error
		untilServed(func() error { n, err = r.s.ExpireHolds(r.t.Context(), store.MaxPageSize); return err })
		if err != nil {
			r.errorf("ExpireHolds after the round: %v", err)
		}
		if r.swept += n; n == 0 || err != nil {
			break
		}
	}
	holds := r.checkHolds()
	r.checkKeys()
	r.checkCharges(holds)
	r.checkHoldReplays(holds)
}

// plan gives each caller its steps; keys come from a pool a third the size
// of all steps, each naming a hold or a consume with one set of
// parameters, sometimes sent with others or as the other kind.
func (r *holdRound) plan(callers int) {
	rng := r.rng
	pool := max(4, callers*callsPerCaller/3)
	r.specs = make(map[callKey]entitlement.ConsumeRequest)
	r.holdKeys, r.ttls = make(map[callKey]bool), make(map[callKey]time.Duration)
	r.ops = make([][]holdOp, callers)
	for c := range callers {
		for range callsPerCaller {
			op := holdOp{look: rng.IntN(len(r.ents))}
			switch k := rng.IntN(10); {
			case k == 0:
				op.kind, op.limit = opSweep, 1+rng.IntN(4)
			case k == 1:
				op.kind, op.advance = opAdvance, time.Duration(10+rng.IntN(50))*time.Second
			default:
				r.planCall(&op, callKey{r.agents[rng.IntN(len(r.agents))], fmt.Sprint("key-", rng.IntN(pool))})
			}
			r.ops[c] = append(r.ops[c], op)
		}
	}
}

func (r *holdRound) planCall(op *holdOp, k callKey) {
	rng := r.rng
	spec, ok := r.specs[k]
	if !ok {
		spec = r.newSpec(k)
		r.specs[k] = spec
		r.holdKeys[k] = rng.IntN(3) != 0
		r.ttls[k] = time.Duration(30+rng.IntN(int(maxHoldRoundTTL/time.Second)-30)) * time.Second
	}
	req := spec
	if rng.IntN(10) == 0 {
		req.Units++ // other parameters, same key
	}
	if asHold := r.holdKeys[k] != (rng.IntN(20) == 0); !asHold { // sometimes the key's other kind
		op.kind, op.consume = opConsume, req
		return
	}
	op.kind, op.hold = opHold, entitlement.HoldRequest{ConsumeRequest: req, TTL: r.ttls[k]}
	switch n := rng.IntN(20); {
	case n < 9:
		op.end = opCapture
		if rng.IntN(4) != 0 { // else the whole hold
			op.amount.Units = ptr(rng.Int64N(req.Units + 1))
			if req.Cost != nil {
				op.amount.Cost = &money.Money{Cents: rng.Int64N(req.Cost.Cents + 1), Currency: req.Cost.Currency}
			}
		}
	case n < 16:
		op.end = opRelease
	}
}

// do runs one step, then reads an entitlement: what is available is never
// below zero, also while callers race.
func (r *holdRound) do(op *holdOp) {
	ctx := r.t.Context()
	switch op.kind {
	case opConsume:
		op.consumed, op.err = r.s.CheckAndConsume(ctx, op.consume)
	case opHold:
		op.held, op.err = r.s.Authorize(ctx, op.hold)
		if op.err != nil || op.held.Hold.ID == "" || op.end == 0 {
			break
		}
		id, agent := op.held.Hold.ID, op.hold.AgentID
		untilServed(func() error {
			if op.end == opCapture {
				op.ended, op.endErr = r.s.CaptureHold(ctx, id, agent, op.amount)
			} else {
				op.ended, op.endErr = r.s.ReleaseHold(ctx, id, agent)
			}
			return op.endErr
		})
	case opSweep:
		untilServed(func() error { op.swept, op.err = r.s.ExpireHolds(ctx, op.limit); return op.err })
	case opAdvance:
		r.clock.Advance(op.advance)
	}
	if op.err != nil {
		r.errorf("step %s: %v", op.name(), op.err)
	}
	e, err := r.s.GetEntitlement(ctx, r.ents[op.look].ID)
	if err != nil {
		r.errorf("GetEntitlement(%s): %v", r.ents[op.look].ID, err)
		return
	}
	r.checkAvailable(e, "during the round")
}

// name says what the step did, for failure messages.
func (op *holdOp) name() string {
	switch op.kind {
	case opConsume, opHold:
		kind := map[opKind]string{opConsume: "consume", opHold: "hold"}[op.kind]
		return fmt.Sprintf("%s %s/%s", kind, op.key().agent, op.key().key)
	case opSweep:
		return fmt.Sprintf("ExpireHolds(%d)", op.limit)
	}
	return "advance " + op.advance.String()
}

// checkAvailable fails the round if e shows a balance or quota, or what is
// available of it, below zero.
func (r *holdRound) checkAvailable(e entitlement.Entitlement, when string) {
	have, held := e.Credits.Balance.Cents, e.Credits.Held.Cents
	if e.Type == entitlement.TypeQuota {
		have, held = e.Quota.Remaining, e.Quota.Held
	}
	if have < 0 || held < 0 || have-held < 0 {
		r.errorf("%s: entitlement %s shows %d with %d held: available below zero", when, e.ID, have, held)
	}
}

// untilServed calls f until it answers other than Unavailable, at most 5
// times: contention may outlast an adapter's own retries, and the calls
// given to it are safe to retry.
func untilServed(f func() error) {
	for range 5 {
		if store.CodeOf(f()) != store.CodeUnavailable {
			return
		}
	}
}
