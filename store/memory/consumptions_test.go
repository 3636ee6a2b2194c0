// These tests are inside the package: they force index hash collisions and
// a full log, which no caller of the store can arrange.

package memory

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// logged adds c, made by req, to l under a forced index hash and returns its row.
func logged(t *testing.T, l *consumptionLog, hash uint64, req entitlement.ConsumeRequest, c entitlement.Consumption) row {
	t.Helper()
	sl := slot{hash: hash}
	if r := l.find(&sl, c.AgentID, c.IdempotencyKey); r != 0 {
		t.Fatalf("find(%q, %q) before add = row %d, want none", c.AgentID, c.IdempotencyKey, r)
	}
	id, err := uuid.Parse(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return l.add(&sl, &c, id, &req)
}

// sample returns a request and the consumption it made, of several shapes:
// credits and quota, with and without a named entitlement, a quota call with
// a cost (which the consumption does not carry).
func sample(i int, key string) (entitlement.ConsumeRequest, entitlement.Consumption) {
	rem := int64(i)
	c := entitlement.Consumption{
		ID:              uuid.NewString(),
		AgentID:         "agent-" + strconv.Itoa(i%3),
		EntitlementID:   "ent-" + strconv.Itoa(i%5),
		EntitlementType: entitlement.TypeQuota,
		Service:         "search",
		Tool:            "tool-" + strconv.Itoa(i%7),
		IdempotencyKey:  key,
		Units:           int64(i + 1),
		OccurredAt:      time.Date(2026, 11, 30, 12, 0, 0, i, time.UTC),
		RemainingAfter:  &rem,
	}
	req := entitlement.ConsumeRequest{AgentID: c.AgentID, Service: c.Service, Tool: c.Tool, IdempotencyKey: key, Units: c.Units}
	switch i % 4 {
	case 0, 2:
		c.EntitlementType = entitlement.TypeCredits
		c.Cost = money.Money{Cents: int64(i), Currency: "USD"}
		c.BalanceAfter = money.Money{Cents: money.MaxCents - int64(i), Currency: "USD"}
		c.RemainingAfter = nil
		req.Cost = &money.Money{Cents: int64(i), Currency: "USD"}
	case 3:
		req.Cost = &money.Money{Cents: 0, Currency: "EUR"}
	}
	if i%3 == 0 {
		req.EntitlementID = c.EntitlementID
	}
	c.Fingerprint = req.Fingerprint()
	return req, c
}

// TestConsumptionLogRoundTrip stores enough consumptions to span several
// record chunks and arena chunks (keys of the longest length), all under a
// handful of index hashes so every lookup walks a chain, and reads each one
// back exactly as it was stored.
func TestConsumptionLogRoundTrip(t *testing.T) {
	l := newConsumptionLog()
	n := 3*chunkSize + 17 // > 3 record chunks; × 255-byte keys > 3 arena chunks
	want := make([]entitlement.Consumption, n)
	rows := make([]row, n)
	for i := range n {
		key := strconv.Itoa(i) + strings.Repeat("k", entitlement.MaxKeyLength-len(strconv.Itoa(i)))
		var req entitlement.ConsumeRequest
		req, want[i] = sample(i, key)
		rows[i] = logged(t, &l, uint64(i%4), req, want[i])
	}
	if len(l.keys.chunks) < 3 || len(l.chunks) < 4 {
		t.Fatalf("test did not span chunks: %d arena chunks, %d record chunks", len(l.keys.chunks), len(l.chunks))
	}
	for i := range n {
		sl := slot{hash: uint64(i % 4)}
		r := l.find(&sl, want[i].AgentID, want[i].IdempotencyKey)
		if r != rows[i] {
			t.Fatalf("find #%d = row %d, want %d", i, r, rows[i])
		}
		if diff := cmp.Diff(want[i], l.consumption(r)); diff != "" {
			t.Fatalf("consumption #%d (-stored +read):\n%s", i, diff)
		}
	}
}

// TestConsumptionLogCollision checks that pairs sharing an index hash stay
// apart: same key for two agents, same agent for two keys.
func TestConsumptionLogCollision(t *testing.T) {
	l := newConsumptionLog()
	qa, a := sample(0, "k")
	qb, b := sample(1, "k") // another agent, same key
	qc, c := sample(3, "other")
	qc.AgentID, c.AgentID = a.AgentID, a.AgentID // same agent, another key
	ra, rb, rc := logged(t, &l, 7, qa, a), logged(t, &l, 7, qb, b), logged(t, &l, 7, qc, c)
	for _, tt := range []struct {
		agent, key string
		want       row
	}{
		{a.AgentID, "k", ra}, {b.AgentID, "k", rb}, {a.AgentID, "other", rc},
		{b.AgentID, "other", 0}, {a.AgentID, "K", 0}, {"agent-9", "k", 0},
	} {
		sl := slot{hash: 7}
		if got := l.find(&sl, tt.agent, tt.key); got != tt.want {
			t.Errorf("find(%q, %q) = row %d, want %d", tt.agent, tt.key, got, tt.want)
		}
	}
}

// TestConsumptionLogOrder checks that rows order by time, then by ID as
// their text compares, which is what cursors rely on.
func TestConsumptionLogOrder(t *testing.T) {
	l := newConsumptionLog()
	req, base := sample(0, "a")
	early, late := base, base
	early.ID, early.IdempotencyKey = "ffffffff-0000-4000-8000-000000000000", "early"
	late.ID, late.IdempotencyKey = "00000000-0000-4000-8000-000000000000", "late"
	late.OccurredAt = base.OccurredAt.Add(time.Nanosecond)
	tieLow, tieHigh := early, early
	tieLow.ID, tieLow.IdempotencyKey = "0a000000-0000-4000-8000-000000000000", "tie-low"
	tieHigh.ID, tieHigh.IdempotencyKey = "a0000000-0000-4000-8000-000000000000", "tie-high"
	re, rl, rlo, rhi := logged(t, &l, 1, req, early), logged(t, &l, 2, req, late), logged(t, &l, 3, req, tieLow), logged(t, &l, 4, req, tieHigh)
	for _, tt := range []struct {
		a, b row
		want bool
	}{{re, rl, true}, {rl, re, false}, {rlo, rhi, true}, {rhi, rlo, false}, {rhi, re, true}, {re, rhi, false}, {rlo, rl, true}} {
		if got := l.before(tt.a, tt.b); got != tt.want {
			t.Errorf("before(%s, %s) = %v, want %v", l.consumption(tt.a).ID, l.consumption(tt.b).ID, got, tt.want)
		}
		pa, pb := l.pos(tt.a), l.pos(tt.b)
		if got := pa.before(pb); got != tt.want {
			t.Errorf("pos(%s).before(pos(%s)) = %v, want %v", pa.id, pb.id, got, tt.want)
		}
	}
}

// TestInternerLast checks the one-entry memo per field against the table.
func TestInternerLast(t *testing.T) {
	in := newInterner()
	seq := []string{"a", "a", "b", "a", "", "b", "c", "c", "a"}
	seen := map[string]name{"": 0}
	for i, s := range seq {
		n := in.intern(nameTool, s)
		if m := in.intern(nameAgent, s); m != n {
			t.Fatalf("#%d: %q is %d in one field and %d in another", i, s, n, m)
		}
		if prev, ok := seen[s]; ok && prev != n {
			t.Fatalf("#%d: %q was %d, now %d", i, s, prev, n)
		}
		seen[s] = n
		if in.str(n) != s {
			t.Fatalf("#%d: str(%d) = %q, want %q", i, n, in.str(n), s)
		}
	}
	if len(in.strs) != 4 {
		t.Fatalf("interned %q, want \"\", a, b, c", in.strs)
	}
}

func TestAppendUUID(t *testing.T) {
	for range 100 {
		u := uuid.New()
		if got := string(appendUUID(nil, u)); got != u.String() {
			t.Fatalf("appendUUID = %s, want %s", got, u)
		}
	}
}

// TestStoreFull checks that a log with no row number left refuses a charge
// with an error and changes nothing, rather than wrapping its row numbers.
func TestStoreFull(t *testing.T) {
	s := New()
	ctx := t.Context()
	e, err := s.CreateEntitlement(ctx, entitlement.Entitlement{
		ID: "ent-1", AgentID: "agent-1", Type: entitlement.TypeCredits, Status: entitlement.StatusActive,
		Scope: entitlement.Scope{Service: "search"}, CreatedAt: time.Now(),
		Credits: entitlement.Credits{Balance: money.Money{Cents: 10, Currency: "USD"}, Granted: money.Money{Cents: 10, Currency: "USD"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.consumptions.len = math.MaxUint32 // as if full: add would be next
	req := entitlement.ConsumeRequest{AgentID: "agent-1", Service: "search", Tool: "q", IdempotencyKey: "k", Cost: &money.Money{Cents: 1, Currency: "USD"}}
	if res, err := s.CheckAndConsume(ctx, req); store.CodeOf(err) != store.CodeUnavailable {
		t.Fatalf("CheckAndConsume on a full store = %s, %v; want a %s error", res.Outcome, err, store.CodeUnavailable)
	}
	if got, _ := s.GetEntitlement(ctx, e.ID); got.Credits.Balance.Cents != 10 {
		t.Fatalf("balance = %v after a refused charge, want 10 cents", got.Credits.Balance)
	}
}
