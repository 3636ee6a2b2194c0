package conformance

import (
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// wantHoldDenied authorizes req and fails unless it is denied with exactly
// want (in any order), with no hold.
func wantHoldDenied(t *testing.T, s store.EntitlementStore, req entitlement.HoldRequest, want ...entitlement.Denial) {
	t.Helper()
	holdAnswer(req, authorize(t, s, req)).wantDenied(t, want)
}

// holdDenialTests run every denial case of consume through Authorize: the
// same fixtures give the same reasons, and no hold.
var holdDenialTests = func() []subtest {
	out := denialSubtests("HoldDenied", func(t *testing.T, s store.EntitlementStore, e entitlement.Entitlement, req entitlement.ConsumeRequest, want []entitlement.Denial) {
		wantHoldDenied(t, s, entitlement.HoldRequest{ConsumeRequest: req}, want...)
		if got := getEntitlement(t, s, e.ID); heldOf(got) != 0 {
			t.Errorf("a denied hold left %d held", heldOf(got))
		}
	})
	return append(out,
		subtest{"HoldDeniedNoEntitlements", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
			wantHoldDenied(t, s, holdRequest(newAgent(), "k", 1), entitlement.Denial{Reason: entitlement.ReasonNotFound})
		}},
		subtest{"HoldDeniedOtherAgentsEntitlement", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			theirs := createEntitlement(t, s, credits(newAgent(), 1000, clock.Now()))
			req := holdRequest(newAgent(), "k", 1)
			req.EntitlementID = theirs.ID
			wantHoldDenied(t, s, req, entitlement.Denial{EntitlementID: theirs.ID, Reason: entitlement.ReasonNotFound})
			req.EntitlementID = "no-such-entitlement"
			wantHoldDenied(t, s, req, entitlement.Denial{EntitlementID: "no-such-entitlement", Reason: entitlement.ReasonNotFound})
		}},
		subtest{"HoldDeniedEveryReason", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			agent := newAgent()
			wantHoldDenied(t, s, holdRequest(agent, "k", 100), everyReason(t, s, agent, clock.Now())...)
		}},
	)
}()
