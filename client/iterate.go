package client

import (
	"context"
	"iter"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// The All methods range over every item of a list, fetching page after
// page (of the server's default size) as the loop asks for more:
//
//	for e, err := range c.AllEntitlements(ctx, agent, client.EntitlementFilter{}) {
//		if err != nil {
//			return err
//		}
//		…
//	}
//
// A page that fails ends the loop with its error (and a zero item); nothing
// more is fetched once the loop stops. Each page is one call with the
// retries of its List method.

// all ranges over the items of the pages list returns, from the first.
func all[T any](ctx context.Context, list func(context.Context, Page) (*List[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		p := Page{}
		for {
			page, err := list(ctx, p)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range page.Items {
				if !yield(item, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			p.Cursor = page.NextCursor
		}
	}
}

// AllEntitlements ranges over an agent's entitlements that f selects, as
// ListEntitlements pages them. Role: billing, admin, reader (own).
func (c *Client) AllEntitlements(ctx context.Context, agentID string, f EntitlementFilter) iter.Seq2[entitlement.Entitlement, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[entitlement.Entitlement], error) {
		return c.ListEntitlements(ctx, agentID, f, p)
	})
}

// AllConsumptions ranges over an agent's consumptions (since a time, if
// not zero), as ListConsumptions pages them. Role: billing, admin, reader
// (own).
func (c *Client) AllConsumptions(ctx context.Context, agentID string, since time.Time) iter.Seq2[entitlement.Consumption, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[entitlement.Consumption], error) {
		return c.ListConsumptions(ctx, agentID, since, p)
	})
}

// AllReceipts ranges over an agent's receipts, as ListReceipts pages them.
// Role: billing, admin, reader (own).
func (c *Client) AllReceipts(ctx context.Context, agentID string) iter.Seq2[receipt.Signed, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[receipt.Signed], error) {
		return c.ListReceipts(ctx, agentID, p)
	})
}

// AllDeliveries ranges over the deliveries that f selects, as
// ListDeliveries pages them. Role: admin.
func (c *Client) AllDeliveries(ctx context.Context, f store.DeliveryFilter) iter.Seq2[store.Delivery, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[store.Delivery], error) {
		return c.ListDeliveries(ctx, f, p)
	})
}

// AllWebhookEndpoints ranges over the webhook endpoints, as
// ListWebhookEndpoints pages them. Role: admin.
func (c *Client) AllWebhookEndpoints(ctx context.Context) iter.Seq2[store.Endpoint, error] {
	return all(ctx, c.ListWebhookEndpoints)
}
