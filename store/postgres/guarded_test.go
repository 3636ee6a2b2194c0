package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// twoInstances returns two stores on one fresh, migrated schema.
func twoInstances(t *testing.T) (a, b *Store) {
	t.Helper()
	cfg := pgtest.Schema(t)
	pool := pgtest.Open(t, cfg, 2)
	if _, err := pgmigrate.Up(t.Context(), pool, Migrations); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	pool.Close()
	a, b = New(pgtest.Open(t, cfg, 4)), New(pgtest.Open(t, cfg, 4))
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

func usd(c int64) *money.Money { return &money.Money{Cents: c, Currency: "USD"} }

// TestGuardedConsume: a consume alone writes without locks, guarded by the
// entitlement's row version. When another instance changes the entitlement
// between its read and its write, the write fails whole and the consume is
// charged again under the row's lock, on what the other instance left; a
// key the other instance took meanwhile is answered as a conflict.
func TestGuardedConsume(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// between runs on the other instance after the guarded read
		between func(t *testing.T, other *Store)
		key     string
		want    store.Outcome
		balance int64 // cents left after both
		charges int   // consumptions stored
	}{
		{"no change between", func(*testing.T, *Store) {}, "k1", store.Consumed, 90, 1},
		{"charged between", func(t *testing.T, other *Store) {
			consume(t, other, "k2", 5, store.Consumed)
		}, "k1", store.Consumed, 85, 2},
		{"same key charged between", func(t *testing.T, other *Store) {
			consume(t, other, "k1", 5, store.Consumed)
		}, "k1", store.Conflict, 95, 1},
		{"revoked between", func(t *testing.T, other *Store) {
			if _, err := other.RevokeEntitlement(ctx, "e"); err != nil {
				t.Fatal(err)
			}
		}, "k1", store.Denied, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, other := twoInstances(t)
			grant(t, s, "e", 100)
			writes := 0
			s.beforeGuardedWrite = func() {
				if writes++; writes == 1 {
					tc.between(t, other)
				}
			}
			consume(t, s, tc.key, 10, tc.want)
			if writes != 1 {
				t.Errorf("the guarded write was reached %d times, want 1", writes)
			}
			e, err := s.GetEntitlement(ctx, "e")
			if err != nil {
				t.Fatal(err)
			}
			if e.Credits.Balance.Cents != tc.balance {
				t.Errorf("balance %d cents, want %d", e.Credits.Balance.Cents, tc.balance)
			}
			cs, _, err := s.ListConsumptions(ctx, "a", time.Time{}, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != tc.charges {
				t.Errorf("%d consumptions stored, want %d", len(cs), tc.charges)
			}
		})
	}
}

