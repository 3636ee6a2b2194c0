package mcpgate_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/mcpgate"
)

func TestPrice_String(t *testing.T) {
	tests := []struct {
		price mcpgate.Price
		want  string
	}{
		{mcpgate.Free(), "free"},
		{mcpgate.Credits(5, "USD"), "5 cents USD"},
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
