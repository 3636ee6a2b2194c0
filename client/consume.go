package client

import (
	"context"
	"net/http"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// ConsumeRequest asks to charge one tool call (POST /v1/consume) or whether
// it could be charged (POST /v1/check).
type ConsumeRequest struct {
	AgentID        string `json:"agentId"`
	Service        string `json:"service"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotencyKey"`
	// Cost is charged to a credits entitlement.
	Cost *money.Money `json:"cost,omitempty"`
	// Units is charged to a quota entitlement; 0 means 1.
	Units int64 `json:"units,omitempty"`
	// EntitlementID, if set, is the one entitlement to charge.
	EntitlementID string `json:"entitlementId,omitempty"`
}

// The results of a successful consume.
const (
	ResultConsumed = "consumed"
	ResultReplay   = "replay"
)

// ConsumeResult is the answer to a consume: ResultConsumed when this call
// charged, ResultReplay when the key had already been charged with the same
// parameters (Consumption is then the original one and nothing was charged).
type ConsumeResult struct {
	Result      string                  `json:"result"`
	Consumption entitlement.Consumption `json:"consumption"`
}

// Consume charges one tool call to the agent's entitlements. It is retried
// with the same idempotency key on network errors and 503, so it charges at
// most once. A 402 (IsPaymentRequired) carries the reasons in the *Problem;
// a 422 (IsKeyReused) means the key was used before with other
// parameters. A request the server would refuse for its content is refused
// before it is sent (IsInvalid, naming the field).
// Role: host.
func (c *Client) Consume(ctx context.Context, r ConsumeRequest) (*ConsumeResult, error) {
	return fetch[ConsumeResult](ctx, c, call{method: http.MethodPost, path: "/v1/consume", body: r, retry: true})
}

// CheckResult is the answer to a check: whether the call would be charged,
// and to which entitlement. Nothing is consumed.
type CheckResult struct {
	Result      string                   `json:"result"`
	Entitlement *entitlement.Entitlement `json:"entitlement,omitempty"`
}

// Check asks whether a call would be charged, without charging it. A 402
// (IsPaymentRequired) says it would not, with the reasons. Role: host.
func (c *Client) Check(ctx context.Context, r ConsumeRequest) (*CheckResult, error) {
	return fetch[CheckResult](ctx, c, call{method: http.MethodPost, path: "/v1/check", body: r, retry: true})
}