// TestGuardedConsume_Remembered: an agent's next consume on an instance is
// decided on what its last charge there wrote, without a read, and written
// only while that is still so. Each change another instance makes meanwhile
// fails the guard and the consume is decided again on a fresh read.
func TestGuardedConsume_Remembered(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		between func(t *testing.T, other *Store) // after the first consume
		key     string
		cost    int64
		want    store.Outcome
		writes  int   // guarded writes the second consume reached
		balance int64 // cents left on e
	}{
		{"nothing between: one statement", func(*testing.T, *Store) {}, "k2", 10, store.Consumed, 1, 80},
		{"charged between", func(t *testing.T, other *Store) {
			consume(t, other, "o1", 5, store.Consumed)
		}, "k2", 10, store.Consumed, 2, 75},
		{"its key used between", func(t *testing.T, other *Store) {
			consume(t, other, "k2", 10, store.Consumed)
		}, "k2", 10, store.Replay, 1, 80},
		{"account limit set between", func(t *testing.T, other *Store) {
			if _, err := other.SetAccountLimits(ctx, "a", entitlement.AccountLimits{MaxPerCall: []money.Money{*usd(5)}}); err != nil {
				t.Fatal(err)
			}
		}, "k2", 10, store.Denied, 1, 90},
		{"made a wallet's member between", func(t *testing.T, other *Store) {
			if _, err := other.UpsertAccount(ctx, entitlement.Account{AgentID: "w", Kind: entitlement.KindWallet}); err != nil {
				t.Fatal(err)
			}
			if _, err := other.CreateEntitlement(ctx, entitlement.Entitlement{ID: "we", AgentID: "w", Type: entitlement.TypeCredits,
				Scope: entitlement.Scope{Service: "s"}, Status: entitlement.StatusActive, CreatedAt: time.Now(),
				Credits: entitlement.Credits{Balance: *usd(100), Granted: *usd(100)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := other.AddMember(ctx, entitlement.Membership{WalletID: "w", MemberID: "a", Order: entitlement.OrderWalletFirst}); err != nil {
				t.Fatal(err)
			}
		}, "k2", 10, store.Consumed, 1, 90}, // charged to the wallet, first
		{"entitlement granted between", func(t *testing.T, other *Store) {
			grant(t, other, "f", 100)
		}, "k2", 10, store.Consumed, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, other := twoInstances(t)
			grant(t, s, "e", 100)
			consume(t, s, "k1", 10, store.Consumed)
			tc.between(t, other)
			writes := 0
			s.beforeGuardedWrite = func() { writes++ }
			consume(t, s, tc.key, tc.cost, tc.want)
			if writes != tc.writes {
				t.Errorf("guarded writes %d, want %d", writes, tc.writes)
			}
			if tc.balance < 0 { // two entitlements: the total is what counts
				left := 0
				for _, id := range []string{"e", "f"} {
					e, err := s.GetEntitlement(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					left += int(e.Credits.Balance.Cents)
				}
				if left != 180 {
					t.Errorf("balances hold %d cents, want 180", left)
				}
				return
			}
			e, err := s.GetEntitlement(ctx, "e")
			if err != nil {
				t.Fatal(err)
			}
			if e.Credits.Balance.Cents != tc.balance {
				t.Errorf("balance %d cents, want %d", e.Credits.Balance.Cents, tc.balance)
			}
		})
	}
}

// TestGuardedConsume_SubscriptionLocked: a charge that leaves the row as
// it is (a subscription's) is not guarded: it takes the row's lock.
func TestGuardedConsume_SubscriptionLocked(t *testing.T) {
	ctx := context.Background()
	s, _ := twoInstances(t)
	if _, err := s.CreateEntitlement(ctx, entitlement.Entitlement{ID: "e", AgentID: "a", Type: entitlement.TypeSubscription,
		Scope: entitlement.Scope{Service: "s"}, Status: entitlement.StatusActive, CreatedAt: time.Now(),
		Subscription: entitlement.Subscription{ValidFrom: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	s.beforeGuardedWrite = func() { t.Error("a subscription's charge was written guarded") }
	consume(t, s, "k1", 0, store.Consumed)
	consume(t, s, "k2", 0, store.Consumed)
}

// grant gives agent a an entitlement id of cents.
func grant(t *testing.T, s *Store, id string, cents int64) {
	t.Helper()
	if _, err := s.CreateEntitlement(context.Background(), entitlement.Entitlement{ID: id, AgentID: "a", Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "s"}, Status: entitlement.StatusActive, CreatedAt: time.Now(),
		Credits: entitlement.Credits{Balance: *usd(cents), Granted: *usd(cents)}}); err != nil {
		t.Fatal(err)
	}
}

// consume charges cents (none: a call of a subscription) to agent a under
// key and checks the outcome.
func consume(t *testing.T, s *Store, key string, cents int64, want store.Outcome) {
	t.Helper()
	req := entitlement.ConsumeRequest{AgentID: "a", Service: "s", Tool: "t", IdempotencyKey: key}
	if cents > 0 {
		req.Cost = usd(cents)
	}
	r, err := s.CheckAndConsume(context.Background(), req)
	if err != nil {
		t.Fatalf("consume %s: %v", key, err)
	}
	if r.Outcome != want {
		t.Fatalf("consume %s: outcome %s, want %s", key, r.Outcome, want)
	}
}
