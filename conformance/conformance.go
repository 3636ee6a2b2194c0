package conformance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/store"
)

// NewStore returns a fresh, empty entitlement store that reads time from now.
type NewStore func(t *testing.T, now func() time.Time) store.EntitlementStore

// NewDeliveryStore returns a fresh, empty delivery store that reads time from now.
type NewDeliveryStore func(t *testing.T, now func() time.Time) store.DeliveryStore

// NewLedger returns a fresh, empty idempotency ledger that reads time from now.
type NewLedger func(t *testing.T, now func() time.Time) idempotency.Ledger

// RunTests runs the contract of store.EntitlementStore: accounts,
// entitlements, CheckAndConsume and its denials, Check, consumptions, the
// event outbox, payments and receipts, holds (Authorize and its denials,
// capture, release, expiry), refunds, and instants kept as given (the zero
// time is an instant, an absent one stays absent).
func RunTests(t *testing.T, newStore NewStore) {
	t.Helper()
	runTable(t, newStore, accountTests, entitlementTests, consumeTests, denialTests,
		selectionTests, checkTests, consumptionTests, eventTests, paymentTests,
		authorizeTests, holdDenialTests, captureTests, releaseTests, expiryTests, refundTests, instantTests,
		limitTests, accountLimitTests)
	runTable(t, newStore, providerPaymentTests, providerRefundTests)
	runTable(t, newStore, usageTests) // usage.go: balance and usage (store.UsageReader)
	runTable(t, newStore, topUpTests)
	runTable(t, newStore, portalSessionTests)             // portal.go
	runTable(t, newStore, jobClaimTests)                  // claims.go: store.Claimer
	runTable(t, newStore, walletTests, walletChargeTests) // wallets.go, wallets_charge.go: store.Wallets
}

// RunConcurrencyTests runs the guarantees of store.EntitlementStore under
// concurrent callers: 20 concurrent CreatePayment calls with one key and 20
// CompletePayment calls of one payment (one payment, one grant, one
// receipt), MaxCallers callers charging one credits entitlement and one
// quota that hold exactly what they spend, a revocation among consumes,
// MaxCallers callers authorizing and capturing on one entitlement, captures
// racing releases of one hold (one wins), and holds and consumes racing on
// one key (one call is made), a Close among consumes (close.go), and
// MaxCallers callers for the members of one wallet, sending the same keys
// at once, whose caps are never exceeded (wallets_concurrency.go). Run it
// under -race. A failure names the seed
// of the random costs.
func RunConcurrencyTests(t *testing.T, newStore NewStore, opts ConcurrencyOptions) {
	t.Helper()
	opts = opts.withDefaults()
	t.Logf("conformance: concurrency seed %d (reproduce with ConcurrencyOptions{Seed: %d})", opts.Seed, opts.Seed)
	runTable(t, newStore, paymentConcurrencyTests, withOptions(opts, hotTests, holdConcurrencyTests, walletConcurrencyTests), closeTests)
	runTable(t, newStore, topUpConcurrencyTests)
}

// RunPropertyTests runs Rounds rounds, one after another, each on a fresh
// store: a random population of entitlements of every kind and state, 4 to
// MaxCallers concurrent callers reusing a small pool of keys with mixed
// parameters and costs, and the invariants of CheckAndConsume checked after
// the round (one charge per key, replays and conflicts that agree with it,
// stored consumptions that add up to what every balance lost, none below
// zero). Each round is followed by a hold round (HoldsNN) on another fresh
// store: the same population, callers mixing consumes, holds, captures of
// random amounts, releases, ExpireHolds sweeps and moves of the clock, and
// the invariants of holds (available never below zero, during and after;
// one call per key; every hold ended exactly once, as its captures and
// releases answered; initial − final = Σ consumes + Σ captures; replays
// identical). A third round (LimitsNN) puts spend controls on a credits
// entitlement and a quota and checks, under MaxCallers concurrent consumes,
// holds, captures and releases, that no limit is ever exceeded (limitRound);
// a fourth (WalletsNN) has MaxCallers callers for the members of one wallet
// send the same keys at once and checks that no member's cap is exceeded
// and the wallet lost exactly what they charged (walletCapsRace).
// Run it under -race. A failure names the seed and the round;
// rerun with ConcurrencyOptions{Seed: seed} to reproduce the same rounds. It
// stops after the first failing round.
func RunPropertyTests(t *testing.T, newStore NewStore, opts ConcurrencyOptions) {
	t.Helper()
	opts = opts.withDefaults()
	t.Logf("conformance: property seed %d (reproduce with ConcurrencyOptions{Seed: %d})", opts.Seed, opts.Seed)
	for round := range opts.Rounds {
		passed := t.Run(fmt.Sprintf("Round%02d", round), func(t *testing.T) {
			p := &property{t: t, seed: opts.Seed, round: round, rng: rand.New(rand.NewPCG(uint64(opts.Seed), uint64(round)))}
			clock := NewClock()
			p.run(newStore(t, clock.Now), clock, opts.MaxCallers)
		})
		passed = passed && t.Run(fmt.Sprintf("Holds%02d", round), func(t *testing.T) {
			p := &property{t: t, seed: opts.Seed, round: round, rng: rand.New(rand.NewPCG(uint64(opts.Seed), uint64(round)|1<<32))}
			clock := NewClock()
			r := &holdRound{property: p, s: newStore(t, clock.Now), clock: clock}
			r.run(opts.MaxCallers)
		})
		passed = passed && t.Run(fmt.Sprintf("Limits%02d", round), func(t *testing.T) {
			p := &property{t: t, seed: opts.Seed, round: round, rng: rand.New(rand.NewPCG(uint64(opts.Seed), uint64(round)|2<<32))}
			clock := NewClock()
			(&limitRound{property: p, s: newStore(t, clock.Now)}).run(clock, opts.MaxCallers)
		})
		passed = passed && t.Run(fmt.Sprintf("Wallets%02d", round), func(t *testing.T) {
			clock := NewClock()
			walletCapsRace(t, []store.EntitlementStore{newStore(t, clock.Now)}, clock, opts.MaxCallers, opts.Seed+int64(round))
		})
		if !passed {
			return // one failing round is enough to read
		}
	}
}

