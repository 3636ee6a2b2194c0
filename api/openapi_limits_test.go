package api_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// specAt returns the member of openapi.json at the JSON Pointer ptr
// ("/components/schemas/Name/maxLength"), or fails tb.
func specAt(tb testing.TB, ptr string) any {
	tb.Helper()
	var doc any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		tb.Fatal(err)
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		ok := false
		switch v := doc.(type) {
		case map[string]any:
			doc, ok = v[tok]
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
				doc, ok = v[i], true
			}
		}
		if !ok {
			tb.Fatalf("openapi.json has no %s", ptr)
		}
	}
	return doc
}

// TestOpenAPI_Limits: the limits openapi.json states are the ones the
// server enforces, as the Go constants define them (TestInput_Limits checks
// the server against the same constants).
func TestOpenAPI_Limits(t *testing.T) {
	const s = "/components/schemas/"
	tests := []struct {
		ptr  string
		want int64
	}{
		{s + "Name/maxLength", entitlement.MaxNameLen},
		{s + "ConsumeRequest/properties/idempotencyKey/maxLength", entitlement.MaxKeyLength},
		{s + "AuthorizeRequest/properties/idempotencyKey/maxLength", entitlement.MaxKeyLength},
		{s + "ConsumeRequest/properties/units/maximum", entitlement.MaxUnits},
		{s + "AuthorizeRequest/properties/maxUnits/maximum", entitlement.MaxUnits},
		{s + "CaptureRequest/properties/units/maximum", entitlement.MaxUnits},
		{s + "RefundRequest/properties/units/maximum", entitlement.MaxUnits},
		{s + "AuthorizeRequest/properties/ttlSeconds/maximum", int64(entitlement.MaxHoldTTL / time.Second)},
		{s + "Grant/properties/limit/minimum", 1},
		{s + "Grant/properties/limit/maximum", api.MaxQuotaLimit},
		{s + "EntitlementRequest/properties/limit/minimum", 1},
		{s + "EntitlementRequest/properties/limit/maximum", api.MaxQuotaLimit},
		{s + "Money/properties/cents/maximum", money.MaxCents},
		{s + "Money/properties/cents/minimum", -money.MaxCents},
		{s + "PositiveMoney/allOf/1/properties/cents/minimum", 1},
		{s + "NonNegativeMoney/allOf/1/properties/cents/minimum", 0},
		{s + "Metadata/maxProperties", entitlement.MaxMetadataEntries},
		{s + "Metadata/propertyNames/maxLength", entitlement.MaxMetadataKeyLen},
		{s + "FailRequest/properties/reason/maxLength", payment.MaxFailureReasonLen},
		{s + "RotateSecretRequest/properties/gracePeriodSeconds/maximum", int64(webhook.MaxSecretGrace / time.Second)},
		{"/components/parameters/Limit/schema/maximum", store.MaxPageSize},
		{"/components/parameters/IdempotencyKey/schema/maxLength", idempotency.MaxKeyLen + 2}, // the quoted form
	}
	for _, tt := range tests {
		got, ok := specAt(t, tt.ptr).(float64)
		if !ok || int64(got) != tt.want {
			t.Errorf("openapi.json %s = %v, want %d", tt.ptr, specAt(t, tt.ptr), tt.want)
		}
	}
	pattern, _ := specAt(t, "/components/parameters/IdempotencyKey/schema/pattern").(string)
	if want := fmt.Sprintf("{1,%d}", idempotency.MaxKeyLen); strings.Count(pattern, want) != 2 {
		t.Errorf("Idempotency-Key pattern %q: want both forms bounded by %s", pattern, want)
	}
}

// TestOpenAPI_EventTypes: one EventType component lists every event type,
// as package event does, and no schema repeats the list inline.
func TestOpenAPI_EventTypes(t *testing.T) {
	var want []any
	for _, typ := range event.Types {
		want = append(want, string(typ))
	}
	if diff := cmp.Diff(want, specAt(t, "/components/schemas/EventType/enum")); diff != "" {
		t.Errorf("EventType enum (-event.Types +openapi.json):\n%s", diff)
	}
	var doc any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if enum, ok := v["enum"].([]any); ok && ptr != "/components/schemas/EventType" {
				for _, e := range enum {
					if e == string(event.PaymentSucceeded) {
						t.Errorf("openapi.json %s repeats the event types: refer to #/components/schemas/EventType", ptr)
					}
				}
			}
			for k, e := range v {
				walk(ptr+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", ptr, i), e)
			}
		}
	}
	walk("", doc)
}
