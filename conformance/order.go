package conformance

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// NewInstances returns two stores on one fresh database, as two instances
// of Stipend: ender reads time from endClock, consumer from the real clock.
type NewInstances func(t *testing.T, endClock func() time.Time) (ender, consumer store.EntitlementStore)

// lateClock reads the time and only then lets its caller go on, lag later:
// a transaction that read the clock before it waited for its locks. Taken
// where the instant orders with the commit (after the transaction's reads,
// which lock what it reads), the lag is harmless; taken before the reads,
// every conflicting commit within the lag lands before an instant that
// claims to be later.
func lateClock(lag time.Duration) func() time.Time {
	return func() time.Time {
		now := time.Now()
		time.Sleep(lag) // widens the window; nothing is waited for
		return now
	}
}

// RunCommitOrderTests races the end of an entitlement (a payment's refund,
// a revoke) on one instance against consumes on another: every consumption
// that was charged, so committed before the end, must have occurredAt at or
// before the entitlement's revokedAt and the refund receipt's issuedAt. The
// ending instance's clock lags (see lateClock), so an instant read before
// the transaction locked what it changes shows. Stores read the clock after
// their locks: then the audit trail reads in commit order.
func RunCommitOrderTests(t *testing.T, newInstances NewInstances) {
	const (
		callers = 30
		trials  = 2
		lag     = 150 * time.Millisecond
	)
	ends := []struct {
		name string
		// end ends e (granted by payment p) on s and returns the instants the
		// audit trail shows for it.
		end func(ctx context.Context, s store.EntitlementStore, p payment.Payment, e entitlement.Entitlement) (revokedAt, issuedAt time.Time, err error)
	}{
		{"Refund", func(ctx context.Context, s store.EntitlementStore, p payment.Payment, _ entitlement.Entitlement) (time.Time, time.Time, error) {
			c, err := s.RefundPayment(ctx, p.ID, signing)
			if err != nil {
				return time.Time{}, time.Time{}, err
			}
			if len(c.Entitlements) != 1 || c.Entitlements[0].RevokedAt == nil {
				return time.Time{}, time.Time{}, fmt.Errorf("refund answered entitlements %+v, want one revoked", c.Entitlements)
			}
			return *c.Entitlements[0].RevokedAt, c.Receipt.IssuedAt, nil
		}},
		{"Revoke", func(ctx context.Context, s store.EntitlementStore, _ payment.Payment, e entitlement.Entitlement) (time.Time, time.Time, error) {
			got, err := s.RevokeEntitlement(ctx, e.ID)
			if err != nil {
				return time.Time{}, time.Time{}, err
			}
			if got.RevokedAt == nil {
				return time.Time{}, time.Time{}, fmt.Errorf("revoke answered %+v, want it revoked", got)
			}
			return *got.RevokedAt, *got.RevokedAt, nil
		}},
	}
	for _, tc := range ends {
		t.Run(tc.name, func(t *testing.T) {
			for trial := range trials {
				ender, consumer := newInstances(t, lateClock(lag))
				p, e := paidCredits(t, consumer, 1_000_000)
				charged := raceEnd(t, consumer, p.AgentID, callers, func() (time.Time, time.Time, error) {
					return tc.end(t.Context(), ender, p, e)
				})
				revokedAt, issuedAt := charged.revokedAt, charged.issuedAt
				if len(charged.consumptions) == 0 {
					t.Fatalf("trial %d: no consume was charged before the %s", trial, tc.name)
				}
				late := 0
				for _, c := range charged.consumptions {
					if c.OccurredAt.After(revokedAt) || c.OccurredAt.After(issuedAt) {
						late++
						if late <= 3 {
							t.Errorf("trial %d: consumption %s occurredAt %v, after revokedAt %v or issuedAt %v of the %s that committed after it",
								trial, c.ID, c.OccurredAt, revokedAt, issuedAt, tc.name)
						}
					}
				}
				if late > 0 {
					t.Fatalf("trial %d: %d of %d consumptions read later than the %s", trial, late, len(charged.consumptions), tc.name)
				}
				t.Logf("trial %d: %d consumptions, all at or before the %s at %v", trial, len(charged.consumptions), tc.name, revokedAt)
			}
		})
	}
}

// paidCredits creates and completes a payment granting cents USD of credits
// on the search service to a new agent.
func paidCredits(t *testing.T, s store.EntitlementStore, cents int64) (payment.Payment, entitlement.Entitlement) {
	t.Helper()
	agent := "agent-" + uuid.NewString()[:8]
	res, err := s.CreatePayment(t.Context(), payment.Payment{
		AgentID: agent, Amount: money.Money{Cents: cents, Currency: "USD"}, Provider: payment.ProviderManual,
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey: uuid.NewString(), Fingerprint: "fp",
	})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	c, err := s.CompletePayment(t.Context(), res.Payment.ID, signing)
	if err != nil {
		t.Fatalf("CompletePayment: %v", err)
	}
	return c.Payment, c.Entitlements[0]
}

// raced is what raceEnd saw: the stored consumptions and the instants of
// the end.
type raced struct {
	consumptions        []entitlement.Consumption
	revokedAt, issuedAt time.Time
}

// raceEnd runs callers that consume from agent's entitlement on s, over and
// over, until it is ended; once three consumes per caller were charged
// (the consumes flow), it ends it with end (retrying contention, which is
// safe). It returns the stored consumptions and the end's instants.
func raceEnd(t *testing.T, s store.EntitlementStore, agent string, callers int, end func() (time.Time, time.Time, error)) raced {
	t.Helper()
	var (
		wg      sync.WaitGroup
		charged atomic.Int64
		flowing = make(chan struct{})
		ended   = make(chan struct{})
	)
	for c := range callers {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-ended:
					return
				default:
				}
				res, err := s.CheckAndConsume(t.Context(), entitlement.ConsumeRequest{
					AgentID: agent, Service: "search", Tool: "web", IdempotencyKey: fmt.Sprint("c", c, "-", j),
					Cost: &money.Money{Cents: 3, Currency: "USD"},
				})
				switch {
				case err == nil && res.Outcome == store.Consumed:
					if charged.Add(1) == 3*int64(callers) {
						close(flowing)
					}
				case err == nil && res.Outcome == store.Denied:
					return // revoked: nothing more to charge
				}
			}
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-flowing:
	case <-allDone:
		t.Fatalf("the callers stopped after %d consumes were charged, want at least %d", charged.Load(), 3*callers)
	}
	var out raced
	var err error
	for try := 0; try < 5; try++ {
		if out.revokedAt, out.issuedAt, err = end(); store.CodeOf(err) != store.CodeUnavailable {
			break
		}
	}
	close(ended)
	wg.Wait()
	if err != nil {
		t.Fatalf("ending the entitlement among consumes: %v", err)
	}
	out.consumptions = listConsumptionPages(t, s, agent, time.Time{}, 100)
	return out
}
