package entitlement_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

// leaseWorld is one state of an entitlement with up to three lease slots
// (one per instance), the documents as stored, and what was charged and
// announced, per period.
type leaseWorld struct {
	e      entitlement.Entitlement
	leases [3]*entitlement.Lease // the slot's newest lease document, nil if none yet
	hold   *entitlement.Hold
	now    time.Time
	// charged and depleted count the charges and depleted events per
	// period (its ResetAt; the zero time for credits).
	charged  map[time.Time]int64
	depleted map[time.Time]int
	initial  int64
}

func (w *leaseWorld) clone() *leaseWorld {
	c := *w
	c.e = w.e.Clone()
	for i, l := range w.leases {
		if l != nil {
			cl := *l
			c.leases[i] = &cl
		}
	}
	if w.hold != nil {
		h := *w.hold
		c.hold = &h
	}
	c.charged, c.depleted = map[time.Time]int64{}, map[time.Time]int{}
	for k, v := range w.charged {
		c.charged[k] = v
	}
	for k, v := range w.depleted {
		c.depleted[k] = v
	}
	return &c
}

// key identifies a state for the search; periods are counted, not dated.
func (w *leaseWorld) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %d %v|", w.e.Status, w.e.Credits.Balance.Cents, w.e.Quota.Remaining, w.now.Sub(now))
	for _, o := range w.e.Leases {
		fmt.Fprintf(&b, "%s:%d ", o.ID, o.Limit)
	}
	for i, l := range w.leases {
		if l != nil {
			fmt.Fprintf(&b, "|%d %s %d %d %t %v", i, l.ID, l.Limit, l.Spent, l.Closed, l.Period.Sub(now))
		}
	}
	if w.hold != nil {
		fmt.Fprintf(&b, "|h %s", w.hold.Status)
	}
	fmt.Fprintf(&b, "|%v %v", w.charged, w.depleted)
	return b.String()
}

func (w *leaseWorld) docs() []*entitlement.Lease {
	var out []*entitlement.Lease
	for _, l := range w.leases {
		if l != nil && !l.Closed {
			out = append(out, l)
		}
	}
	return out
}

func (w *leaseWorld) period() time.Time {
	if w.e.Type == entitlement.TypeQuota {
		return w.e.Quota.ResetAt
	}
	return time.Time{}
}

// preamble is what a transaction on the entitlement does first: gather if
// the demand or a new period asks for it, then the lazy reset.
func (w *leaseWorld) preamble(demand int64) {
	if w.e.NeedsGather(w.now, demand) && !w.e.Gather(w.docs()) {
		panic("gather: a registered lease has no document")
	}
	w.e.Refresh(w.now)
	w.e.ExpireHolds(w.now)
}

func (w *leaseWorld) record(c entitlement.Consumption, period time.Time) {
	w.charged[period] += c.Units
	if c.EntitlementType == entitlement.TypeCredits {
		w.charged[period] += c.Cost.Cents - c.Units
	}
	if c.Depleted() {
		w.depleted[period]++
	}
}

func leaseReq(w *leaseWorld, amount int64) *entitlement.ConsumeRequest {
	if w.e.Type == entitlement.TypeCredits {
		return req(usd(amount), 1)
	}
	return req(nil, amount)
}

// leaseStep is one operation of the search: it changes w and returns an
// error when a rule's promise (beyond the invariants) is broken.
type leaseStep struct {
	name string
	do   func(w *leaseWorld) error
}

