package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// ledgerEnv is a server whose key-requiring routes use a memory ledger.
func ledgerEnv(t *testing.T, ledger idempotency.Ledger) *env {
	t.Helper()
	return newEnvWith(t, ledger)
}

func grantBody(cents int) map[string]any {
	return map[string]any{"type": "credits", "scope": map[string]any{"service": "search"},
		"balance": map[string]any{"cents": cents, "currency": "USD"}}
}

func TestUseLedger_GrantNeedsKeyAndReplays(t *testing.T) {
	e := ledgerEnv(t, memledger.New("c"))
	path := "/v1/accounts/" + agentA + "/entitlements"
	missing := e.must(http.StatusBadRequest, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5)})
	p := missing.problem(t)
	if p.Type != problem.IdempotencyKeyMissing.URI() {
		t.Errorf("grant without a key: type %q, want %s", p.Type, problem.IdempotencyKeyMissing.URI())
	}
	if id := missing.Header.Get(api.HeaderRequestID); p.RequestID == "" || p.RequestID != id {
		t.Errorf("grant without a key: problem requestId %q, want the response's %s %q", p.RequestID, api.HeaderRequestID, id)
	}
	hdr := map[string]string{idempotency.HeaderKey: "g-1"}
	first := e.must(http.StatusCreated, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
	again := e.must(http.StatusCreated, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
	if again.Header.Get(idempotency.HeaderReplayed) != "true" || string(again.Body) != string(first.Body) {
		t.Errorf("retry: replayed %q, body %s; want the first answer replayed", again.Header.Get(idempotency.HeaderReplayed), again.Body)
	}
	e.must(http.StatusUnprocessableEntity, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(6), Header: hdr})
}

func TestUseLedger_OtherRoutesUntouched(t *testing.T) {
	e := ledgerEnv(t, memledger.New("c"))
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing, Body: map[string]any{}})
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing})
}

func TestUseLedger_RefusedCallersReserveNothing(t *testing.T) {
	l := memledger.New("c")
	e := ledgerEnv(t, l)
	path := "/v1/accounts/" + agentA + "/entitlements"
	hdr := map[string]string{idempotency.HeaderKey: "g-1"}
	e.must(http.StatusUnauthorized, req{Method: "POST", Path: path, Body: grantBody(5), Header: hdr})
	e.must(http.StatusUnauthorized, req{Method: "POST", Path: path, Key: "stp_admin_bogus", Body: grantBody(5), Header: hdr})
	id := idempotency.HashKey("api-test", "POST /v1/accounts/:agentId/entitlements", "g-1")
	if _, err := l.Get(context.Background(), id); err == nil {
		t.Errorf("an unauthenticated request left a ledger row")
	}
	// A key of the wrong role is refused before the ledger, too.
	e.must(http.StatusForbidden, req{Method: "POST", Path: path, Key: e.keys.Host, Body: grantBody(5), Header: hdr})
	if _, err := l.Get(context.Background(), id); err == nil {
		t.Errorf("a request refused with 403 left a ledger row")
	}
	e.must(http.StatusCreated, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
}

// unready is a ledger whose probe fails.
type unready struct{ *memledger.Ledger }

func (unready) Probe(context.Context) error { return errors.New("ledger down") }

func TestUseLedger_ReadyzProbesLedger(t *testing.T) {
	e := ledgerEnv(t, memledger.New("c"))
	e.must(http.StatusOK, req{Method: "GET", Path: "/readyz"})
	down := ledgerEnv(t, unready{memledger.New("c")})
	down.must(http.StatusServiceUnavailable, req{Method: "GET", Path: "/readyz"})
	// Reads do not need the ledger.
	down.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/entitlements", Key: down.keys.Admin})
}

// flakyGrants fails the first CreateEntitlement with Unavailable, as a
// store does when Firestore does not answer; uncertain says whether the
// write may have been applied.
type flakyGrants struct {
	store.EntitlementStore
	uncertain bool
	calls     *int
}

func (f flakyGrants) CreateEntitlement(ctx context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error) {
	*f.calls++
	if *f.calls == 1 {
		return entitlement.Entitlement{}, &store.Error{Code: store.CodeUnavailable, Message: "create entitlement", Uncertain: f.uncertain}
	}
	return f.EntitlementStore.CreateEntitlement(ctx, e)
}

// TestUseLedger_StoreFailureAndRetry: a grant whose store call failed with a
// definite answer releases its key, so the client's retry grants; one whose
// outcome is uncertain keeps the key in progress (409) for reconciliation.
func TestUseLedger_StoreFailureAndRetry(t *testing.T) {
	for _, tc := range []struct {
		name       string
		uncertain  bool
		wantRetry  int
		wantGrants int
	}{
		{"definite failure", false, http.StatusCreated, 2},
		{"uncertain failure", true, http.StatusConflict, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			e := newEnvWith(t, memledger.New("c"), func(c *api.Config) {
				c.Store = flakyGrants{EntitlementStore: c.Store, uncertain: tc.uncertain, calls: &calls}
			})
			path := "/v1/accounts/" + agentA + "/entitlements"
			hdr := map[string]string{idempotency.HeaderKey: "g-1"}
			e.must(http.StatusServiceUnavailable, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
			e.must(tc.wantRetry, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
			if calls != tc.wantGrants {
				t.Errorf("CreateEntitlement ran %d times, want %d", calls, tc.wantGrants)
			}
		})
	}
}

// TestUseLedger_RefundWithoutSignerReleases: a refund refused because no
// signing key is configured changed nothing, so its key is released.
func TestUseLedger_RefundWithoutSignerReleases(t *testing.T) {
	l := memledger.New("c")
	e := newEnvWith(t, l, func(c *api.Config) { c.Signer, c.Development = nil, true })
	hdr := map[string]string{idempotency.HeaderKey: "r-1"}
	e.must(http.StatusServiceUnavailable, req{Method: "POST", Path: "/v1/payments/p-1/refund", Key: e.keys.Billing, Header: hdr})
	id := idempotency.HashKey("api-test", "POST /v1/payments/:id/refund", "r-1")
	if _, err := l.Get(context.Background(), id); err == nil {
		t.Errorf("a refused refund left its key in progress")
	}
}

// deadlines records the deadline each readiness probe ran under.
type deadlines struct{ ledger, store time.Time }

type deadlineLedger struct {
	*memledger.Ledger
	d *deadlines
}

func (l deadlineLedger) Probe(ctx context.Context) error {
	l.d.ledger, _ = ctx.Deadline()
	return nil
}

type deadlineStore struct {
	store.EntitlementStore
	d *deadlines
}

func (s deadlineStore) Ping(ctx context.Context) error {
	s.d.store, _ = ctx.Deadline()
	return nil
}

// TestUseLedger_ReadyzOneDeadline: the ledger and store probes share one
// deadline, so /readyz answers within the readiness timeout, not twice it.
func TestUseLedger_ReadyzOneDeadline(t *testing.T) {
	var d deadlines
	e := newEnvWith(t, deadlineLedger{memledger.New("c"), &d}, func(c *api.Config) {
		c.Store = deadlineStore{c.Store, &d}
	})
	e.must(http.StatusOK, req{Method: "GET", Path: "/readyz"})
	if d.ledger.IsZero() || d.store.After(d.ledger) {
		t.Errorf("store probe deadline %v, ledger probe deadline %v; want the store's no later than the ledger's", d.store, d.ledger)
	}
}
