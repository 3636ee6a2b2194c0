package mcpgate

import (
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// The kinds of Refusal.
const (
	// RefusalPaymentRequired: no entitlement of the agent covers the call.
	RefusalPaymentRequired = "payment_required"
	// RefusalUnavailable: Stipend could not be reached and the gate fails
	// closed; the call may be retried.
	RefusalUnavailable = "billing_unavailable"
	// RefusalKeyConflict: the client's idempotency key was used before for
	// a different call.
	RefusalKeyConflict = "idempotency_key_conflict"
	// RefusalNoAgent: the call does not say which agent pays.
	RefusalNoAgent = "agent_unknown"
	// RefusalUnpriced: the tool is not in the price table.
	RefusalUnpriced = "tool_not_priced"
	// RefusalBillingError: Stipend refused the charge for another reason
	// (the gate's configuration or key); the operator's log says which.
	RefusalBillingError = "billing_error"
)

// Refusal is the structured content of the isError result the gate answers
// instead of running a tool.
type Refusal struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Service string `json:"service"`
	Tool    string `json:"tool"`
	// Price is what the call costs, when the tool has one.
	Price *Price `json:"price,omitempty"`
	// Reasons says why each of the agent's entitlements could not pay.
	Reasons []entitlement.Denial `json:"reasons,omitempty"`
	// PurchaseURL is where credits can be bought.
	PurchaseURL string `json:"purchaseUrl,omitempty"`
	// Retryable is true when the same call may succeed if sent again.
	Retryable bool `json:"retryable,omitempty"`
}

func (r *Refusal) result() *mcp.CallToolResult {
	var text strings.Builder
	text.WriteString(r.Message)
	if r.Price != nil {
		text.WriteString(". Price per call: " + r.Price.String())
	}
	for i, d := range r.Reasons {
		if i == 0 {
			text.WriteString(". Reasons:")
		}
		text.WriteString(" " + string(d.Reason))
	}
	if r.PurchaseURL != "" {
		text.WriteString(". Buy credits at " + r.PurchaseURL)
	}
	text.WriteString(".")
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text.String()}},
		StructuredContent: r,
	}
}

// String describes p for people, such as "5 cents USD or 1 unit".
func (p Price) String() string {
	switch {
	case p.Free:
		return "free"
	case p.Cost != nil && p.Units > 0:
		return cost(p.Cost) + " or " + units(p.Units)
	case p.Cost != nil:
		return cost(p.Cost)
	}
	return units(max(p.Units, 1))
}

// cost says an amount in minor units, which is what Stipend counts in.
func cost(m *money.Money) string {
	return strconv.FormatInt(m.Cents, 10) + " cents " + m.Currency
}

func units(n int64) string {
	if n == 1 {
		return "1 unit"
	}
	return strconv.FormatInt(n, 10) + " units"
}

// Charge is what the gate puts in a charged call's result _meta under
// MetaConsumption.
type Charge struct {
	ConsumptionID string `json:"consumptionId"`
	// Result is "consumed", or "replay" when the call had already been
	// charged under its key and nothing was charged now.
	Result        string       `json:"result"`
	EntitlementID string       `json:"entitlementId"`
	Cost          *money.Money `json:"cost,omitempty"`
	Units         int64        `json:"units,omitempty"`
	// BalanceAfter (credits) and RemainingAfter (quota) are the charged
	// entitlement's state right after the charge.
	BalanceAfter   *money.Money `json:"balanceAfter,omitempty"`
	RemainingAfter *int64       `json:"remainingAfter,omitempty"`

	unbilled bool
}

func chargeOf(r *client.ConsumeResult) *Charge {
	c := r.Consumption
	ch := &Charge{ConsumptionID: c.ID, Result: r.Result, EntitlementID: c.EntitlementID, Units: c.Units, RemainingAfter: c.RemainingAfter}
	if !c.Cost.IsZero() {
		ch.Cost = &c.Cost
	}
	if !c.BalanceAfter.IsZero() {
		ch.BalanceAfter = &c.BalanceAfter
	}
	return ch
}
