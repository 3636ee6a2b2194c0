package client

import (
	"context"
	"net/http"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// Webhook endpoints receive Stipend's events, each delivery signed with
// the endpoint's secret (Standard Webhooks; docs/webhooks.md). Every call
// here needs an admin key.

// WebhookEndpointRequest is the body of POST /v1/webhook-endpoints.
type WebhookEndpointRequest struct {
	URL string `json:"url"`
	// EventTypes are the event types the endpoint receives; none means all.
	EventTypes []event.Type `json:"eventTypes,omitempty"`
}

// EndpointSecret is an endpoint with its signing secret, which the API
// shows only when it is made: at creation and at rotation. Secret is the
// secret (Endpoint.Secret, never shown, is empty).
type EndpointSecret struct {
	store.Endpoint
	Secret string `json:"secret"`
}

// CreateWebhookEndpoint registers an endpoint and answers it with its
// signing secret, shown this once. idempotencyKey is sent as the
// Idempotency-Key header (the route requires one; without it the call is
// refused unsent) and makes the call safe to retry: unique per endpoint.
// Errors: IsInvalid naming url for a URL the server does not register (a
// private target, unless it allows them), or eventTypes. Role: admin.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, idempotencyKey string, r WebhookEndpointRequest) (*EndpointSecret, error) {
	return fetch[EndpointSecret](ctx, c, call{method: http.MethodPost, path: "/v1/webhook-endpoints", body: r,
		idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// ListWebhookEndpoints returns one page of the endpoints. Role: admin.
func (c *Client) ListWebhookEndpoints(ctx context.Context, p Page) (*List[store.Endpoint], error) {
	return fetch[List[store.Endpoint]](ctx, c, call{method: http.MethodGet, path: "/v1/webhook-endpoints", query: p.values(), retry: true})
}

// GetWebhookEndpoint returns an endpoint. Role: admin.
func (c *Client) GetWebhookEndpoint(ctx context.Context, id string) (*store.Endpoint, error) {
	return fetch[store.Endpoint](ctx, c, call{method: http.MethodGet, path: "/v1/webhook-endpoints/" + seg(id), retry: true})
}

// WebhookEndpointUpdate changes an endpoint; nil fields stay as they are.
type WebhookEndpointUpdate struct {
	// URL replaces the URL, checked as at registration.
	URL *string
	// EventTypes replaces the event types; an empty slice subscribes the
	// endpoint to every type.
	EventTypes *[]event.Type
	// Enable enables a disabled endpoint again (after its receiver answered
	// 410 Gone, or DisableWebhookEndpoint). Disabling is
	// DisableWebhookEndpoint, which records a reason.
	Enable bool
}

// endpointPatch is the body of PATCH /v1/webhook-endpoints/{id}.
type endpointPatch struct {
	URL        *string       `json:"url,omitempty"`
	EventTypes *[]event.Type `json:"eventTypes,omitempty"`
	Disabled   *bool         `json:"disabled,omitempty"`
}

// UpdateWebhookEndpoint changes an endpoint's URL or event types, or
// enables it again. The same update twice leaves the same endpoint, so it
// is retried. Role: admin.
func (c *Client) UpdateWebhookEndpoint(ctx context.Context, id string, u WebhookEndpointUpdate) (*store.Endpoint, error) {
	body := endpointPatch{URL: u.URL, EventTypes: u.EventTypes}
	if u.Enable {
		body.Disabled = new(bool) // "disabled": false
	}
	path := "/v1/webhook-endpoints/" + seg(id)
	return fetch[store.Endpoint](ctx, c, call{method: http.MethodPatch, path: path, body: body, retry: true})
}

// DisableWebhookEndpoint stops deliveries to an endpoint, recording reason
// (empty: "disabled by an operator"); UpdateWebhookEndpoint with Enable
// starts them again. Role: admin.
func (c *Client) DisableWebhookEndpoint(ctx context.Context, id, reason string) (*store.Endpoint, error) {
	body := reasonBody{reason}
	path := "/v1/webhook-endpoints/" + seg(id) + "/disable"
	return fetch[store.Endpoint](ctx, c, call{method: http.MethodPost, path: path, body: body, retry: true})
}

// DeleteWebhookEndpoint deletes an endpoint. It is retried on network
// errors and 503, so IsNotFound means the endpoint is gone, whether or not
// this call deleted it. Role: admin.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/webhook-endpoints/" + seg(id), retry: true}, nil)
	return err
}

// SecretRotation is the body of POST /v1/webhook-endpoints/{id}/rotate-secret.
type SecretRotation struct {
	// GracePeriodSeconds is how long the replaced secret keeps signing
	// deliveries next to the new one (0: not at all; nil: the server's
	// default, a day; at most a week).
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// RotateWebhookSecret gives an endpoint a new signing secret, shown this
// once; for the grace period, deliveries carry a signature with each
// secret. idempotencyKey is sent as the Idempotency-Key header (the route
// requires one; without it the call is refused unsent): a retry with it
// answers the same secret instead of rotating again. Role: admin.
func (c *Client) RotateWebhookSecret(ctx context.Context, id, idempotencyKey string, r SecretRotation) (*EndpointSecret, error) {
	path := "/v1/webhook-endpoints/" + seg(id) + "/rotate-secret"
	return fetch[EndpointSecret](ctx, c, call{method: http.MethodPost, path: path, body: r, idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// ListDeliveries returns one page of the deliveries, narrowed by f (zero
// fields do not filter). Role: admin.
func (c *Client) ListDeliveries(ctx context.Context, f store.DeliveryFilter, p Page) (*List[store.Delivery], error) {
	q := p.values()
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.EventType != "" {
		q.Set("eventType", string(f.EventType))
	}
	return fetch[List[store.Delivery]](ctx, c, call{method: http.MethodGet, path: "/v1/deliveries", query: q, retry: true})
}

// GetDelivery returns a delivery. Role: admin.
func (c *Client) GetDelivery(ctx context.Context, id string) (*store.Delivery, error) {
	return fetch[store.Delivery](ctx, c, call{method: http.MethodGet, path: "/v1/deliveries/" + seg(id), retry: true})
}

// RetryDelivery sends a failed or dead delivery again: it is pending, due
// now. idempotencyKey is sent as the Idempotency-Key header (the route
// requires one; without it the call is refused unsent). Errors: IsConflict
// for a delivery that is not failed or dead. Role: admin.
func (c *Client) RetryDelivery(ctx context.Context, id, idempotencyKey string) (*store.Delivery, error) {
	path := "/v1/deliveries/" + seg(id) + "/retry"
	return fetch[store.Delivery](ctx, c, call{method: http.MethodPost, path: path, idemKey: idempotencyKey, keyRequired: true, retry: true})
}
