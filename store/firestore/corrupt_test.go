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
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

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
			client := emulator.Client(t)
			prefix := emulator.Prefix(t)
			s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(fixedNow))
			e := createCredits(t, s, "agent-corrupt", 1000)
			// Find the stored document through the agent's list, then corrupt it.
			snaps, err := client.Collection(prefix + "entitlements").Documents(ctx).GetAll()
			if err != nil || len(snaps) != 1 {
				t.Fatalf("reading back the entitlement: %d documents, %v", len(snaps), err)
			}
			ref := snaps[0].Ref
			if _, err := ref.Update(ctx, []firestore.Update{{Path: tc.field, Value: tc.value}}); err != nil {
				t.Fatalf("corrupting %s: %v", tc.field, err)
			}
			wantPath := prefix + "entitlements/" + ref.ID

			check := func(call string, err error) {
				t.Helper()
				if !errors.Is(err, store.ErrInternal) {
					t.Fatalf("%s on a corrupt amount: got %v, want an internal error", call, err)
				}
				if msg := err.Error(); !strings.Contains(msg, wantPath) || !strings.Contains(msg, tc.field) {
					t.Errorf("%s: error %q does not name the document %s and field %s", call, msg, wantPath, tc.field)
				}
			}
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
			if _, err := f.raw.Collection(f.prefix+tc.collection).Doc(id).Update(ctx, []firestore.Update{{Path: tc.field, Value: tc.value}}); err != nil {
				t.Fatalf("corrupting %s: %v", tc.field, err)
			}
			wantPath := f.prefix + tc.collection + "/" + id
			field, _, _ := strings.Cut(tc.field, ".")
			check := func(call string, err error) {
				t.Helper()
				if !errors.Is(err, store.ErrInternal) {
					t.Fatalf("%s on a corrupt %s: got %v, want an internal error", call, tc.field, err)
				}
				if msg := err.Error(); !strings.Contains(msg, wantPath) || !strings.Contains(msg, field) {
					t.Errorf("%s: error %q does not name the document %s and field %s", call, msg, wantPath, field)
				}
			}
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
