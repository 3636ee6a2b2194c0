package client

import (
	"context"
	"net/http"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// RefundRequest says how much of a consumption to give back. A nil field
// gives back all that was charged (Cost on credits, Units on a quota).
type RefundRequest struct {
	Cost  *money.Money `json:"cost,omitempty"`
	Units *int64       `json:"units,omitempty"`
}

// RefundResult is the answer to RefundConsumption: the consumption, with
// its Refund, and the entitlement after it.
type RefundResult struct {
	Consumption entitlement.Consumption `json:"consumption"`
	Entitlement entitlement.Entitlement `json:"entitlement"`
}

// RefundConsumption gives (part of) a consumption back to its entitlement;
// a consumption is refunded at most once. idempotencyKey is sent as the
// Idempotency-Key header (the route requires one; without it the call is
// refused unsent): unique per refund, and the same when repeating one. The
// call is retried with it on network errors and 503. Errors: IsNotFound for
// an unknown consumption; IsInvalid for more than was charged or another
// currency; IsKeyReused for the key of another refund; IsRefundRefused
// when the entitlement is revoked, the consumption is from an earlier quota
// period, or it was already refunded with another amount. Role: billing,
// admin.
func (c *Client) RefundConsumption(ctx context.Context, id, idempotencyKey string, r RefundRequest) (*RefundResult, error) {
	path := "/v1/consumptions/" + seg(id) + "/refund"
	return fetch[RefundResult](ctx, c, call{method: http.MethodPost, path: path, body: r, idemKey: idempotencyKey, keyRequired: true, retry: true})
}