func leaseSteps(e entitlement.Entitlement) []leaseStep {
	var steps []leaseStep
	for i := range 3 {
		take := func(w *leaseWorld) {
			if l := w.leases[i]; l != nil && !l.Closed {
				return
			}
			w.preamble(0)
			if n := w.e.LeaseSize(w.now, 2); n > 0 {
				// The slot's earlier lease is closed, so its ID is free.
				l := w.e.TakeLease(fmt.Sprint("L", i), fmt.Sprint("instance", i), n, time.Time{})
				w.leases[i] = &l
			}
		}
		steps = append(steps,
			leaseStep{fmt.Sprintf("take %d", i), func(w *leaseWorld) error { take(w); return nil }},
			leaseStep{fmt.Sprintf("release %d", i), func(w *leaseWorld) error {
				if l := w.leases[i]; l != nil {
					w.preamble(0)
					w.e.Fold(l)
				}
				return nil
			}},
			leaseStep{fmt.Sprintf("refill %d", i), func(w *leaseWorld) error {
				if l := w.leases[i]; l != nil {
					w.preamble(0)
					w.e.Fold(l)
				}
				take(w)
				return nil
			}})
		for _, amount := range []int64{1, 2} {
			steps = append(steps, leaseStep{fmt.Sprintf("lease charge %d on %d", amount, i), func(w *leaseWorld) error {
				l := w.leases[i]
				if l == nil {
					return nil
				}
				lane := w.e.Clone() // what the lane knows: all but the balance is current
				c, reason, fits := lane.ChargeLease(w.now, l, leaseReq(w, amount), "c", "")
				if !fits || reason != "" {
					return nil
				}
				if c.Depleted() {
					return fmt.Errorf("a lease charge announced depletion: %+v", c)
				}
				w.record(c, l.Period)
				return nil
			}})
		}
	}
	for _, amount := range []int64{1, 2} {
		steps = append(steps, leaseStep{fmt.Sprintf("direct charge %d", amount), func(w *leaseWorld) error {
			w.preamble(amount)
			v := w.view()
			exact := v.Free()
			c, reason := w.e.Consume(w.now, leaseReq(w, amount), "c", "")
			switch {
			case reason == "" && amount > exact:
				return fmt.Errorf("consumed %d with %d available", amount, exact)
			case reason != "" && w.e.Status == entitlement.StatusActive && amount <= exact:
				return fmt.Errorf("denied %d (%s) with %d available", amount, reason, exact)
			case reason == "":
				w.record(c, w.period())
			}
			return nil
		}})
	}
	steps = append(steps,
		leaseStep{"gather", func(w *leaseWorld) error {
			w.preamble(0)
			if !w.e.Gather(w.docs()) {
				return fmt.Errorf("gather found a registered lease without a document")
			}
			return nil
		}},
		leaseStep{"revoke", func(w *leaseWorld) error {
			w.preamble(0)
			w.e.Gather(w.docs())
			for _, id := range w.e.ReleaseAll(w.now) {
				if w.hold != nil && w.hold.ID == id {
					w.hold.End(entitlement.HoldReleased, w.now)
				}
			}
			w.e.Status = entitlement.StatusRevoked
			return nil
		}},
		leaseStep{"authorize 1", func(w *leaseWorld) error {
			if w.hold != nil {
				return nil
			}
			w.preamble(1)
			r := &entitlement.HoldRequest{ConsumeRequest: *leaseReq(w, 1), TTL: time.Hour}
			if h, reason := w.e.Authorize(w.now, r, "h", ""); reason == "" {
				w.hold = &h
			}
			return nil
		}},
		leaseStep{"capture 1", func(w *leaseWorld) error {
			if w.hold == nil || w.hold.Status != entitlement.HoldOpen {
				return nil
			}
			w.preamble(1)
			ch, err := w.hold.Settle(entitlement.Amount{})
			if err != nil {
				return err
			}
			if c, ok := w.e.Capture(w.now, w.hold, ch, "h"); ok {
				w.record(c, w.period())
			}
			return nil
		}},
		leaseStep{"release hold", func(w *leaseWorld) error {
			if w.hold != nil && w.hold.Status == entitlement.HoldOpen {
				w.preamble(0)
				w.e.Release(w.now, w.hold)
			}
			return nil
		}})
	if e.Type == entitlement.TypeQuota {
		steps = append(steps, leaseStep{"reset", func(w *leaseWorld) error {
			if w.now.Equal(now) { // one new period
				w.now = w.e.Quota.ResetAt
			}
			return nil
		}})
	}
	return steps
}

