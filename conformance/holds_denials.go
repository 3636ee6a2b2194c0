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
	res := authorize(t, s, req)
	if res.Outcome != store.Denied || res.Hold.ID != "" {
		t.Errorf("Authorize(key %q) = %s, want %s %v", req.IdempotencyKey, res.Outcome, store.Denied, want)
		return
	}
	if d := cmpDiff(want, res.Denials, sortDenials); d != "" {
		t.Errorf("Authorize(key %q) denials mismatch (-want +got):\n%s", req.IdempotencyKey, d)
	}
}

// holdDenialTests run every denial case of consume through Authorize: the
// same fixtures give the same reasons, and no hold.
var holdDenialTests = func() []subtest {
	var out []subtest
	for _, dc := range denialCases {
		for _, explicit := range []bool{false, true} {
			name := "HoldDenied" + dc.name
			if explicit {
				name += "Explicit"
			}
			out = append(out, subtest{name, func(t *testing.T, s store.EntitlementStore, clock *Clock) {
				agent := newAgent()
				e := createEntitlement(t, s, dc.setup(agent, clock.Now()))
				if dc.revoke {
					if _, err := s.RevokeEntitlement(t.Context(), e.ID); err != nil {
						t.Fatalf("RevokeEntitlement: %v", err)
					}
				}
				req := holdRequest(agent, "k", 100)
				if dc.edit != nil {
					dc.edit(&req.ConsumeRequest)
				}
				if explicit {
					req.EntitlementID = e.ID
				}
				want := []entitlement.Denial{{EntitlementID: e.ID, Reason: dc.reason}}
				if dc.revoke && !explicit {
					want = []entitlement.Denial{{Reason: entitlement.ReasonNotFound}}
				}
				wantHoldDenied(t, s, req, want...)
				if got := getEntitlement(t, s, e.ID); heldOf(got) != 0 {
					t.Errorf("a denied hold left %d held", heldOf(got))
				}
			}})
		}
	}
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
			now := clock.Now()
			poor := createEntitlement(t, s, credits(agent, 10, now))
			used := quota(agent, 1, now)
			used.Quota.Remaining = 0
			used = createEntitlement(t, s, used)
			elsewhere := credits(agent, 1000, now)
			elsewhere.Scope.Service = "mail"
			elsewhere = createEntitlement(t, s, elsewhere)
			wantHoldDenied(t, s, holdRequest(agent, "k", 100),
				entitlement.Denial{EntitlementID: poor.ID, Reason: entitlement.ReasonInsufficientBalance},
				entitlement.Denial{EntitlementID: used.ID, Reason: entitlement.ReasonQuotaExhausted},
				entitlement.Denial{EntitlementID: elsewhere.ID, Reason: entitlement.ReasonScopeMismatch},
			)
		}},
	)
}()
