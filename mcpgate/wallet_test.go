package mcpgate_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/portal"
)

// walletServer is toolServer with the wallet added, on a real Stipend: the
// gate charges with the host key and mints sessions with the admin client.
func walletServer(t *testing.T, st *stipend) *mcp.Server {
	t.Helper()
	var ran atomic.Int32
	g := newGate(t, mcpgate.Config{Stipend: st.host})
	s := toolServer(g, &ran, false)
	if err := g.AddWallet(s, mcpgate.WalletConfig{Minter: st.admin, StipendURL: st.url + "/ignored/path"}); err != nil {
		t.Fatalf("AddWallet: %v", err)
	}
	return s
}

// TestWallet_ToolMintsTheCallersSession: the wallet tool is free, shows
// its app in tools/list, and answers a portal session of the calling agent
// (in _meta, never in what the model reads) with which the app reads that
// agent's balance, and nothing of another agent's.
func TestWallet_ToolMintsTheCallersSession(t *testing.T) {
	st := startStipend(t)
	st.grantCredits(t, "agent-1", 500)
	cs := connect(t, walletServer(t, st))

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tool *mcp.Tool
	for _, tl := range tools.Tools {
		if tl.Name == mcpgate.WalletToolName {
			tool = tl
		}
	}
	if tool == nil {
		t.Fatalf("tools/list has no %s tool", mcpgate.WalletToolName)
	}
	var meta struct {
		UI    struct{ ResourceURI string } `json:"ui"`
		Price struct{ Free bool }          `json:"io.stipend/price"`
	}
	decode(t, tool.Meta, &meta)
	if meta.UI.ResourceURI != mcpgate.WalletURI || !meta.Price.Free {
		t.Errorf("wallet tool _meta %v: want ui.resourceUri %s and a free price", tool.Meta, mcpgate.WalletURI)
	}

	res := callTool(t, cs, mcpgate.WalletToolName, map[string]any{}, nil)
	if res.IsError {
		t.Fatalf("wallet: isError: %v", res.Content)
	}
	var ps mcpgate.PortalSession
	decode(t, res.Meta[mcpgate.MetaPortalSession], &ps)
	if ps.AgentID != "agent-1" || ps.API != st.url || !strings.HasPrefix(ps.Token, portal.TokenPrefix) {
		t.Fatalf("portal session %+v: want agent-1's, on %s", ps, st.url)
	}
	if want := st.clock.Now().Add(15 * time.Minute); !ps.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt %v, want %v (the default 15 minutes)", ps.ExpiresAt, want)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if strings.Contains(text, ps.Token) || strings.Contains(toJSON(t, res.StructuredContent), ps.Token) {
		t.Errorf("the model can read the session's token: %q, %v", text, res.StructuredContent)
	}
	get := func(path string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ps.API+path, nil)
		req.Header.Set("Authorization", "Bearer "+ps.Token)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	if got := get("/v1/accounts/agent-1/balance"); got != http.StatusOK {
		t.Errorf("the session reading its agent's balance: %d, want 200", got)
	}
	if got := get("/v1/accounts/agent-2/balance"); got != http.StatusUnauthorized {
		t.Errorf("the session reading another agent's balance: %d, want 401", got)
	}

	if res := callTool(t, cs, mcpgate.WalletToolName, map[string]any{}, mcp.Meta{mcpgate.MetaAgentID: ""}); !res.IsError {
		t.Errorf("wallet without an agent: want isError")
	}
}

// TestWallet_Resource: resources/read answers the app's one HTML document
// as an MCP App, allowed to connect to Stipend only.
func TestWallet_Resource(t *testing.T) {
	st := startStipend(t)
	cs := connect(t, walletServer(t, st))
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: mcpgate.WalletURI})
	if err != nil {
		t.Fatalf("ReadResource(%s): %v", mcpgate.WalletURI, err)
	}
	c := rr.Contents[0]
	if c.MIMEType != "text/html;profile=mcp-app" || !strings.HasPrefix(c.Text, "<!doctype html>") {
		t.Errorf("resource %s: mimeType %q, text %.40q", c.URI, c.MIMEType, c.Text)
	}
	var meta struct {
		UI struct {
			CSP struct{ ConnectDomains []string } `json:"csp"`
		} `json:"ui"`
	}
	decode(t, c.Meta, &meta)
	if got := meta.UI.CSP.ConnectDomains; len(got) != 1 || got[0] != st.url {
		t.Errorf("connectDomains %v, want [%s]", got, st.url)
	}
}

// TestWallet_RefusalLinksTheApp: a payment_required refusal points at the
// wallet app; other refusals do not.
func TestWallet_RefusalLinksTheApp(t *testing.T) {
	st := startStipend(t)
	cs := connect(t, walletServer(t, st))
	res := callTool(t, cs, "forecast", map[string]any{}, nil)
	var refusal mcpgate.Refusal
	decode(t, res.Meta[mcpgate.MetaRefusal], &refusal)
	if !res.IsError || refusal.Error != mcpgate.RefusalPaymentRequired {
		t.Fatalf("forecast with no credits: %+v, want payment_required", refusal)
	}
	var link struct{ ResourceURI string }
	decode(t, res.Meta["ui"], &link)
	if link.ResourceURI != mcpgate.WalletURI {
		t.Errorf("refusal _meta.ui %v: want resourceUri %s", res.Meta["ui"], mcpgate.WalletURI)
	}
	if res := callTool(t, cs, "unpriced", map[string]any{}, nil); res.Meta["ui"] != nil {
		t.Errorf("a tool_not_priced refusal links the wallet: %v", res.Meta)
	}
}

func TestAddWallet_Validates(t *testing.T) {
	st := startStipend(t)
	for name, c := range map[string]mcpgate.WalletConfig{
		"NoMinter": {StipendURL: st.url},
		"NoURL":    {Minter: st.admin},
		"BadURL":   {Minter: st.admin, StipendURL: "ftp://x"},
		"ShortTTL": {Minter: st.admin, StipendURL: st.url, TTL: time.Second},
		"Taken":    {Minter: st.admin, StipendURL: st.url, ToolName: "forecast"},
	} {
		g := newGate(t, mcpgate.Config{Stipend: st.host})
		if err := g.AddWallet(mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil), c); err == nil {
			t.Errorf("AddWallet(%s): no error", name)
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