// view is what a read shows: the entitlement with every open lease folded,
// then refreshed.
func (w *leaseWorld) view() entitlement.Entitlement {
	v := w.e.Clone()
	var docs []entitlement.Lease
	for _, l := range w.docs() {
		docs = append(docs, *l)
	}
	v.Exact(docs)
	v.Refresh(w.now)
	v.ExpireHolds(w.now)
	return v
}

// check verifies the invariants of lease.go on w.
func (w *leaseWorld) check() error {
	var reserved, spent int64
	open := map[string]bool{}
	for _, l := range w.docs() {
		open[l.ID] = true
		spent += l.Spent
		if l.Spent < 0 || l.Spent > l.Limit {
			return fmt.Errorf("lease %s spent %d of %d", l.ID, l.Spent, l.Limit)
		}
	}
	for _, o := range w.e.Leases {
		reserved += o.Limit
		if !open[o.ID] {
			return fmt.Errorf("registered lease %s has no open document", o.ID)
		}
		delete(open, o.ID)
	}
	if len(open) > 0 {
		return fmt.Errorf("open lease documents %v are not registered", open)
	}
	if w.e.Free() < 0 {
		return fmt.Errorf("free %d < 0", w.e.Free())
	}
	if len(w.e.Leases) > 0 && w.e.Free()+heldOf(&w.e) < 1 {
		return fmt.Errorf("settled − reserved = %d with leases open, want ≥ 1", w.e.Free()+heldOf(&w.e))
	}
	v := w.view()
	var exact int64
	limit := w.initial
	switch v.Type {
	case entitlement.TypeCredits:
		exact = v.Credits.Balance.Cents
	case entitlement.TypeQuota:
		exact = v.Quota.Remaining
		limit = v.Quota.Limit
	}
	if exact < 0 {
		return fmt.Errorf("exact balance %d < 0", exact)
	}
	p := time.Time{}
	if v.Type == entitlement.TypeQuota {
		p = v.Quota.ResetAt
	}
	if got := w.charged[p]; got != limit-exact {
		return fmt.Errorf("charged %d in the period, want initial %d − exact %d", got, limit, exact)
	}
	if got, want := w.depleted[p], btoi(exact == 0); got != want && w.charged[p] > 0 {
		return fmt.Errorf("%d depleted events with exact balance %d, want %d", got, exact, want)
	}
	return nil
}

func heldOf(e *entitlement.Entitlement) int64 {
	return e.Credits.Held.Cents + e.Quota.Held
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLeaseRules_Exhaustive explores every state reachable from a small
// entitlement with three lease slots by every interleaving of lease takes,
// lease charges, refills, releases, gathers, direct charges, holds, revoke
// and (quota) a period reset, and checks the invariants after every step.
func TestLeaseRules_Exhaustive(t *testing.T) {
	for _, e := range []entitlement.Entitlement{credits(7), quota(4, 4, now.Add(time.Hour))} {
		t.Run(string(e.Type), func(t *testing.T) {
			start := &leaseWorld{e: e, now: now, charged: map[time.Time]int64{}, depleted: map[time.Time]int{}, initial: e.Credits.Balance.Cents}
			start.e.Refresh(now)
			steps := leaseSteps(e)
			seen := map[string]bool{start.key(): true}
			queue := []*leaseWorld{start}
			for len(queue) > 0 {
				w := queue[0]
				queue = queue[1:]
				for _, st := range steps {
					next := w.clone()
					if err := st.do(next); err != nil {
						t.Fatalf("%s from %s: %v", st.name, w.key(), err)
					}
					if err := next.check(); err != nil {
						t.Fatalf("after %s from %s: %v", st.name, w.key(), err)
					}
					if k := next.key(); !seen[k] {
						seen[k] = true
						queue = append(queue, next)
					}
				}
			}
			if len(seen) < 100 {
				t.Errorf("explored %d states, want a real search", len(seen))
			}
			t.Logf("%d states", len(seen))
		})
	}
}

func TestEntitlement_LeaseSize(t *testing.T) {
	tests := []struct {
		name    string
		balance int64
		want    int64
		size    int64
	}{
		{"HalfOfWhatIsFreeLessOne", 101, 1000, 50},
		{"Wanted", 101, 10, 10},
		{"KeepsTheLastUnit", 2, 10, 0},
		{"Empty", 0, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := credits(tt.balance)
			if got := e.LeaseSize(now, tt.want); got != tt.size {
				t.Errorf("LeaseSize(want %d) on %d = %d, want %d", tt.want, tt.balance, got, tt.size)
			}
		})
	}
	sub := entitlement.Entitlement{Type: entitlement.TypeSubscription, Status: entitlement.StatusActive}
	if got := sub.LeaseSize(now, 10); got != 0 {
		t.Errorf("LeaseSize on a subscription = %d, want 0", got)
	}
}

