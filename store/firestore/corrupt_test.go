package firestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

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
