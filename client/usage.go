package client

import (
	"context"
	"iter"
	"net/http"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/usage"
)

// Balance returns what an agent can spend now, in total: credits per
// currency, quotas per service, subscriptions in force. Role: billing,
// admin, reader (own).
func (c *Client) Balance(ctx context.Context, agentID string) (*entitlement.Balance, error) {
	path := "/v1/accounts/" + seg(agentID) + "/balance"
	return fetch[entitlement.Balance](ctx, c, call{method: http.MethodGet, path: path, retry: true})
}

// UsageQuery asks for an agent's usage in [From, To), in buckets of
// GroupBy, with hours and days counted in the IANA time zone TZ. Zero
// fields leave the server's defaults: To now, From 30 days before To,
// GroupBy day, TZ UTC.
type UsageQuery struct {
	From, To time.Time
	GroupBy  usage.GroupBy
	TZ       string
}

// UsagePage is one page of usage buckets, with the query as the server
// read it (its defaults filled in). The next page is asked with the same
// query and NextCursor; a query that left From or To to the server must
// send the ones this page answers, as AllUsage does.
type UsagePage struct {
	AgentID string        `json:"agentId"`
	From    time.Time     `json:"from"`
	To      time.Time     `json:"to"`
	GroupBy usage.GroupBy `json:"groupBy"`
	TZ      string        `json:"tz"`
	List[usage.Bucket]
}

// Usage returns one page of an agent's usage buckets. Role: billing,
// admin, reader (own).
func (c *Client) Usage(ctx context.Context, agentID string, q UsageQuery, p Page) (*UsagePage, error) {
	v := p.values()
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.GroupBy != "" {
		v.Set("groupBy", string(q.GroupBy))
	}
	if q.TZ != "" {
		v.Set("tz", q.TZ)
	}
	path := "/v1/accounts/" + seg(agentID) + "/usage"
	return fetch[UsagePage](ctx, c, call{method: http.MethodGet, path: path, query: v, retry: true})
}

// AllUsage ranges over an agent's usage buckets, as Usage pages them. The
// range the first page answers is the range of every page, so a query
// that leaves To to the server ("now") stays one query. Role: billing,
// admin, reader (own).
func (c *Client) AllUsage(ctx context.Context, agentID string, q UsageQuery) iter.Seq2[usage.Bucket, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[usage.Bucket], error) {
		page, err := c.Usage(ctx, agentID, q, p)
		if err != nil {
			return nil, err
		}
		q.From, q.To = page.From, page.To
		return &page.List, nil
	})
}
