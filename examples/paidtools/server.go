package main

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/mcpgate"
)

// prices is the example's price table: echo is free, forecast costs 5 cents
// (or one quota unit), history costs 20 cents (or two quota units).
var prices = map[string]mcpgate.Price{
	"echo":     mcpgate.Free(),
	"forecast": mcpgate.CreditsOrUnits(5, "USD", 1),
	"history":  mcpgate.CreditsOrUnits(20, "USD", 2),
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type echoOut struct {
	Text string `json:"text"`
}

type forecastIn struct {
	City string `json:"city" jsonschema:"the city to forecast"`
}

type forecastOut struct {
	City       string `json:"city"`
	Summary    string `json:"summary"`
	HighC      int    `json:"highC"`
	LowC       int    `json:"lowC"`
	RainChance int    `json:"rainChancePercent"`
}

type historyIn struct {
	City string `json:"city" jsonschema:"the city"`
	Year int    `json:"year" jsonschema:"the year, 1950 to 2025"`
}

type historyOut struct {
	City      string `json:"city"`
	Year      int    `json:"year"`
	MeanTempC int    `json:"meanTempC"`
	RainMM    int    `json:"rainMM"`
}

// newServer builds the example MCP server. With g non-nil every tools/call
// goes through the gate; nil serves the same tools ungated (for the bench).
func newServer(g *mcpgate.Gate) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "paidtools", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Free: sends the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Text: in.Text}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "forecast", Description: "Paid (5 cents or 1 quota unit): tomorrow's weather for a city."},
		func(_ context.Context, _ *mcp.CallToolRequest, in forecastIn) (*mcp.CallToolResult, forecastOut, error) {
			if in.City == "" {
				return nil, forecastOut{}, fmt.Errorf("city is required")
			}
			n := seed(in.City)
			summaries := []string{"sunny", "cloudy", "showers", "windy", "snow"}
			high := int(n%30) - 5
			return nil, forecastOut{City: in.City, Summary: summaries[n%uint32(len(summaries))],
				HighC: high, LowC: high - int(n%8) - 2, RainChance: int(n % 101)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "history", Description: "Paid (20 cents or 2 quota units): a city's climate in a past year."},
		func(_ context.Context, _ *mcp.CallToolRequest, in historyIn) (*mcp.CallToolResult, historyOut, error) {
			if in.City == "" || in.Year < 1950 || in.Year > 2025 {
				return nil, historyOut{}, fmt.Errorf("city is required and year must be 1950 to 2025")
			}
			n := seed(fmt.Sprintf("%s/%d", in.City, in.Year))
			return nil, historyOut{City: in.City, Year: in.Year, MeanTempC: int(n%25) - 2, RainMM: 300 + int(n%1500)}, nil
		})
	if g != nil {
		s.AddReceivingMiddleware(g.Middleware)
	}
	return s
}

// seed makes the made-up weather stable for a given input.
func seed(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
