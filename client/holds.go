package client

import (
	"context"
	"net/http"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// A hold charges a tool call in two steps: Authorize reserves the most the
// call may cost before it runs, then CaptureHold charges what it did cost
// (the rest is given back) or ReleaseHold gives it all back. A hold that is
// neither captured nor released expires by itself after its TTL. While a
// hold is open, what it reserves is not available to other calls.

// AuthorizeRequest asks to reserve the most a tool call may cost (POST
// /v1/authorize). The entitlement is chosen as Consume would choose it.
type AuthorizeRequest struct {
	AgentID        string `json:"agentId"`
	Service        string `json:"service"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotencyKey"`
	// MaxCost is the most the call may cost, reserved on a credits entitlement.
	MaxCost *money.Money `json:"maxCost,omitempty"`
	// MaxUnits is the most units it may use, reserved on a quota; 0 means 1.
	MaxUnits int64 `json:"maxUnits,omitempty"`
	// EntitlementID, if set, is the one entitlement to reserve on.
	EntitlementID string `json:"entitlementId,omitempty"`
	// TTLSeconds is how long the hold lasts (1–86400); 0 means 300.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

// The results of the hold calls, besides ResultReplay.
const (
	ResultHeld     = "held"
	ResultCaptured = "captured"
	ResultReleased = "released"
)

// HoldResult is the answer to Authorize and ReleaseHold: ResultHeld or
// ResultReleased when this call did it, ResultReplay when an earlier call
// had (Authorize: the key was already used with the same parameters, and
// Hold is that hold as it is now; ReleaseHold: the hold had already been
// released or had expired, its Status says which).
type HoldResult struct {
	Result string           `json:"result"`
	Hold   entitlement.Hold `json:"hold"`
}

// Authorize reserves the most a tool call may cost. It is retried with the
// same idempotency key on network errors and 503, so it reserves at most
// once. A 402 (IsPaymentRequired) carries the reasons in the *Problem, as
// Consume's; a 422 (IsKeyReused) means the key was used before with other
// parameters, or by a consume. Role: host.
func (c *Client) Authorize(ctx context.Context, r AuthorizeRequest) (*HoldResult, error) {
	return fetch[HoldResult](ctx, c, call{method: http.MethodPost, path: "/v1/authorize", body: r, retry: true})
}

// CaptureRequest says what a held call did cost. A nil field charges the
// hold's maximum; neither may be more than the hold.
type CaptureRequest struct {
	// AgentID is the agent the hold is for.
	AgentID string       `json:"agentId"`
	Cost    *money.Money `json:"cost,omitempty"`
	Units   *int64       `json:"units,omitempty"`
}

// CaptureResult is the answer to CaptureHold: ResultCaptured when this call
// charged, ResultReplay when the hold had already been captured with the
// same amount (Consumption is then the one that capture made).
type CaptureResult struct {
	Result      string                  `json:"result"`
	Hold        entitlement.Hold        `json:"hold"`
	Consumption entitlement.Consumption `json:"consumption"`
}

// CaptureHold ends the hold id by charging what the call did cost. A
// capture is idempotent (the same amount again answers a replay), so it is
// retried on network errors and 503. Errors: IsNotFound for an unknown hold
// or another agent's; IsHoldExpired for a hold past its expiry (nothing is
// charged); IsHoldConflict for a hold released, or captured with another
// amount; IsInvalid for an amount the hold does not cover. Role: host.
func (c *Client) CaptureHold(ctx context.Context, id string, r CaptureRequest) (*CaptureResult, error) {
	path := "/v1/holds/" + seg(id) + "/capture"
	return fetch[CaptureResult](ctx, c, call{method: http.MethodPost, path: path, body: r, retry: true})
}

// ReleaseHold ends the hold id of agentID and gives back all it reserved.
// Releasing is idempotent, so it is retried on network errors and 503.
// Errors: IsNotFound for an unknown hold or another agent's; IsHoldConflict
// for a captured hold. Role: host.
func (c *Client) ReleaseHold(ctx context.Context, id, agentID string) (*HoldResult, error) {
	path := "/v1/holds/" + seg(id) + "/release"
	return fetch[HoldResult](ctx, c, call{method: http.MethodPost, path: path, body: releaseRequest{agentID}, retry: true})
}

// releaseRequest is the body of POST /v1/holds/{id}/release.
type releaseRequest struct {
	AgentID string `json:"agentId"`
}

// GetHold returns a hold; one past its expiry shows as expired. Role: host,
// billing, admin.
func (c *Client) GetHold(ctx context.Context, id string) (*entitlement.Hold, error) {
	return fetch[entitlement.Hold](ctx, c, call{method: http.MethodGet, path: "/v1/holds/" + seg(id), retry: true})
}
