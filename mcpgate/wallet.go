package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/portal"
)

// The wallet as an MCP App (SEP-1865; docs/portal.md): a free tool that
// shows the calling agent's wallet, the ui:// resource that renders it, and
// the link from payment_required refusals to it.
const (
	// WalletToolName is the default name of the wallet tool.
	WalletToolName = "wallet"
	// WalletURI is the wallet app's resource; its mimeType is
	// WalletMIMEType.
	WalletURI      = portal.WalletURI
	WalletMIMEType = portal.WalletMIMEType
	// MetaPortalSession (wallet tool result) holds the PortalSession the
	// app reads the wallet with.
	MetaPortalSession = "io.stipend/portal-session"
)

// WalletMinter mints portal sessions: a *client.Client with a billing (or
// admin) key. The gate's own client has a host key, which cannot mint;
// the app gets only the session, never this key.
type WalletMinter interface {
	CreatePortalSession(ctx context.Context, idempotencyKey string, r client.PortalSessionRequest) (*client.PortalSession, error)
}

// WalletConfig configures AddWallet.
type WalletConfig struct {
	// Minter mints the calling agent's portal session (required).
	Minter WalletMinter
	// StipendURL is the origin the app calls Stipend at (required), such
	// as https://billing.example.com: hosts let the app connect there
	// (the resource's _meta.ui.csp.connectDomains), and Stipend answers
	// a portal session's requests from any origin.
	StipendURL string
	// TTL is how long each session lasts; 0 means 15 minutes. Whole
	// seconds from a minute to a day.
	TTL time.Duration
	// ToolName names the tool; empty means WalletToolName.
	ToolName string
}

// PortalSession is what the wallet tool gives the app under
// MetaPortalSession: where Stipend is, and the session's token.
type PortalSession struct {
	API       string    `json:"api"`
	AgentID   string    `json:"agentId"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// wallet is what AddWallet set up.
type wallet struct {
	minter WalletMinter
	origin string
	ttl    time.Duration
	tool   string
}

// AddWallet registers on s the wallet tool (free: it is added to the
// price table) and the resource WalletURI, and links the gate's
// payment_required refusals to the app (_meta.ui.resourceUri), so that a
// host that renders MCP Apps shows the agent its wallet, with a top-up
// button, where a call was refused. Call it once, before serving.
func (g *Gate) AddWallet(s *mcp.Server, c WalletConfig) error {
	u, err := url.Parse(c.StipendURL)
	if c.Minter == nil {
		return errors.New("mcpgate: WalletConfig.Minter is required (a client with a billing key)")
	}
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("mcpgate: WalletConfig.StipendURL %q: want an origin such as https://billing.example.com", c.StipendURL)
	}
	w := &wallet{minter: c.Minter, origin: u.Scheme + "://" + u.Host, ttl: c.TTL, tool: c.ToolName}
	if w.ttl == 0 {
		w.ttl = 15 * time.Minute
	}
	if w.ttl%time.Second != 0 || w.ttl < portal.MinTTL || w.ttl > portal.MaxTTL {
		return fmt.Errorf("mcpgate: WalletConfig.TTL %v: want whole seconds from %v to %v", c.TTL, portal.MinTTL, portal.MaxTTL)
	}
	if w.tool == "" {
		w.tool = WalletToolName
	}
	if _, taken := g.prices[w.tool]; taken {
		return fmt.Errorf("mcpgate: the price table already has a tool %q", w.tool)
	}
	g.prices[w.tool] = Free()
	g.wallet = w
	ui := mcp.Meta{"ui": map[string]any{"resourceUri": WalletURI}, "ui/resourceUri": WalletURI}
	s.AddTool(&mcp.Tool{
		Name:        w.tool,
		Title:       "Wallet",
		Description: "Show the user the wallet that pays for this server's tools: balance, usage, receipts, and a top-up button. Free.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
		Meta:        ui,
	}, g.showWallet)
	resMeta := mcp.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{w.origin}}, "prefersBorder": true}}
	s.AddResource(&mcp.Resource{URI: WalletURI, Name: "wallet", Title: "Wallet", MIMEType: WalletMIMEType, Meta: resMeta},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: WalletURI, MIMEType: WalletMIMEType, Text: string(portal.WalletHTML()), Meta: resMeta,
			}}}, nil
		})
	return nil
}

// showWallet is the wallet tool: it mints a portal session of the calling
// agent and gives it to the app (in _meta, which hosts do not show the
// model), and tells the model what it did.
func (g *Gate) showWallet(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	w := g.wallet
	agent, err := g.agentID(ctx, req)
	if err != nil || agent == "" {
		return walletError("the wallet cannot be shown: the call does not say which agent it is for"), nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	ps, err := w.minter.CreatePortalSession(ctx, uuid.NewString(), client.PortalSessionRequest{AgentID: agent, TTLSeconds: int64(w.ttl / time.Second)})
	if err != nil {
		g.log.ErrorContext(ctx, "mcpgate: minting the wallet's portal session failed", "agent", agent, "err", err)
		return walletError("the wallet is unavailable right now; try again shortly"), nil
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: "Showing the wallet of agent " + agent +
			" (balance, usage, receipts, top-up). Its session ends at " + ps.ExpiresAt.UTC().Format(time.RFC3339) + "."}},
		StructuredContent: map[string]any{"agentId": agent, "expiresAt": ps.ExpiresAt},
		Meta: mcp.Meta{MetaPortalSession: PortalSession{
			API: w.origin, AgentID: agent, Token: ps.Token, ExpiresAt: ps.ExpiresAt,
		}},
	}, nil
}

func walletError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// linkWallet points a payment_required refusal at the wallet app, when
// AddWallet set one up: a host that renders MCP Apps may show it there.
func (g *Gate) linkWallet(res *mcp.CallToolResult, r *Refusal) {
	if g.wallet == nil || r.Error != RefusalPaymentRequired {
		return
	}
	res.Meta["ui"] = map[string]any{"resourceUri": WalletURI}
}
