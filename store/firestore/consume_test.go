package firestore_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

var start = time.Date(2026, time.March, 14, 9, 26, 53, 0, time.UTC)

func fixedNow() time.Time { return start }

func usd(c int64) money.Money { return money.Money{Cents: c, Currency: "USD"} }

func createCredits(t *testing.T, s store.EntitlementStore, agent string, balance int64) entitlement.Entitlement {
	t.Helper()
	return createCreditsAs(t, s, uuid.NewString(), agent, balance)
}

// createCreditsAs creates the credits entitlement id of agent, for the
// service "search".
func createCreditsAs(t *testing.T, s store.EntitlementStore, id, agent string, balance int64) entitlement.Entitlement {
	t.Helper()
	e, err := s.CreateEntitlement(context.Background(), entitlement.Entitlement{
		ID: id, AgentID: agent, Type: entitlement.TypeCredits,
		Scope:   entitlement.Scope{Service: "search"},
		Credits: entitlement.Credits{Balance: usd(balance)},
	})
	if err != nil {
		t.Fatalf("CreateEntitlement: %v", err)
	}
	return e
}

func consumeReq(agent, key string, cents int64) entitlement.ConsumeRequest {
	c := usd(cents)
	return entitlement.ConsumeRequest{AgentID: agent, Service: "search", Tool: "web", IdempotencyKey: key, Cost: &c}
}

// consumeAll runs n consumes on s at once, the i-th with req(i), and
// returns their results and errors by i.
func consumeAll(s store.EntitlementStore, n int, req func(i int) entitlement.ConsumeRequest) ([]store.ConsumeResult, []error) {
	results, errs := make([]store.ConsumeResult, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = s.CheckAndConsume(context.Background(), req(i)) })
	}
	wg.Wait()
	return results, errs
}

// balanceOf is the balance of the credits entitlement id, in cents.
func balanceOf(t *testing.T, s store.EntitlementStore, id string) int64 {
	t.Helper()
	b, _ := balance(t, s, id)
	return b
}

// TestStore_HotEntitlement runs 64 concurrent callers with unique keys on
// one credits entitlement: every call must be consumed (none aborted, none
// denied) and the final balance must be exact.
func TestStore_HotEntitlement(t *testing.T) {
	s := newStore(t, fixedNow)
	const callers, cost = 64, 7
	e := createCredits(t, s, "agent-hot", 1000)
	results, errs := consumeAll(s, callers, func(i int) entitlement.ConsumeRequest {
		return consumeReq("agent-hot", fmt.Sprintf("k-%d", i), cost)
	})
	seen := map[string]bool{}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: CheckAndConsume: %v", i, errs[i])
		}
		if got, want := results[i].Outcome, store.Consumed; got != want {
			t.Fatalf("caller %d: outcome %q (%v), want %q", i, got, results[i].Denials, want)
		}
		after := results[i].Consumption.BalanceAfter.Cents
		if seen[fmt.Sprint(after)] {
			t.Errorf("caller %d: balanceAfter %d reported twice", i, after)
		}
		seen[fmt.Sprint(after)] = true
	}
	if got, want := balanceOf(t, s, e.ID), int64(1000-callers*cost); got != want {
		t.Errorf("balance after %d consumes of %d: got %d, want %d", callers, cost, got, want)
	}
}

// TestStore_DuplicateKeysInOneBatch sends one key from many callers at once
// (with one caller changing the parameters): exactly one is charged, the
// same-parameter ones replay it, the other conflicts.
func TestStore_DuplicateKeysInOneBatch(t *testing.T) {
	s := newStore(t, fixedNow)
	e := createCredits(t, s, "agent-dup", 100)
	const callers = 16
	results, errs := consumeAll(s, callers, func(i int) entitlement.ConsumeRequest {
		cost := int64(10)
		if i == 0 {
			cost = 11
		}
		return consumeReq("agent-dup", "same-key", cost)
	})
	count := map[store.Outcome]int{}
	var firstID string
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		count[results[i].Outcome]++
		if c := results[i].Consumption; c.ID != "" {
			if firstID == "" {
				firstID = c.ID
			} else if c.ID != firstID {
				t.Errorf("caller %d: consumption %s, want the one consumption %s", i, c.ID, firstID)
			}
		}
	}
	// Whichever parameters won, the calls with the other parameters conflict.
	wantA := map[store.Outcome]int{store.Consumed: 1, store.Replay: callers - 2, store.Conflict: 1}
	wantB := map[store.Outcome]int{store.Consumed: 1, store.Conflict: callers - 1}
	if !maps.Equal(count, wantA) && !maps.Equal(count, wantB) {
		t.Errorf("outcomes %v: want %v or %v", count, wantA, wantB)
	}
	if b := balanceOf(t, s, e.ID); b != 90 && b != 89 {
		t.Errorf("balance: got %d, want 90 or 89 (charged once)", b)
	}
}

// TestStore_BatchDeniesWithoutError: in one batch, calls that exceed the
// balance are denied with insufficient_balance while the others commit.
func TestStore_BatchDeniesWithoutError(t *testing.T) {
	s := newStore(t, fixedNow)
	e := createCredits(t, s, "agent-low", 50)
	const callers = 20
	outcomes, errs := consumeAll(s, callers, func(i int) entitlement.ConsumeRequest {
		req := consumeReq("agent-low", fmt.Sprintf("k-%d", i), 10)
		req.EntitlementID = e.ID
		return req
	})
	consumed := 0
	for i, r := range outcomes {
		if errs[i] != nil {
			t.Errorf("caller %d: %v", i, errs[i])
		}
		switch r.Outcome {
		case store.Consumed:
			consumed++
		case store.Denied:
			if len(r.Denials) != 1 || r.Denials[0].Reason != entitlement.ReasonInsufficientBalance {
				t.Errorf("caller %d: denials %v, want one insufficient_balance", i, r.Denials)
			}
		default:
			t.Errorf("caller %d: outcome %q", i, r.Outcome)
		}
	}
	if consumed != 5 {
		t.Errorf("consumed %d calls of 10 from 50, want 5", consumed)
	}
}

// TestStore_ManyInstances shares one entitlement between four stores on
// one database, as four Stipend instances would: contention between them
// is retried, never surfaced.
func TestStore_ManyInstances(t *testing.T) {
	client := emulator.Client(t)
	prefix := emulator.Prefix(t)
	var stores []store.EntitlementStore
	for range 4 {
		stores = append(stores, fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(fixedNow)))
	}
	e := createCredits(t, stores[0], "agent-multi", 10_000)
	const perStore = 8
	var wg sync.WaitGroup
	for si, s := range stores {
		for i := range perStore {
			wg.Go(func() {
				res, err := s.CheckAndConsume(context.Background(), consumeReq("agent-multi", fmt.Sprintf("s%d-%d", si, i), 3))
				if err != nil {
					t.Errorf("store %d caller %d: %v", si, i, err)
				} else if res.Outcome != store.Consumed {
					t.Errorf("store %d caller %d: outcome %q, want consumed", si, i, res.Outcome)
				}
			})
		}
	}
	wg.Wait()
	got, err := stores[3].GetEntitlement(context.Background(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := got.Credits.Balance.Cents, int64(10_000-4*perStore*3); got != want {
		t.Errorf("balance: got %d, want %d", got, want)
	}
}
