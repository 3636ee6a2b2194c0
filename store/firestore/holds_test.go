package firestore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

func holdReq(agent, key string, cents int64, ttl time.Duration, entitlementID string) entitlement.HoldRequest {
	r := entitlement.HoldRequest{ConsumeRequest: consumeReq(agent, key, cents), TTL: ttl}
	r.EntitlementID = entitlementID
	return r
}

func authorize(t *testing.T, s store.EntitlementStore, r entitlement.HoldRequest) entitlement.Hold {
	t.Helper()
	res, err := s.Authorize(context.Background(), r)
	if err != nil {
		t.Fatalf("Authorize %s: %v", r.IdempotencyKey, err)
	}
	if res.Outcome != store.Held {
		t.Fatalf("Authorize %s: outcome %q (%v), want held", r.IdempotencyKey, res.Outcome, res.Denials)
	}
	return res.Hold
}

func balance(t *testing.T, s store.EntitlementStore, id string) (balance, held int64) {
	t.Helper()
	e, err := s.GetEntitlement(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Credits.Balance.Cents, e.Credits.Held.Cents
}

func cents(c int64) *money.Money { m := usd(c); return &m }

// TestHold_DocumentLayout: a hold is the document of its idempotency key,
// with a hold map and no occurredAt until its capture adds the
// consumption's fields; the entitlement keeps the open holds and their
// earliest expiry.
func TestHold_DocumentLayout(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const agent = "agent-layout"
	e := createCredits(t, f.s, agent, 100)
	h := authorize(t, f.s, holdReq(agent, "k1", 30, time.Minute, ""))
	key := entitlement.ConsumptionKey(agent, "k1")
	if h.ID != key {
		t.Errorf("hold ID %s, want the key's document ID %s", h.ID, key)
	}

	d := f.doc(t, "consumptions", key)
	if got := at(d, "hold.status"); got != "held" {
		t.Errorf("hold.status = %v, want held", got)
	}
	if got := at(d, "hold.maxCost.cents"); got != int64(30) {
		t.Errorf("hold.maxCost.cents = %v, want 30", got)
	}
	if got := at(d, "occurredAt"); got != nil {
		t.Errorf("an open hold has occurredAt %v, want none", got)
	}
	ed := f.doc(t, "entitlements", e.ID)
	if holds, _ := at(ed, "holds").([]any); len(holds) != 1 || at(holds[0].(map[string]any), "amount") != int64(30) {
		t.Errorf("entitlement holds = %v, want one of 30", at(ed, "holds"))
	}
	if got, want := timeAt(ed, "holdsExpireAt"), h.ExpiresAt; !got.Equal(want) {
		t.Errorf("holdsExpireAt = %v, want %v", got, want)
	}
	if items, _, err := f.s.ListConsumptions(ctx, agent, time.Time{}, store.Page{}); err != nil || len(items) != 0 {
		t.Errorf("ListConsumptions with an open hold: %v, %v; want none", items, err)
	}
	if _, err := f.s.GetConsumption(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetConsumption of an open hold: %v, want not found", err)
	}

	res, err := f.s.CaptureHold(ctx, h.ID, agent, entitlement.Amount{Cost: cents(20)})
	if err != nil || res.Outcome != store.Captured {
		t.Fatalf("CaptureHold: %v %v, want captured", res.Outcome, err)
	}
	if res.Consumption.ID != key || res.Consumption.HoldID != key || res.Hold.ConsumptionID != key {
		t.Errorf("capture: consumption %s (hold %s), hold's consumption %s; want all %s",
			res.Consumption.ID, res.Consumption.HoldID, res.Hold.ConsumptionID, key)
	}
	d = f.doc(t, "consumptions", key)
	for field, want := range map[string]any{
		"hold.status": "captured", "hold.captured.cost.cents": int64(20), "holdId": key, "cost.cents": int64(20),
		"balanceAfter.cents": int64(80),
	} {
		if got := at(d, field); got != want {
			t.Errorf("captured hold: %s = %v, want %v", field, got, want)
		}
	}
	if got := timeAt(d, "occurredAt"); !got.Equal(f.clock.Now()) {
		t.Errorf("captured hold: occurredAt %v, want %v", got, f.clock.Now())
	}
	ed = f.doc(t, "entitlements", e.ID)
	if at(ed, "holds") != nil || at(ed, "holdsExpireAt") != nil {
		t.Errorf("entitlement without open holds has holds %v, holdsExpireAt %v; want neither", at(ed, "holds"), at(ed, "holdsExpireAt"))
	}
	items, _, err := f.s.ListConsumptions(ctx, agent, time.Time{}, store.Page{})
	if err != nil || len(items) != 1 || items[0].ID != key {
		t.Errorf("ListConsumptions after the capture: %v, %v; want the one consumption %s", items, err, key)
	}
}

// TestBatch_MixedOperations queues every kind of call on one entitlement
// and applies them as ONE batch: each gets its own answer, and the one
// commit writes every document once, also the hold that the batch's
// expiry ends and two calls then ask about.
func TestBatch_MixedOperations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const agent = "agent-mix"
	e := createCredits(t, f.s, agent, 1000)
	h1 := authorize(t, f.s, holdReq(agent, "h1", 30, time.Hour, e.ID))
	h2 := authorize(t, f.s, holdReq(agent, "h2", 30, time.Hour, e.ID))
	h3 := authorize(t, f.s, holdReq(agent, "h3", 30, time.Minute, e.ID))
	h4 := authorize(t, f.s, holdReq(agent, "h4", 30, time.Minute, e.ID))
	c1req := consumeReq(agent, "c1", 50)
	c1req.EntitlementID = e.ID
	c1, err := f.s.CheckAndConsume(ctx, c1req)
	if err != nil || c1.Outcome != store.Consumed {
		t.Fatalf("consume c1: %v %v", c1.Outcome, err)
	}
	f.clock.Advance(2 * time.Minute) // h3 and h4 expire

	waitQueued, resume := fsstore.PauseLane(f.s, e.ID)
	var wg sync.WaitGroup
	newReq := consumeReq(agent, "new", 5)
	newReq.EntitlementID = e.ID
	var (
		consumed [2]store.ConsumeResult
		held     store.HoldResult
		captured store.HoldResult
		released store.HoldResult
		refunded store.RefundResult
		lateRel  store.HoldResult
		ended    int
		errs     [9]error
	)
	calls := []func(){
		func() { consumed[0], errs[0] = f.s.CheckAndConsume(ctx, newReq) },
		func() { consumed[1], errs[1] = f.s.CheckAndConsume(ctx, newReq) },
		func() { held, errs[2] = f.s.Authorize(ctx, holdReq(agent, "h5", 40, time.Hour, e.ID)) },
		func() { captured, errs[3] = f.s.CaptureHold(ctx, h1.ID, agent, entitlement.Amount{Cost: cents(10)}) },
		func() { released, errs[4] = f.s.ReleaseHold(ctx, h2.ID, agent) },
		func() {
			refunded, errs[5] = f.s.RefundConsumption(ctx, c1.Consumption.ID, entitlement.Amount{Cost: cents(20)})
		},
		func() { _, errs[6] = f.s.CaptureHold(ctx, h4.ID, agent, entitlement.Amount{}) },
		func() { lateRel, errs[7] = f.s.ReleaseHold(ctx, h4.ID, agent) },
		func() { ended, errs[8] = f.s.ExpireHolds(ctx, 10) },
	}
	for _, c := range calls {
		wg.Go(c)
	}
	waitQueued(len(calls))
	f.log.take()
	resume()
	wg.Wait()

	for i, err := range errs {
		if i == 6 {
			continue
		}
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	outcomes := map[store.Outcome]int{consumed[0].Outcome: 1}
	outcomes[consumed[1].Outcome]++
	if outcomes[store.Consumed] != 1 || outcomes[store.Replay] != 1 {
		t.Errorf("two consumes of one key: outcomes %q and %q, want consumed and replay", consumed[0].Outcome, consumed[1].Outcome)
	}
	if held.Outcome != store.Held || captured.Outcome != store.Captured || released.Outcome != store.Released {
		t.Errorf("authorize %q, capture %q, release %q; want held, captured, released", held.Outcome, captured.Outcome, released.Outcome)
	}
	if refunded.Replayed || refunded.Consumption.Refund == nil || refunded.Consumption.Refund.Cost.Cents != 20 {
		t.Errorf("refund: %+v, want a refund of 20", refunded)
	}
	if !errors.Is(errs[6], entitlement.ErrHoldExpired) || store.CodeOf(errs[6]) != store.CodeConflict {
		t.Errorf("capture of a hold the batch expired: %v, want a conflict wrapping ErrHoldExpired", errs[6])
	}
	if lateRel.Outcome != store.Replay || lateRel.Hold.Status != entitlement.HoldExpired {
		t.Errorf("release of a hold the batch expired: %q, status %q; want replay, expired", lateRel.Outcome, lateRel.Hold.Status)
	}
	if ended != 2 {
		t.Errorf("ExpireHolds in the batch: ended %d, want 2 (h3, h4)", ended)
	}

	commits := f.log.take()
	checkCommits(t, commits)
	if len(commits) != 1 {
		t.Fatalf("%d commits, want the one batch", len(commits))
	}
	want := map[string]bool{
		f.path("entitlements", e.ID):                                     true,
		f.path("consumptions", entitlement.ConsumptionKey(agent, "new")): true,
		f.path("consumptions", entitlement.ConsumptionKey(agent, "h5")):  true,
	}
	for _, id := range []string{h1.ID, h2.ID, h3.ID, h4.ID, c1.Consumption.ID} {
		want[f.path("consumptions", id)] = true
	}
	events := 0
	for _, doc := range commits[0] {
		if !want[doc] {
			events++ // the consumption.refunded event
		}
	}
	if got := len(commits[0]); got != len(want)+1 || events != 1 {
		t.Errorf("the batch wrote %v; want %d documents and one event", commits[0], len(want))
	}

	for _, h := range []entitlement.Hold{h3, h4} {
		d := f.doc(t, "consumptions", h.ID)
		if at(d, "hold.status") != "expired" || !timeAt(d, "hold.endedAt").Equal(h.ExpiresAt) {
			t.Errorf("hold %s: status %v ended %v, want expired at %v", h.IdempotencyKey, at(d, "hold.status"), at(d, "hold.endedAt"), h.ExpiresAt)
		}
	}
	if b, h := balance(t, f.s, e.ID); b != 1000-50-5-10+20 || h != 40 {
		t.Errorf("balance %d held %d, want %d held 40", b, h, 1000-50-5-10+20)
	}
}

// TestBatch_WriteLimit: a batch that ends 256 expired holds (one write
// each) and takes on 300 consumes leaves what does not fit in one commit's
// 500 writes for the next batch; every call still succeeds.
func TestBatch_WriteLimit(t *testing.T) {
	f := newFixture(t, fsstore.WithMaxBatch(400))
	ctx := context.Background()
	const agent = "agent-limit"
	e := createCredits(t, f.s, agent, 10_000)
	openHolds(t, f.s, agent, e.ID, time.Minute)
	f.clock.Advance(2 * time.Minute)
	var wg sync.WaitGroup

	const consumes = 300
	waitQueued, resume := fsstore.PauseLane(f.s, e.ID)
	for i := range consumes {
		wg.Go(func() {
			r := consumeReq(agent, fmt.Sprintf("c%d", i), 1)
			r.EntitlementID = e.ID
			res, err := f.s.CheckAndConsume(ctx, r)
			if err != nil || res.Outcome != store.Consumed {
				t.Errorf("consume %d: %q %v, want consumed", i, res.Outcome, err)
			}
		})
	}
	waitQueued(consumes)
	f.log.take()
	resume()
	wg.Wait()
	commits := f.log.take()
	checkCommits(t, commits)
	for i, c := range commits {
		t.Logf("commit %d: %d writes", i, len(c))
	}
	if len(commits) < 2 {
		t.Errorf("%d commits for 256 expiries and %d consumes, want at least 2", len(commits), consumes)
	}
	if b, h := balance(t, f.s, e.ID); b != 10_000-consumes || h != 0 {
		t.Errorf("balance %d held %d, want %d held 0", b, h, 10_000-consumes)
	}
	hold, err := f.s.GetHold(ctx, entitlement.ConsumptionKey(agent, "h7"))
	if err != nil || hold.Status != entitlement.HoldExpired {
		t.Errorf("GetHold: %q %v, want expired", hold.Status, err)
	}
	if d := f.doc(t, "consumptions", hold.ID); at(d, "hold.status") != "expired" {
		t.Errorf("stored hold status %v, want expired", at(d, "hold.status"))
	}
}

// TestRevoke_ReleasesEveryOpenHold: a revoke ends the entitlement's 256
// open holds in its one transaction.
func TestRevoke_ReleasesEveryOpenHold(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const agent = "agent-revoke"
	e := createCredits(t, f.s, agent, 10_000)
	openHolds(t, f.s, agent, e.ID, time.Hour)
	f.log.take()
	got, err := f.s.RevokeEntitlement(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Credits.Held.Cents != 0 || len(got.Holds) != 0 {
		t.Errorf("revoked entitlement holds %d (%d held), want none", len(got.Holds), got.Credits.Held.Cents)
	}
	commits := f.log.take()
	checkCommits(t, commits)
	// The entitlement, its holds, the event, and its owner's candidates
	// (candidates.go).
	if want := 1 + entitlement.MaxOpenHolds + 1 + 1; len(commits) != 1 || len(commits[0]) != want {
		t.Errorf("revoke commits %d, want one of %d writes", len(commits), want)
	}
	for _, i := range []int{0, 100, 255} {
		h, err := f.s.GetHold(ctx, entitlement.ConsumptionKey(agent, fmt.Sprintf("h%d", i)))
		if err != nil || h.Status != entitlement.HoldReleased {
			t.Errorf("hold h%d after the revoke: %q %v, want released", i, h.Status, err)
		}
	}
}

// TestHold_EndOnAnotherInstance: an instance that did not authorize a hold
// reads it to find its entitlement, and captures, releases and expires it
// as the one that did.
func TestHold_EndOnAnotherInstance(t *testing.T) {
	f := newFixture(t)
	other := fsstore.New(f.raw, fsstore.WithCollectionPrefix(f.prefix), fsstore.WithClock(f.clock.Now))
	ctx := context.Background()
	const agent = "agent-other"
	e := createCredits(t, f.s, agent, 100)
	h1 := authorize(t, f.s, holdReq(agent, "h1", 30, time.Hour, ""))
	h2 := authorize(t, f.s, holdReq(agent, "h2", 30, time.Hour, ""))
	h3 := authorize(t, f.s, holdReq(agent, "h3", 30, time.Minute, ""))

	if _, err := other.CaptureHold(ctx, h1.ID, "agent-else", entitlement.Amount{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("capture of another agent's hold: %v, want not found", err)
	}
	res, err := other.CaptureHold(ctx, h1.ID, agent, entitlement.Amount{Cost: cents(12)})
	if err != nil || res.Outcome != store.Captured || res.Consumption.Cost.Cents != 12 {
		t.Fatalf("capture on the other instance: %q %v (%+v), want captured 12", res.Outcome, err, res.Consumption.Cost)
	}
	if res, err := f.s.CaptureHold(ctx, h1.ID, agent, entitlement.Amount{Cost: cents(12)}); err != nil || res.Outcome != store.Replay {
		t.Errorf("capture again on the instance that authorized it: %q %v, want replay", res.Outcome, err)
	}
	if res, err := other.ReleaseHold(ctx, h2.ID, agent); err != nil || res.Outcome != store.Released {
		t.Errorf("release on the other instance: %q %v, want released", res.Outcome, err)
	}
	if _, err := f.s.CaptureHold(ctx, h2.ID, agent, entitlement.Amount{}); store.CodeOf(err) != store.CodeConflict {
		t.Errorf("capture of a hold the other instance released: %v, want conflict", err)
	}
	f.clock.Advance(2 * time.Minute)
	if _, err := other.CaptureHold(ctx, h3.ID, agent, entitlement.Amount{}); !errors.Is(err, entitlement.ErrHoldExpired) {
		t.Errorf("capture of an expired hold on the other instance: %v, want ErrHoldExpired", err)
	}
	if res, err := f.s.ReleaseHold(ctx, h3.ID, agent); err != nil || res.Outcome != store.Replay || res.Hold.Status != entitlement.HoldExpired {
		t.Errorf("release of the expired hold: %q %v status %q, want replay of an expired hold", res.Outcome, err, res.Hold.Status)
	}
	if b, h := balance(t, f.s, e.ID); b != 88 || h != 0 {
		t.Errorf("balance %d held %d, want 88 held 0", b, h)
	}
}

// openHolds authorizes the most open holds an entitlement takes
// (entitlement.MaxOpenHolds), of one cent each, all at once: keys h0, h1, ….
func openHolds(t *testing.T, s *fsstore.Store, agent, entitlementID string, ttl time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range entitlement.MaxOpenHolds {
		wg.Go(func() { authorize(t, s, holdReq(agent, fmt.Sprintf("h%d", i), 1, ttl, entitlementID)) })
	}
	wg.Wait()
}

// TestExpireHolds_Sweep: the sweep finds, by holdsExpireAt, exactly the
// entitlements with a hold past its expiry, and leaves holdsExpireAt at
// the next expiry of those it swept.
func TestExpireHolds_Sweep(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := createCredits(t, f.s, "agent-a", 100)
	b := createCredits(t, f.s, "agent-b", 100)
	c := createCredits(t, f.s, "agent-c", 100)
	createCredits(t, f.s, "agent-d", 100) // no holds
	authorize(t, f.s, holdReq("agent-a", "a1", 10, time.Minute, ""))
	authorize(t, f.s, holdReq("agent-b", "b1", 10, 10*time.Minute, ""))
	authorize(t, f.s, holdReq("agent-c", "c1", 10, time.Minute, ""))
	c2 := authorize(t, f.s, holdReq("agent-c", "c2", 10, 5*time.Minute, ""))
	f.clock.Advance(2 * time.Minute)

	f.log.take()
	ended, err := f.s.ExpireHolds(ctx, 10)
	if err != nil || ended != 2 {
		t.Fatalf("ExpireHolds: %d %v, want 2 (a1, c1)", ended, err)
	}
	if n := len(f.log.take()); n != 2 {
		t.Errorf("the sweep made %d commits, want one per swept entitlement (2)", n)
	}
	if d := f.doc(t, "entitlements", a.ID); at(d, "holdsExpireAt") != nil {
		t.Errorf("a: holdsExpireAt %v, want none", at(d, "holdsExpireAt"))
	}
	if got := timeAt(f.doc(t, "entitlements", c.ID), "holdsExpireAt"); !got.Equal(c2.ExpiresAt) {
		t.Errorf("c: holdsExpireAt %v, want c2's expiry %v", got, c2.ExpiresAt)
	}
	if got, want := timeAt(f.doc(t, "entitlements", b.ID), "holdsExpireAt"), f.clock.Now().Add(8*time.Minute); !got.Equal(want) {
		t.Errorf("b: holdsExpireAt %v, want %v (untouched)", got, want)
	}
	if ended, err := f.s.ExpireHolds(ctx, 10); err != nil || ended != 0 {
		t.Errorf("second sweep: %d %v, want 0", ended, err)
	}
	if n := len(f.log.take()); n != 0 {
		t.Errorf("a sweep with nothing to end made %d commits, want 0", n)
	}
}

// TestExpireHolds_Limit: a sweep takes on at most limit entitlements.
func TestExpireHolds_Limit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := range 5 {
		agent := fmt.Sprintf("agent-%d", i)
		createCredits(t, f.s, agent, 100)
		authorize(t, f.s, holdReq(agent, "k", 10, time.Minute, ""))
	}
	f.clock.Advance(time.Hour)
	for _, want := range []int{2, 2, 1, 0} {
		if got, err := f.s.ExpireHolds(ctx, 2); err != nil || got != want {
			t.Errorf("ExpireHolds(2): %d %v, want %d", got, err, want)
		}
	}
}

// TestExpireHolds_ManyInstances: four instances sweeping at once end every
// hold exactly once.
func TestExpireHolds_ManyInstances(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const ents, perEnt = 12, 3
	for i := range ents {
		agent := fmt.Sprintf("agent-%d", i)
		createCredits(t, f.s, agent, 100)
		for j := range perEnt {
			authorize(t, f.s, holdReq(agent, fmt.Sprint(j), 10, time.Minute, ""))
		}
	}
	f.clock.Advance(time.Hour)
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	for range 4 {
		s := fsstore.New(f.raw, fsstore.WithCollectionPrefix(f.prefix), fsstore.WithClock(f.clock.Now))
		wg.Go(func() {
			n, err := s.ExpireHolds(ctx, ents)
			if err != nil {
				t.Errorf("ExpireHolds: %v", err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != ents*perEnt {
		t.Errorf("four sweeps ended %d holds, want %d", total, ents*perEnt)
	}
	h, err := f.s.GetHold(ctx, entitlement.ConsumptionKey("agent-3", "1"))
	if err != nil || h.Status != entitlement.HoldExpired {
		t.Errorf("GetHold: %q %v, want expired", h.Status, err)
	}
}
