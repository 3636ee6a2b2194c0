package firestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

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
