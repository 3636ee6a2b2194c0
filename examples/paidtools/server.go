package main

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/mcpgate"
)

// prices is the example's price table: echo is free, forecast costs 5 cents
// (or one quota unit), history costs 20 cents (or two quota units), hourly
// costs a cent an hour (or a quota unit per 6 hours) and says so with
// mcpgate.Charge, so its price is its most: 24 hours. All are charged on
// success: a call whose tool fails is not charged.
var prices = map[string]mcpgate.Price{
	"echo":     mcpgate.Free(),
	"forecast": mcpgate.CreditsOrUnits(5, "USD", 1),
	"history":  mcpgate.CreditsOrUnits(20, "USD", 2),
	"hourly":   mcpgate.CreditsOrUnits(maxHours, "USD", unitsFor(maxHours)),
}

// maxHours is the most hours hourly forecasts.
const maxHours = 24

// unitsFor is what an hourly forecast of hours costs in quota units: one per
// started 6 hours.
func unitsFor(hours int64) int64 { return (hours + 5) / 6 }

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

type hourlyIn struct {
	City  string `json:"city" jsonschema:"the city to forecast"`
	Hours int64  `json:"hours" jsonschema:"how many hours ahead, 1 to 24 (a cent an hour)"`
}

type hourlyOut struct {
	City  string `json:"city"`
	Hours []hour `json:"hours"`
}

type hour struct {
	Hour  int64 `json:"hour"`
	TempC int   `json:"tempC"`
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
	mcp.AddTool(s, &mcp.Tool{Name: "hourly", Description: "Paid by the hour (a cent an hour, or a quota unit per 6 hours; at most 24 hours): " +
		"a city's temperature for the next hours. Fails, and is not charged, for hours outside 1 to 24."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in hourlyIn) (*mcp.CallToolResult, hourlyOut, error) {
			if in.City == "" || in.Hours < 1 || in.Hours > maxHours {
				return nil, hourlyOut{}, fmt.Errorf("city is required and hours must be 1 to %d", maxHours)
			}
			out := hourlyOut{City: in.City}
			n := seed(in.City)
			for h := range in.Hours {
				out.Hours = append(out.Hours, hour{Hour: h + 1, TempC: int(n%30) - 5 + int(h%12)/2})
			}
			// What this call really cost: the gate charges it instead of the
			// price. An error says the report was ignored (the call is not
			// charged on success, or the price table has no such price), and
			// the call is charged its price.
			_ = mcpgate.Charge(ctx, mcpgate.CentsOrUnits(in.Hours, "USD", unitsFor(in.Hours)))
			return nil, out, nil
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
