package mcpgate_test

import (
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/syncbuf"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store/memory"
)

// clock is a settable clock for the Stipend of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// stipend is a real Stipend REST service on the memory store, on loopback.
type stipend struct {
	url   string
	clock *clock
	store *memory.Store
	// host charges (the gate's key); admin grants and reads.
	host, admin *client.Client
	hostKey     string
	// readerKey may read agent-1 but not charge: a misconfigured gate's key.
	readerKey string
}

func startStipend(tb testing.TB) *stipend {
	tb.Helper()
	hostKey, host, err := apikey.Generate("host", apikey.RoleHost, nil)
	if err != nil {
		tb.Fatal(err)
	}
	adminKey, admin, err := apikey.Generate("admin", apikey.RoleAdmin, nil)
	if err != nil {
		tb.Fatal(err)
	}
	readerKey, reader, err := apikey.Generate("reader", apikey.RoleReader, []string{"agent-1"})
	if err != nil {
		tb.Fatal(err)
	}
	keys, err := apikey.NewSet([]apikey.Key{host, admin, reader})
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := receipt.NewEphemeralKeyring()
	if err != nil {
		tb.Fatal(err)
	}
	clk := &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	st := memory.New(memory.WithClock(clk.Now))
	srv, err := api.New(api.Config{Store: st, Keys: keys, Signer: signer, Development: true, Now: clk.Now})
	if err != nil {
		tb.Fatalf("api.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(ts.Close)
	s := &stipend{url: ts.URL, clock: clk, store: st, hostKey: hostKey, readerKey: readerKey}
	fast := client.WithRetry(3, time.Millisecond, 10*time.Millisecond)
	if s.host, err = client.New(ts.URL, hostKey, fast); err != nil {
		tb.Fatal(err)
	}
	if s.admin, err = client.New(ts.URL, adminKey, fast); err != nil {
		tb.Fatal(err)
	}
	return s
}

// grantCredits gives agent cents USD of credits for the weather service.
func (s *stipend) grantCredits(tb testing.TB, agent string, cents int64) *entitlement.Entitlement {
	tb.Helper()
	e, err := s.admin.GrantEntitlement(tb.Context(), agent, "grant-credits-"+agent, client.EntitlementGrant{
		Grant:   payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "weather"}},
		Balance: &money.Money{Cents: cents, Currency: "USD"},
	})
	if err != nil {
		tb.Fatalf("GrantEntitlement(credits for %s): %v", agent, err)
	}
	return e
}

// grantQuota gives agent a daily quota of limit units for the weather service.
func (s *stipend) grantQuota(tb testing.TB, agent string, limit int64) *entitlement.Entitlement {
	tb.Helper()
	e, err := s.admin.GrantEntitlement(tb.Context(), agent, "grant-quota-"+agent, client.EntitlementGrant{
		Grant: payment.Grant{Type: entitlement.TypeQuota, Scope: entitlement.Scope{Service: "weather"}, Limit: limit, Period: entitlement.PeriodDay},
	})
	if err != nil {
		tb.Fatalf("GrantEntitlement(quota for %s): %v", agent, err)
	}
	return e
}

// entitlement reads an entitlement as it is now.
func (s *stipend) entitlement(tb testing.TB, id string) *entitlement.Entitlement {
	tb.Helper()
	e, err := s.admin.GetEntitlement(tb.Context(), id)
	if err != nil {
		tb.Fatalf("GetEntitlement(%s): %v", id, err)
	}
	return e
}

// wantCredits checks the balance and the held part of credits entitlement id.
func (s *stipend) wantCredits(tb testing.TB, id string, balance, held int64) {
	tb.Helper()
	e := s.entitlement(tb, id)
	if e.Credits.Balance.Cents != balance || e.Credits.Held.Cents != held {
		tb.Errorf("entitlement %s: balance %d cents, held %d; want balance %d, held %d",
			id, e.Credits.Balance.Cents, e.Credits.Held.Cents, balance, held)
	}
}

// consumptionByKey returns the consumption agent's idempotency key made,
// read from the service, and fails tb if there is none.
func (s *stipend) consumptionByKey(tb testing.TB, agent, key string) entitlement.Consumption {
	tb.Helper()
	page, err := s.admin.ListConsumptions(tb.Context(), agent, time.Time{}, client.Page{})
	if err != nil {
		tb.Fatalf("ListConsumptions(%s): %v", agent, err)
	}
	for _, c := range page.Items {
		if c.IdempotencyKey == key {
			return c
		}
	}
	tb.Fatalf("agent %s has no consumption with key %s among %d", agent, key, len(page.Items))
	return entitlement.Consumption{}
}

// textLogger is a slog.Logger writing text lines into log.
func textLogger(log *syncbuf.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(log, nil)) }
