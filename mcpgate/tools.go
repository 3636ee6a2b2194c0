package mcpgate

import (
	"context"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const methodListTools = "tools/list"

// maxListPages bounds the tools/list pages outputSchema reads.
const maxListPages = 100

// showPrices puts the Terms of every tool of res in the price table under
// MetaPrice in the tool's _meta. The server's Tool values are shared with
// every session, so each priced one is replaced by a copy, never changed.
func (g *Gate) showPrices(res *mcp.ListToolsResult) {
	for i, t := range res.Tools {
		if t == nil {
			continue
		}
		price, ok := g.prices[t.Name]
		if !ok {
			continue
		}
		priced := *t
		priced.Meta = maps.Clone(t.Meta)
		if priced.Meta == nil {
			priced.Meta = mcp.Meta{}
		}
		priced.Meta[MetaPrice] = price.Terms()
		res.Tools[i] = &priced
	}
}

// declaresOutputSchema reports whether the tool call names may have an output
// schema, by listing the server's tools through next (the handlers inside
// the gate). It answers true when it cannot tell, so that a refusal never
// goes where an output schema could reject it.
func declaresOutputSchema(ctx context.Context, next mcp.MethodHandler, call *mcp.CallToolRequest) bool {
	if call.Session == nil {
		return true
	}
	params := &mcp.ListToolsParams{}
	for range maxListPages {
		res, err := next(ctx, methodListTools, &mcp.ListToolsRequest{Session: call.Session, Params: params})
		list, ok := res.(*mcp.ListToolsResult)
		if err != nil || !ok {
			return true
		}
		for _, t := range list.Tools {
			if t != nil && t.Name == call.Params.Name {
				return t.OutputSchema != nil
			}
		}
		if list.NextCursor == "" {
			return false // no such tool, so no schema
		}
		params = &mcp.ListToolsParams{Cursor: list.NextCursor}
	}
	return true
}