// RunDeliveryStoreTests runs the contract of store.DeliveryStore: endpoints
// (their updates, secret rotations and deletion included), idempotent
// enqueue, claims and their expiry, the results of attempts, listing, and
// inbound event records.
func RunDeliveryStoreTests(t *testing.T, newStore NewDeliveryStore) {
	t.Helper()
	runTable(t, newStore, endpointTests, endpointChangeTests, enqueueTests, claimTests, attemptTests,
		listDeliveryTests, inboundTests)
}

// RunDeliveryStoreConcurrencyTests runs the guarantees of store.DeliveryStore
// under concurrent callers: 20 concurrent enqueues of one key (one
// delivery), 4 and 20 workers claiming at once (each delivery claimed
// exactly once), 20 concurrent inbound records of one event (one new), and
// 6 concurrent secret rotations of one endpoint (one chain, none lost).
// Run it under -race.
func RunDeliveryStoreConcurrencyTests(t *testing.T, newStore NewDeliveryStore) {
	t.Helper()
	runTable(t, newStore, deliveryConcurrencyTests)
}

// RunLedgerTests runs the contract of idempotency.Ledger: reservation,
// fingerprint mismatch, completion and replay, completion and release only
// by the reservation's holder, expiry of completed results, the response
// size bound, compare-and-set reconciliation, the reclaim of fenced rows,
// and idempotency.Middleware on the ledger (a held key is a 409 naming the
// ledger's reference, a finished one replays).
func RunLedgerTests(t *testing.T, newLedger NewLedger) {
	t.Helper()
	runTable(t, newLedger, ledgerReserveTests, ledgerCompleteTests, ledgerResolveTests, ledgerReclaimTests, ledgerMiddlewareTests)
}

// RunLedgerConcurrencyTests runs the guarantee of idempotency.Ledger under
// concurrent callers: of 20 concurrent reservations of one key exactly one
// wins. Run it under -race.
func RunLedgerConcurrencyTests(t *testing.T, newLedger NewLedger) {
	t.Helper()
	runTable(t, newLedger, ledgerConcurrencyTests)
}

// RunFenceTests runs the fencing contract of a store and a ledger on one
// database (see store.Fence), for each store method a ledger route calls:
// a change with a fence that holds is made and marks the row written (which
// then is never reclaimed or released, only completed); a change whose
// reservation was reclaimed, reserved again or completed is refused and
// made nowhere; a reclaim of the row as read before a change that then
// committed is refused; a fence the store cannot check fails the change;
// and a change racing a reclaim of its row: exactly one of them wins. Run
// it under -race.
func RunFenceTests(t *testing.T, newFenced NewFenced) {
	t.Helper()
	for _, ch := range fencedChanges {
		for _, tc := range fenceCases {
			t.Run(ch.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				clock := NewClock()
				tc.run(t, newFenced(t, clock.Now), clock, ch)
			})
		}
	}
}

// ConcurrencyOptions tunes RunConcurrencyTests and RunPropertyTests.
type ConcurrencyOptions struct {
	Seed       int64 // 0: random; the seed is printed (t.Logf) and in every failure message
	Rounds     int   // rounds of RunPropertyTests; 0: a default suited to the memory store
	MaxCallers int   // upper bound of concurrent callers, 4..64; 0: 64
}

// Defaults of ConcurrencyOptions.
const (
	defaultRounds     = 30
	defaultMaxCallers = 64
	minCallers        = 4
)

func (o ConcurrencyOptions) withDefaults() ConcurrencyOptions {
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	if o.Rounds <= 0 {
		o.Rounds = defaultRounds
	}
	if o.MaxCallers == 0 {
		o.MaxCallers = defaultMaxCallers
	}
	o.MaxCallers = min(max(o.MaxCallers, minCallers), defaultMaxCallers)
	return o
}

// suiteCase is one named case of a suite over a backend of type S.
type suiteCase[S any] struct {
	name string
	run  func(t *testing.T, s S, clock *Clock)
}

// The cases of the three contracts.
type (
	subtest      = suiteCase[store.EntitlementStore]
	deliveryTest = suiteCase[store.DeliveryStore]
	ledgerTest   = suiteCase[idempotency.Ledger]
)

// runTable runs each case in parallel with a fresh backend from open and a
// fresh clock. Every suite of this package but the property rounds runs
// through it.
func runTable[S any](t *testing.T, open func(t *testing.T, now func() time.Time) S, tests ...[]suiteCase[S]) {
	t.Helper()
	for _, table := range tests {
		for _, tc := range table {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				clock := NewClock()
				tc.run(t, open(t, clock.Now), clock)
			})
		}
	}
}
