package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
)

var fixedNow = func() time.Time { return time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC) }

func usd(cents int64) money.Money { return money.Money{Cents: cents, Currency: "USD"} }

// createCredits creates an active credits entitlement of cents USD.
func createCredits(t *testing.T, s store.EntitlementStore, agentID string, cents int64) entitlement.Entitlement {
	t.Helper()
	e, err := s.CreateEntitlement(t.Context(), entitlement.Entitlement{
		ID: uuid.NewString(), AgentID: agentID, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "search"}, Credits: entitlement.Credits{Balance: usd(cents)},
	})
	if err != nil {
		t.Fatalf("CreateEntitlement: %v", err)
	}
	return e
}

// TestSchema_RefusesAmountsBeyondTheCeiling checks the schema's own guard:
// the cents domain refuses what money refuses, so no bug writes it.
func TestSchema_RefusesAmountsBeyondTheCeiling(t *testing.T) {
	cfg := migrated(t)
	pool := pgtest.Open(t, cfg, 1)
	s := postgres.New(pool, postgres.WithClock(fixedNow))
	e := createCredits(t, s, "agent-ceiling", 1000)
	for _, cents := range []int64{money.MaxCents + 1, -money.MaxCents - 1} {
		_, err := pool.Exec(t.Context(), `UPDATE entitlements SET balance_cents = $1 WHERE id = $2`, cents, e.ID)
		if got := pgfault.State(err); got != "23514" {
			t.Errorf("UPDATE balance_cents = %d: got %v (SQLSTATE %q), want a check violation (23514)", cents, err, got)
		}
	}
	if _, err := pool.Exec(t.Context(), `UPDATE entitlements SET balance_cents = $1 WHERE id = $2`, money.MaxCents, e.ID); err != nil {
		t.Errorf("UPDATE balance_cents = MaxCents: %v, want it stored", err)
	}
}

// TestStore_CorruptRow writes rows Stipend never writes (with the schema's
// guards lifted, as a hand edit or a restore of another version could)
// and checks that reading them fails loudly: an Internal error naming the
// table, the row and the column, never a rounded or defaulted value.
func TestStore_CorruptRow(t *testing.T) {
	tests := []struct {
		name, column, set string
		arg               any
	}{
		{"BeyondMaxCents", "balance_cents", "balance_cents = $1", money.MaxCents + 1},
		{"BelowMinusMaxCents", "granted_cents", "granted_cents = $1", -money.MaxCents - 1},
		{"NegativeBalance", "balance_cents", "balance_cents = $1", int64(-5)},
		{"BadCurrency", "balance_cents", "balance_currency = $1", "usd"},
		{"UnknownType", "type", "type = $1", "coupon"},
		{"FractionalHold", "holds", "holds = $1::jsonb", `[{"id":"h1","amount":1.5,"expiresAt":"2026-03-14T09:30:00Z"}]`},
		{"HoldBeyondMaxCents", "holds", "holds = $1::jsonb", `[{"id":"h1","amount":9007199254740992,"expiresAt":"2026-03-14T09:30:00Z"}]`},
		{"MetadataNotStrings", "metadata", "metadata = $1::jsonb", `{"plan":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := migrated(t)
			pool := pgtest.Open(t, cfg, 2)
			s := postgres.New(pool, postgres.WithClock(fixedNow))
			e := createCredits(t, s, "agent-corrupt", 1000)
			for _, lift := range []string{
				`ALTER DOMAIN cents DROP CONSTRAINT cents_check`,
				`ALTER DOMAIN currency DROP CONSTRAINT currency_check`,
				`ALTER TABLE entitlements DROP CONSTRAINT entitlements_type_check`,
			} {
				if _, err := pool.Exec(ctx, lift); err != nil {
					t.Fatalf("%s: %v", lift, err)
				}
			}
			if _, err := pool.Exec(ctx, `UPDATE entitlements SET `+tc.set+` WHERE id = '`+e.ID+`'`, tc.arg); err != nil {
				t.Fatalf("corrupting %s: %v", tc.column, err)
			}
			want := "entitlements/" + e.ID
			check := func(call string, err error) {
				t.Helper()
				if !errors.Is(err, store.ErrInternal) {
					t.Fatalf("%s on a corrupt row: got %v, want an internal error", call, err)
				}
				if msg := err.Error(); !strings.Contains(msg, "corrupt row "+want) || !strings.Contains(msg, tc.column) {
					t.Errorf("%s: error %q does not name the row %s and column %s", call, msg, want, tc.column)
				}
			}
			_, err := s.GetEntitlement(ctx, e.ID)
			check("GetEntitlement", err)
			_, _, err = s.ListEntitlements(ctx, "agent-corrupt", store.EntitlementFilter{}, store.Page{})
			check("ListEntitlements", err)
			_, err = s.CheckAndConsume(ctx, entitlement.ConsumeRequest{
				AgentID: "agent-corrupt", Service: "search", Tool: "query", IdempotencyKey: "k1", Cost: new(usd(10)), EntitlementID: e.ID,
			})
			check("CheckAndConsume", err)
		})
	}
}
