package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// TestClient_BalanceAndUsage reads an agent's balance and ranges over its
// usage by hour, two pages of buckets, while the service's clock moves:
// every page keeps the range of the first.
func TestClient_BalanceAndUsage(t *testing.T) {
	c, ctx := startStipend(t)
	const agent, calls = "agent-1", store.MaxPageSize + 20
	grant := svcCredits
	if _, err := c.admin.GrantEntitlement(ctx, agent, "grant", client.EntitlementGrant{Grant: grant, Balance: client.USD(1000)}); err != nil {
		t.Fatalf("GrantEntitlement: %v", err)
	}
	for i := range calls {
		if _, err := c.host.Consume(ctx, client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t",
			IdempotencyKey: fmt.Sprint("k", i), Cost: client.USD(2)}); err != nil {
			t.Fatalf("Consume %d: %v", i, err)
		}
		c.clock.Advance(time.Hour)
	}

	b, err := c.billing.Balance(ctx, agent)
	if err != nil || len(b.Credits) != 1 || b.Credits[0].Available != *client.USD(1000 - 2*calls) {
		t.Fatalf("Balance = %+v, %v; want %d USD available", b, err, 1000-2*calls)
	}

	before := c.requests.Load()
	var buckets, cents int64
	for bucket, err := range c.billing.AllUsage(ctx, agent, client.UsageQuery{GroupBy: usage.ByHour, TZ: "Asia/Kolkata"}) {
		if err != nil {
			t.Fatalf("AllUsage: %v", err)
		}
		if buckets == 0 {
			c.clock.Advance(time.Minute) // a default "to" would move with it
		}
		if bucket.Count != 1 || len(bucket.Amounts) != 1 || bucket.Start == nil || bucket.Start.Minute() != 0 {
			t.Errorf("bucket %d = %+v, want one call in a local hour", buckets, bucket)
		}
		buckets++
		cents += bucket.Amounts[0].Cents
	}
	if buckets != calls || cents != 2*calls {
		t.Errorf("AllUsage = %d buckets of %d cents, want %d of %d", buckets, cents, calls, 2*calls)
	}
	if n := c.requests.Load() - before; n != 2 {
		t.Errorf("AllUsage fetched %d pages, want 2", n)
	}

	_, err = c.billing.Usage(ctx, agent, client.UsageQuery{TZ: "Nowhere/Special"}, client.Page{})
	var p *client.Problem
	if !errors.As(err, &p) || len(p.Errors) != 1 || p.Errors[0].Field != "tz" {
		t.Errorf("Usage(unknown zone) = %v, want a problem naming tz", err)
	}
}
