package mcpgate

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	// RefusalKeySpent (PolicyOnSuccess): an earlier attempt of the same call
	// under the same idempotency key ended without a charge (its hold was
	// released or expired), so the call is not run again under that key;
	// send it with a new key.
	RefusalKeySpent = "idempotency_key_spent"
	// RefusalHoldExpired (PolicyOnSuccess): the tool ran longer than its
	// hold lasts (Config.HoldTTL), so the call could not be charged; its
	// result was withheld and nothing was charged.
	RefusalHoldExpired = "hold_expired"
)

// Refusal is the machine-readable answer to a call the gate refused instead
// of running its tool. The result is isError with a text for the model (what
// happened, why, the price, where to buy); the Refusal goes in the result's
// _meta under MetaRefusal, and also in its structured content when the tool
// declares no output schema (a refusal would not match one, and clients
// reject results that do not).
type Refusal struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Service string `json:"service"`
	Tool    string `json:"tool"`
	// Price is how the call is charged, when the tool has a price.
	Price *Terms `json:"price,omitempty"`
	// Reasons says why each of the agent's entitlements could not pay.
	Reasons []entitlement.Denial `json:"reasons,omitempty"`
	// PurchaseURL is where credits can be bought.
	PurchaseURL string `json:"purchaseUrl,omitempty"`
	// Retryable is true when the same call may succeed if sent again.
	Retryable bool `json:"retryable,omitempty"`
}

// noEntitlement explains a reason that names no entitlement: the agent has
// none that could pay for the call.
const noEntitlement = "this agent has no entitlement for it"

// Text is the refusal as the model (and the person behind it) reads it: what
// happened, the price, why each entitlement could not pay, and where to buy,
// such as "payment required: no entitlement of this agent covers tool
// forecast. Price per call: at most 5 cents USD or 1 unit, charged only if
// the tool succeeds. Reasons: not_found (this agent has no entitlement for
// it). Buy credits at https://example.com/buy." The purchase URL is in the
// text as well as in PurchaseURL because hosts are known to drop the
// structured content of error results. The TypeScript and Python gates
// write the same text (testdata/vectors/refusals.json).
func (r *Refusal) Text() string {
	var text strings.Builder
	text.WriteString(r.Message)
	if r.Price != nil {
		switch r.Price.Policy {
		case PolicyOnSuccess:
			text.WriteString(". Price per call: at most " + r.Price.String() + ", charged only if the tool succeeds")
		case PolicyBefore:
			text.WriteString(". Price per call: " + r.Price.String() + ", charged before the tool runs")
		default:
			text.WriteString(". Price per call: " + r.Price.String())
		}
	}
	for i, d := range r.Reasons {
		if i == 0 {
			text.WriteString(". Reasons:")
		} else {
			text.WriteString(";")
		}
		text.WriteString(" " + string(d.Reason))
		if d.EntitlementID != "" {
			text.WriteString(" (entitlement " + d.EntitlementID + ")")
		} else {
			text.WriteString(" (" + noEntitlement + ")")
		}
	}
	if r.PurchaseURL != "" {
		text.WriteString(". Buy credits at " + r.PurchaseURL)
	}
	text.WriteString(".")
	return text.String()
}

// result is the tool result of r; structured says whether the refusal may
// also be the structured content (the tool declares no output schema).
func (r *Refusal) result(structured bool) *mcp.CallToolResult {
	res := &mcp.CallToolResult{
		Meta:    mcp.Meta{MetaRefusal: r},
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: r.Text()}},
	}
	if structured {
		res.StructuredContent = r
	}
	return res
}

// Consumption is what the gate puts in a charged call's result _meta under
// MetaConsumption: what the call was charged, and to which entitlement.
type Consumption struct {
	ConsumptionID string `json:"consumptionId"`
	// Result is "consumed" when this call was charged, or "replay" when the
	// call had already been charged under its key and nothing was charged
	// now.
	Result string `json:"result"`
	// HoldID is the hold the charge was captured from (PolicyOnSuccess).
	HoldID        string       `json:"holdId,omitempty"`
	EntitlementID string       `json:"entitlementId"`
	Cost          *money.Money `json:"cost,omitempty"`
	Units         int64        `json:"units,omitempty"`
	// BalanceAfter (credits) and RemainingAfter (quota) are the charged
	// entitlement's state right after the charge; a replay of a call
	// charged on success does not show them.
	BalanceAfter   *money.Money `json:"balanceAfter,omitempty"`
	RemainingAfter *int64       `json:"remainingAfter,omitempty"`
}

// consumptionOf is the Consumption of c, charged now (ResultConsumed) or
// earlier (ResultReplay) as result says.
func consumptionOf(result string, c *entitlement.Consumption) *Consumption {
	out := &Consumption{ConsumptionID: c.ID, Result: result, HoldID: c.HoldID, EntitlementID: c.EntitlementID,
		Units: c.Units, RemainingAfter: c.RemainingAfter}
	if !c.Cost.IsZero() {
		out.Cost = &c.Cost
	}
	if !c.BalanceAfter.IsZero() {
		out.BalanceAfter = &c.BalanceAfter
	}
	return out
}
