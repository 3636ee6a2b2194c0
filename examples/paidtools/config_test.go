package main

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/mcpgate"
)

func TestLoadConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	got, err := loadConfig(env("STIPEND_HOST_KEY", "k"))
	if err != nil {
		t.Fatalf("loadConfig with only a host key: %v", err)
	}
	want := config{stipendURL: "http://127.0.0.1:8080", hostKey: "k", service: "weather"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(config{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	got, err = loadConfig(env("STIPEND_URL", "http://127.0.0.1:9", "STIPEND_HOST_KEY", "k", "PAIDTOOLS_SERVICE", "s",
		"PAIDTOOLS_AGENT_ID", "a", "PAIDTOOLS_ADDR", "127.0.0.1:0", "PAIDTOOLS_FAIL_OPEN", "true", "PAIDTOOLS_PURCHASE_URL", "https://x"))
	if err != nil {
		t.Fatalf("loadConfig with everything: %v", err)
	}
	want = config{stipendURL: "http://127.0.0.1:9", hostKey: "k", service: "s", agentID: "a", addr: "127.0.0.1:0", failOpen: true, purchaseURL: "https://x"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(config{})); diff != "" {
		t.Errorf("everything set (-want +got):\n%s", diff)
	}

	got, err = loadConfig(env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", `{"echo":{"free":true},"forecast":{"cost":{"cents":7,"currency":"USD"},"units":2},"alert":{"units":1,"policy":"before"}}`))
	if err != nil {
		t.Fatalf("loadConfig with prices: %v", err)
	}
	wantPrices := map[string]mcpgate.Price{"echo": mcpgate.Free(), "forecast": mcpgate.CreditsOrUnits(7, "USD", 2),
		"alert": mcpgate.Units(1).ChargedBefore()}
	if diff := cmp.Diff(wantPrices, got.prices); diff != "" {
		t.Errorf("PAIDTOOLS_PRICES (-want +got):\n%s", diff)
	}

	for name, e := range map[string]func(string) string{
		"NoHostKey":         env(),
		"BadFailOpen":       env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_FAIL_OPEN", "maybe"),
		"PricesNotJSON":     env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", "forecast=5"),
		"PricesNull":        env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", "null"),
		"PricesTwoObjects":  env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", `{} {}`),
		"PricesTrailing":    env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", `{}}`),
		"PricesUnknownName": env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", `{"forecast":{"cents":5}}`),
		"PricesBadMoney":    env("STIPEND_HOST_KEY", "k", "PAIDTOOLS_PRICES", `{"forecast":{"cost":{"cents":5.5,"currency":"USD"}}}`),
	} {
		if _, err := loadConfig(e); err == nil {
			t.Errorf("loadConfig(%s) succeeded, want an error", name)
		}
	}
}

func TestNewGate_ChecksPrices(t *testing.T) {
	for name, p := range map[string]mcpgate.Price{
		"LowerCaseCurrency": mcpgate.Credits(5, "usd"),
		"UnknownPolicy":     {Units: 1, Policy: "after"},
	} {
		c := config{stipendURL: "http://127.0.0.1:9", hostKey: "k", service: "weather", prices: map[string]mcpgate.Price{"forecast": p}}
		if _, err := newGate(c, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("newGate with a price of %s succeeded, want an error", name)
		}
	}
}