// TestEntitlement_LeasesAndSpendControls checks where leases meet spend
// controls: a lease stops short of an armed low-balance threshold, a charge
// that could cross it gathers first, an entitlement with a spend limit is
// never leased (and one that got a limit gathers), and a lease charge obeys
// the per-call maximum.
func TestEntitlement_LeasesAndSpendControls(t *testing.T) {
	withAlert := func(balance, threshold int64) entitlement.Entitlement {
		e := credits(balance)
		e.Alerts = []entitlement.Alert{{Amount: usd(threshold)}}
		return e
	}
	t.Run("LeaseStopsAboveTheThreshold", func(t *testing.T) {
		e := withAlert(201, 150) // 50 may go before what is left reaches 150
		if got := e.LeaseSize(now, 1000); got != 24 {
			t.Errorf("LeaseSize = %d, want 24 (half of the 50 before the threshold, less one)", got)
		}
		e.TakeLease("l1", "a", 24, time.Time{})
		if got := e.LeaseSize(now, 1000); got != 12 {
			t.Errorf("second LeaseSize = %d, want 12 (half of the 26 left before it, less one)", got)
		}
	})
	t.Run("TriggeredAlertDoesNotBound", func(t *testing.T) {
		e := withAlert(101, 150)
		e.Alerts[0].Triggered = true
		if got := e.LeaseSize(now, 1000); got != 50 {
			t.Errorf("LeaseSize = %d, want 50: a triggered alert bounds nothing until re-armed", got)
		}
	})
	t.Run("ChargeThatCouldCrossGathers", func(t *testing.T) {
		e := withAlert(1000, 100)
		e.TakeLease("l1", "a", 400, time.Time{}) // 500 left outside it before the threshold
		if e.NeedsGather(now, 400) {
			t.Errorf("NeedsGather(400) = true, want false: it stays above the threshold whatever the lease spent")
		}
		if !e.NeedsGather(now, 499) {
			t.Errorf("NeedsGather(499) = false, want true: with the lease spent it could cross the threshold")
		}
	})
	t.Run("SpendLimitIsNeverLeased", func(t *testing.T) {
		e := credits(1000)
		if err := e.Apply(entitlement.Update{SpendLimit: &entitlement.Set[entitlement.SpendLimit]{
			To: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: *usd(500)}}}, now); err != nil {
			t.Fatal(err)
		}
		if got := e.LeaseSize(now, 100); got != 0 {
			t.Errorf("LeaseSize with a spend limit = %d, want 0", got)
		}
		e.Leases = []entitlement.OpenLease{{ID: "l1", Limit: 10}} // taken before the limit was set
		if !e.NeedsGather(now, 1) {
			t.Errorf("NeedsGather with a spend limit and an open lease = false, want true")
		}
	})
	t.Run("LeaseChargeObeysMaxPerCall", func(t *testing.T) {
		e := credits(1000)
		e.Limits.MaxPerCall = usd(20)
		l := e.TakeLease("l1", "a", 100, time.Time{})
		r := &entitlement.ConsumeRequest{AgentID: "a1", Service: "search", Tool: "web", IdempotencyKey: "k", Cost: usd(30)}
		if _, reason, fits := e.ChargeLease(now, &l, r, "c1", "fp"); reason != entitlement.ReasonMaxPerCall || !fits || l.Spent != 0 {
			t.Errorf("ChargeLease above maxPerCall = %q, fits %v, spent %d; want %s, nothing spent", reason, fits, l.Spent, entitlement.ReasonMaxPerCall)
		}
	})
}
