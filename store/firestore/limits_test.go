package firestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

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
			client := emulator.Client(t)
			prefix := emulator.Prefix(t)
			s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(fixedNow))
			e := createCredits(t, s, "agent-corrupt", 1000)
			usd := money.Money{Cents: 100, Currency: "USD"}
			_, err := s.UpdateEntitlement(ctx, e.ID, entitlement.Update{
				SpendLimit: &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usd}},
				Alerts:     &entitlement.Set[[]entitlement.Alert]{To: []entitlement.Alert{{Percent: new(int64(10))}}},
			})
			if err != nil {
				t.Fatalf("UpdateEntitlement: %v", err)
			}
			ref := client.Collection(prefix + "entitlements").Doc(e.ID)
			if _, err := ref.Update(ctx, []firestore.Update{{Path: tc.field, Value: tc.value}}); err != nil {
				t.Fatalf("corrupting %s: %v", tc.field, err)
			}
			_, err = s.GetEntitlement(ctx, e.ID)
			if !errors.Is(err, store.ErrInternal) || !strings.Contains(err.Error(), prefix+"entitlements/"+ref.ID) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("GetEntitlement with %s = %v: want an internal error naming the document and %s", tc.field, err, tc.field)
			}
		})
	}
}
