package entitlement_test

import (
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

func TestAccountLimits(t *testing.T) {
	l := entitlement.AccountLimits{MaxPerCall: []money.Money{*usd(30)}, MaxUnitsPerCall: new(int64(4))}
	tests := []struct {
		name string
		r    *entitlement.ConsumeRequest
		want entitlement.Reason
	}{
		{"AtTheCap", req(usd(30), 4), ""},
		{"AboveTheCap", req(usd(31), 1), entitlement.ReasonMaxPerCall},
		{"OtherCurrencyUnbounded", req(&money.Money{Cents: 1000, Currency: "EUR"}, 1), ""},
		{"NoCost", req(nil, 1), ""},
		{"TooManyUnits", req(nil, 5), entitlement.ReasonMaxPerCall},
	}
	for _, tt := range tests {
		if got := l.Check(tt.r); got != tt.want {
			t.Errorf("%s: Check = %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, bad := range []struct {
		l     entitlement.AccountLimits
		field string
	}{
		{entitlement.AccountLimits{MaxPerCall: []money.Money{*usd(1), *usd(2)}}, "maxPerCall[1].currency"},
		{entitlement.AccountLimits{MaxPerCall: []money.Money{*usd(0)}}, "maxPerCall[0].cents"},
		{entitlement.AccountLimits{MaxPerCall: []money.Money{{Cents: 1, Currency: "usd"}}}, "maxPerCall[0].currency"},
		{entitlement.AccountLimits{MaxUnitsPerCall: new(int64(0))}, "maxUnitsPerCall"},
	} {
		if err := bad.l.Validate(); !isField(err, bad.field) {
			t.Errorf("Validate(%+v) = %v, want an error on %s", bad.l, err, bad.field)
		}
	}
}
