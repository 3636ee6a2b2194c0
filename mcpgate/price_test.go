package mcpgate_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

func TestPrice_String(t *testing.T) {
	tests := []struct {
		price mcpgate.Price
		want  string
	}{
		{mcpgate.Free(), "free"},
		{mcpgate.Credits(5, "USD"), "5 cents USD or 1 unit"},
		{mcpgate.Units(3), "3 units"},
		{mcpgate.Price{}, "1 unit"},
		{mcpgate.CreditsOrUnits(20, "EUR", 2), "20 cents EUR or 2 units"},
	}
	for _, tt := range tests {
		if got := tt.price.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.price, got, tt.want)
		}
	}
}

func TestPrice_Terms(t *testing.T) {
	usd5 := &money.Money{Cents: 5, Currency: "USD"}
	tests := []struct {
		price mcpgate.Price
		want  mcpgate.Terms
	}{
		{mcpgate.Free(), mcpgate.Terms{Free: true}},
		{mcpgate.Credits(5, "USD"), mcpgate.Terms{Cost: usd5, Units: 1, Policy: mcpgate.PolicyOnSuccess}},
		{mcpgate.Units(3), mcpgate.Terms{Units: 3, Policy: mcpgate.PolicyOnSuccess}},
		{mcpgate.Price{}, mcpgate.Terms{Units: 1, Policy: mcpgate.PolicyOnSuccess}},
		{mcpgate.CreditsOrUnits(5, "USD", 2), mcpgate.Terms{Cost: usd5, Units: 2, Policy: mcpgate.PolicyOnSuccess}},
		{mcpgate.Credits(5, "USD").ChargedBefore(), mcpgate.Terms{Cost: usd5, Units: 1, Policy: mcpgate.PolicyBefore}},
		{mcpgate.Free().ChargedBefore(), mcpgate.Terms{Free: true}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.price.Terms()); diff != "" {
			t.Errorf("%+v.Terms() (-want +got):\n%s", tt.price, diff)
		}
	}
}

func TestDefaultAgentID(t *testing.T) {
	withMeta := &mcp.CallToolParamsRaw{Meta: mcp.Meta{mcpgate.MetaAgentID: "from-meta"}}
	tests := []struct {
		name    string
		req     *mcp.CallToolRequest
		want    string
		wantErr bool
	}{
		{name: "Meta", req: &mcp.CallToolRequest{Params: withMeta}, want: "from-meta"},
		{name: "TokenWins", want: "from-token", req: &mcp.CallToolRequest{Params: withMeta,
			Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: "from-token"}}}},
		{name: "TokenWithoutUserIgnoresMeta", wantErr: true, req: &mcp.CallToolRequest{Params: withMeta,
			Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{}}}},
		{name: "Nothing", wantErr: true, req: &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mcpgate.DefaultAgentID(t.Context(), tt.req)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("DefaultAgentID = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
