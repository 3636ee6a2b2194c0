package api_test

import (
	"context"
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

// lostAnswer makes the first CreateEntitlement write and then fail as if
// its answer was lost (Uncertain), as a store does when the connection
// breaks after the commit.
type lostAnswer struct {
	store.EntitlementStore
	calls *int
}

func (l lostAnswer) CreateEntitlement(ctx context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error) {
	*l.calls++
	out, err := l.EntitlementStore.CreateEntitlement(ctx, e)
	if *l.calls == 1 && err == nil {
		return entitlement.Entitlement{}, &store.Error{Code: store.CodeUnavailable, Message: "create entitlement", Uncertain: true}
	}
	return out, err
}

// TestUseLedger_UncertainGrantHeals: a grant whose store call failed with
// an uncertain answer leaves its key in progress. If the change never
// committed (the fence proves it: the row is not marked written), the next
// request with the key after the handler's bound reclaims the key and
// grants, once. If it did commit, the key stays for the operator.
func TestUseLedger_UncertainGrantHeals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(s store.EntitlementStore, calls *int) store.EntitlementStore
		// wantRetry is the retry's status; wantGrants the entitlements after.
		wantRetry, wantGrants int
	}{
		{"NotWritten", func(s store.EntitlementStore, calls *int) store.EntitlementStore {
			return flakyGrants{EntitlementStore: s, uncertain: true, calls: calls}
		}, http.StatusCreated, 1},
		{"Written", func(s store.EntitlementStore, calls *int) store.EntitlementStore {
			return lostAnswer{EntitlementStore: s, calls: calls}
		}, http.StatusConflict, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			opts := idempotency.Options{Namespace: "api-test", Development: true, Fenced: true, ReclaimAfter: time.Nanosecond}
			e := newEnvLedger(t, memledger.New("c"), opts, func(c *api.Config) { c.Store = tc.store(c.Store, &calls) })
			path := "/v1/accounts/" + agentA + "/entitlements"
			hdr := map[string]string{idempotency.HeaderKey: "g-1"}
			e.must(http.StatusServiceUnavailable, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
			retry := e.must(tc.wantRetry, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5), Header: hdr})
			if tc.wantRetry == http.StatusConflict {
				if p := retry.problem(t); p.Type != problem.IdempotencyKeyInProgress.URI() {
					t.Errorf("retry after a written change: type %q, want %s", p.Type, problem.IdempotencyKeyInProgress.URI())
				}
			}
			items, _, err := e.store.ListEntitlements(context.Background(), agentA, store.EntitlementFilter{}, store.Page{})
			if err != nil || len(items) != tc.wantGrants {
				t.Errorf("ListEntitlements = %d, %v; want %d", len(items), err, tc.wantGrants)
			}
		})
	}
}
