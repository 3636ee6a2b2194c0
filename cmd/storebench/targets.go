package main

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/loadgen"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/store/memory"
)

// The paths a row of the table measures.
const (
	pathBare      = "bare UPDATE … RETURNING"
	pathCoalesced = "consume"
	pathRowLocks  = "consume, row locks (batch 1)"
	pathHolds     = "authorize + capture"
)

const cost = 1 // cents per call

// target is one store to measure. open returns n instances sharing one
// fresh backing store (a schema, a collection prefix) and a function that
// releases them.
type target struct {
	store, path string
	open        func(n int) ([]store.EntitlementStore, func(), error)
	holds       bool // each call is an authorize and a capture, not a consume
}

// storeScenarios runs the three shapes on t: one caller alone, callers on
// one entitlement, callers spread over c.entitlements.
func storeScenarios(ctx context.Context, c config, t target) ([]result, error) {
	var out []result
	for _, sh := range []struct{ callers, ents, calls int }{{1, 1, c.baseline}, {c.callers, 1, c.calls}, {c.callers, c.entitlements, c.calls}} {
		r, err := scenario(ctx, c, t, 1, sh.callers, sh.ents, sh.calls)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// scenario runs calls calls from callers goroutines on ents fresh credits
// entitlements, spread over instances instances of t (call i goes to
// instance i mod instances), and checks every balance against the stored
// consumptions afterwards.
func scenario(ctx context.Context, c config, t target, instances, callers, ents, calls int) (result, error) {
	stores, release, err := t.open(instances)
	if err != nil {
		return result{}, err
	}
	defer release()
	agent := "bench-" + uuid.NewString()[:8]
	initial := int64(calls*cost + 1000)
	ids := make([]string, ents)
	for i := range ids {
		e, err := stores[0].CreateEntitlement(ctx, entitlement.Entitlement{
			ID: uuid.NewString(), AgentID: agent, Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "bench"},
			Credits: entitlement.Credits{Balance: money.Money{Cents: initial, Currency: "USD"}, Granted: money.Money{Cents: initial, Currency: "USD"}},
		})
		if err != nil {
			return result{}, err
		}
		ids[i] = e.ID
	}
	name := t.store
	if instances > 1 {
		name = fmt.Sprintf("%s, %d instances", t.store, instances)
	}
	r := result{store: name, path: t.path, callers: callers, ents: ents, want: calls}
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	l := loadgen.Drive(runCtx, callers, calls, func(ctx context.Context, i int) error {
		s, req := stores[i%instances], request(agent, ids[i%ents], fmt.Sprintf("k-%d", i))
		if t.holds {
			return authorizeCapture(ctx, s, req)
		}
		res, err := s.CheckAndConsume(ctx, req)
		if err == nil && res.Outcome != store.Consumed {
			err = fmt.Errorf("outcome %s %v", res.Outcome, res.Denials)
		}
		return err
	})
	r.ok, r.failed, r.wall, r.latencies, r.firstErr = l.OK, l.Failed, l.Wall, l.Latencies, l.FirstErr
	r.balance, err = loadgen.CheckBalances(ctx, stores[0], agent, ids, initial)
	return r, err
}

func request(agent, ent, key string) entitlement.ConsumeRequest {
	m := money.Money{Cents: cost, Currency: "USD"}
	return entitlement.ConsumeRequest{AgentID: agent, Service: "bench", Tool: "call", IdempotencyKey: key, Cost: &m, EntitlementID: ent}
}

// authorizeCapture is the gate's default path for one tool call: hold the
// price, then capture it.
func authorizeCapture(ctx context.Context, s store.EntitlementStore, req entitlement.ConsumeRequest) error {
	h, err := s.Authorize(ctx, entitlement.HoldRequest{ConsumeRequest: req})
	if err != nil {
		return err
	}
	if h.Outcome != store.Held {
		return fmt.Errorf("authorize: outcome %s %v", h.Outcome, h.Denials)
	}
	c, err := s.CaptureHold(ctx, h.Hold.ID, req.AgentID, entitlement.Amount{})
	if err == nil && c.Outcome != store.Captured {
		err = fmt.Errorf("capture: outcome %s", c.Outcome)
	}
	return err
}

// memoryTarget is the memory store: one instance only.
func memoryTarget() target {
	return target{store: "memory", path: pathCoalesced, open: func(n int) ([]store.EntitlementStore, func(), error) {
		return []store.EntitlementStore{memory.New()}, func() {}, nil
	}}
}

// firestoreTarget is the Firestore store on the emulator (the client
// reads FIRESTORE_EMULATOR_HOST); each scenario gets a collection prefix
// of its own.
func firestoreTarget(ctx context.Context) (target, func(), error) {
	client, err := firestore.NewClient(ctx, "stipend-bench")
	if err != nil {
		return target{}, nil, err
	}
	t := target{store: "firestore emulator", path: pathCoalesced, open: func(n int) ([]store.EntitlementStore, func(), error) {
		prefix := "bench" + uuid.NewString()[:8] + "_"
		out := make([]store.EntitlementStore, n)
		for i := range out {
			out[i] = fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
		}
		return out, func() {}, nil
	}}
	return t, func() { _ = client.Close() }, nil
}
