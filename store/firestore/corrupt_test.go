package firestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// corrupt writes value, which Stipend never stores, at field of the
// document prefix+collection/id, and returns a check that an error is
// Internal and names that document and named (the field, or the part of it
// the reader meets first).
func corrupt(t *testing.T, client *firestore.Client, prefix, collection, id, field, named string, value any) func(call string, err error) {
	t.Helper()
	ref := client.Collection(prefix + collection).Doc(id)
	if _, err := ref.Update(context.Background(), []firestore.Update{{Path: field, Value: value}}); err != nil {
		t.Fatalf("corrupting %s: %v", field, err)
	}
	wantPath := prefix + collection + "/" + id
	return func(call string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrInternal) {
			t.Fatalf("%s on a corrupt %s: got %v, want an internal error", call, field, err)
		}
		if msg := err.Error(); !strings.Contains(msg, wantPath) || !strings.Contains(msg, named) {
			t.Errorf("%s: error %q does not name the document %s and field %s", call, msg, wantPath, named)
		}
	}
}

// corruptible returns a store on the emulator, its client and collection
// prefix, and a credits entitlement of 1000 cents to corrupt.
func corruptible(t *testing.T) (*fsstore.Store, *firestore.Client, string, entitlement.Entitlement) {
	t.Helper()
	client, prefix := emulator.Client(t), emulator.Prefix(t)
	s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(fixedNow))
	return s, client, prefix, createCredits(t, s, "agent-corrupt", 1000)
}

// TestStore_CorruptAmount writes stored amounts that Stipend never writes
// and checks that reading them fails loudly: an Internal error naming the
// document and the field, never a rounded number.
func TestStore_CorruptAmount(t *testing.T) {
	tests := []struct {
		name  string
		field string
		value any
	}{
		{"FloatCents", "credits.balance.cents", 1500.5},
		{"WholeFloatCents", "credits.balance.cents", 1500.0},
		{"BeyondMaxCents", "credits.balance.cents", int64(1) << 53},
		{"BelowMinusMaxCents", "credits.granted.cents", -(int64(1) << 53)},
		{"StringCents", "credits.balance.cents", "1500"},
		{"BadCurrency", "credits.balance.currency", "usd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, client, prefix, e := corruptible(t)
			// Find the stored document through the agent's list, then corrupt it.
			snaps, err := client.Collection(prefix + "entitlements").Documents(ctx).GetAll()
			if err != nil || len(snaps) != 1 {
				t.Fatalf("reading back the entitlement: %d documents, %v", len(snaps), err)
			}
			check := corrupt(t, client, prefix, "entitlements", snaps[0].Ref.ID, tc.field, tc.field, tc.value)
			_, err = s.GetEntitlement(ctx, e.ID)
			check("GetEntitlement", err)
			_, _, err = s.ListEntitlements(ctx, "agent-corrupt", store.EntitlementFilter{}, store.Page{})
			check("ListEntitlements", err)
			req := consumeReq("agent-corrupt", "k1", 10)
			req.EntitlementID = e.ID
			_, err = s.CheckAndConsume(ctx, req)
			check("CheckAndConsume", err)
		})
	}
}

// TestStore_CorruptControls: spend controls or alerts stored in a shape
// Stipend never writes fail every read with an Internal error naming the
// document and the field, never a guess.
func TestStore_CorruptControls(t *testing.T) {
	tests := []struct {
		name, field string
		value       any
	}{
		{"FloatSpent", "limits.spend.spent.cents", 10.5},
		{"StringPeriod", "limits.spend.period", 7},
		{"UnknownPeriod", "limits.spend.period", "year"},
		{"AlertsNotAnArray", "alerts", "low"},
		{"StringPercent", "alerts", []any{map[string]any{"percent": "10"}}},
		{"NoThreshold", "alerts", []any{map[string]any{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, client, prefix, e := corruptible(t)
			usd := money.Money{Cents: 100, Currency: "USD"}
			_, err := s.UpdateEntitlement(ctx, e.ID, entitlement.Update{
				SpendLimit: &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usd}},
				Alerts:     &entitlement.Set[[]entitlement.Alert]{To: []entitlement.Alert{{Percent: new(int64(10))}}},
			})
			if err != nil {
				t.Fatalf("UpdateEntitlement: %v", err)
			}
			check := corrupt(t, client, prefix, "entitlements", e.ID, tc.field, tc.field, tc.value)
			_, err = s.GetEntitlement(ctx, e.ID)
			check("GetEntitlement", err)
		})
	}
}

// TestStore_CorruptHold: a hold document or an entitlement's registry with
// a value Stipend never writes fails every read with an Internal error
// naming the document and the field.
func TestStore_CorruptHold(t *testing.T) {
	tests := []struct {
		name, collection, field string
		value                   any
	}{
		{"UnknownStatus", "consumptions", "hold.status", "pending"},
		{"FloatMaxUnits", "consumptions", "hold.maxUnits", 1.0},
		{"CapturedWithoutCharge", "consumptions", "hold.status", "captured"},
		{"FloatRegistryAmount", "entitlements", "holds", []any{map[string]any{"id": "x", "amount": 1.5, "expiresAt": fixedNow()}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			e := createCredits(t, f.s, "agent-corrupt", 1000)
			h := authorize(t, f.s, holdReq("agent-corrupt", "k1", 10, time.Minute, e.ID))
			id := h.ID
			if tc.collection == "entitlements" {
				id = e.ID
			}
			field, _, _ := strings.Cut(tc.field, ".")
			check := corrupt(t, f.raw, f.prefix, tc.collection, id, tc.field, field, tc.value)
			if tc.collection == "entitlements" {
				_, err := f.s.GetEntitlement(ctx, e.ID)
				check("GetEntitlement", err)
			} else {
				_, err := f.s.GetHold(ctx, h.ID)
				check("GetHold", err)
			}
			_, err := fsstore.New(f.raw, fsstore.WithCollectionPrefix(f.prefix), fsstore.WithClock(f.clock.Now)).
				CaptureHold(ctx, h.ID, "agent-corrupt", entitlement.Amount{})
			check("CaptureHold", err)
		})
	}
}
