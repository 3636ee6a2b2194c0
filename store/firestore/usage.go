package firestore

import (
	"context"
	"errors"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// Balance implements store.UsageReader: one query reads the agent's active
// entitlements, so the totals are of one snapshot.
func (s *Store) Balance(ctx context.Context, agentID string) (entitlement.Balance, error) {
	es, err := s.ActiveEntitlements(ctx, agentID)
	if err != nil {
		return entitlement.Balance{}, err
	}
	return entitlement.BalanceOf(agentID, es, s.clock()), nil
}

// Usage implements store.UsageReader. Every query of a page runs in one
// read-only transaction, so the page is one snapshot (a read-only
// transaction takes no locks and never holds up a charge). The queries are
// those of usage_queries.go: per bucket one skip-scan (a one-document
// query) and two to 2 + 2·currencies aggregations, each billed as one
// document read per 1,000 index entries it matches (docs/BENCHMARKS.md
// measures them).
func (s *Store) Usage(ctx context.Context, q usage.Query, p store.Page) ([]usage.Bucket, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", store.Wrap(store.CodeInvalid, err, "usage query")
	}
	after, ok, err := q.After(p.Cursor)
	if err != nil {
		return nil, "", store.Wrap(store.CodeInvalid, err, "usage cursor")
	}
	var (
		keys    []usage.Key
		buckets []usage.Bucket
	)
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		keys, buckets = nil, nil
		u := &usageRun{s: s, tx: tx, q: &q, limit: p.Size() + 1}
		if err := u.readKinds(ctx); err != nil {
			return err
		}
		add := func(k usage.Key, t usage.Tally) {
			keys, buckets = append(keys, k), append(buckets, q.Bucket(k, t))
		}
		if q.GroupBy.ByTime() {
			return u.byTime(ctx, after, ok, add)
		}
		return u.byName(ctx, after, ok, add)
	}, firestore.ReadOnly)
	if err != nil {
		return nil, "", fsfault.Read(err, "usage")
	}
	if size := p.Size(); len(buckets) > size {
		return buckets[:size], q.Cursor(keys[size-1]), nil
	}
	return buckets, "", nil
}

// usageRun is one page of a usage query being read: its transaction, and
// what the agent's entitlements say its consumptions can hold.
type usageRun struct {
	s     *Store
	tx    *firestore.Transaction
	q     *usage.Query
	limit int // buckets to find: the page and one more, to know if there is a next page
	// currencies are those of the agent's credits entitlements, any status:
	// a consumption's cost is always in its entitlement's currency, and
	// entitlements are never deleted. quota says whether it has a quota.
	currencies []string
	quota      bool
	found      int
}

// readKinds reads which currencies and types the agent's entitlements have.
func (u *usageRun) readKinds(ctx context.Context) error {
	query := u.s.build(qEntitlementsByAgent, filter{"agentId", "==", u.q.AgentID}).Select("type", "credits.balance.currency")
	snaps, err := u.tx.Documents(query).GetAll()
	if err != nil {
		return err
	}
	for _, snap := range snaps {
		f := read(snap)
		switch entitlement.Type(f.str("type")) {
		case entitlement.TypeQuota:
			u.quota = true
		case entitlement.TypeCredits:
			if cur := f.str("credits.balance.currency"); !slices.Contains(u.currencies, cur) {
				u.currencies = append(u.currencies, cur)
			}
		}
		if f.err != nil {
			return f.err
		}
	}
	return nil
}

// byTime finds the hour or day buckets after the cursor's: it skips to the
// first consumption at or after the end of the last bucket, totals that
// consumption's bucket, and goes on from its end. Empty hours and days
// cost nothing.
func (u *usageRun) byTime(ctx context.Context, after usage.Key, ok bool, add func(usage.Key, usage.Tally)) error {
	from := u.q.From
	if ok {
		_, end := u.q.Span(after.Wall)
		from = later(from, end)
	}
	for u.found < u.limit && from.Before(u.q.To) {
		query := u.s.build(qConsumptionsByAgent, filter{"agentId", "==", u.q.AgentID},
			filter{"occurredAt", ">=", from}, filter{"occurredAt", "<", u.q.To}).Select("occurredAt").Limit(1)
		snaps, err := u.tx.Documents(query).GetAll()
		if err != nil || len(snaps) == 0 {
			return err
		}
		f := read(snaps[0])
		at := f.instant("occurredAt")
		if f.err != nil {
			return f.err
		}
		end := u.q.Next(at)
		t, err := u.tally(ctx, usageByRange, nil, at, earlier(end, u.q.To))
		if err != nil {
			return err
		}
		add(usage.Key{Wall: u.q.Wall(at)}, t)
		u.found++
		from = end
	}
	return nil
}

// byName finds the service or (service, tool) buckets after the cursor's:
// it skips to the next distinct value among all the agent's consumptions
// (a one-document query ordered by the value) and totals it over the
// range; a value with no consumption in the range is passed over.
func (u *usageRun) byName(ctx context.Context, last usage.Key, ok bool, add func(usage.Key, usage.Tally)) error {
	for u.found < u.limit {
		snap, err := u.nextName(last, ok)
		if err != nil || snap == nil {
			return err
		}
		f := read(snap)
		key := usage.Key{Service: f.str("service")}
		shape, eq := usageByService, []filter{{"service", "==", key.Service}}
		if u.q.GroupBy == usage.ByTool {
			key.Tool = f.str("tool")
			shape, eq = usageByTool, append(eq, filter{"tool", "==", key.Tool})
		}
		if f.err != nil {
			return f.err
		}
		t, err := u.tally(ctx, shape, eq, u.q.From, u.q.To)
		if err != nil {
			return err
		}
		if t.Count > 0 {
			add(key, t)
			u.found++
		}
		last, ok = key, true
	}
	return nil
}

// nextName reads the first consumption of the next service, or (service,
// tool) pair, after last (the first of all when ok is false); nil when
// there is none.
func (u *usageRun) nextName(last usage.Key, ok bool) (*firestore.DocumentSnapshot, error) {
	agent := filter{"agentId", "==", u.q.AgentID}
	first := func(q firestore.Query) (*firestore.DocumentSnapshot, error) {
		snaps, err := u.tx.Documents(q.Select("service", "tool").Limit(1)).GetAll()
		if err != nil || len(snaps) == 0 {
			return nil, err
		}
		return snaps[0], nil
	}
	switch {
	case u.q.GroupBy == usage.ByService && !ok:
		return first(u.s.build(qUsageServices, agent))
	case u.q.GroupBy == usage.ByService:
		return first(u.s.build(qUsageServices, agent, filter{"service", ">", last.Service}))
	case !ok:
		return first(u.s.build(qUsageTools, agent))
	}
	snap, err := first(u.s.build(qUsageToolsOfService, agent, filter{"service", "==", last.Service}, filter{"tool", ">", last.Tool}))
	if err != nil || snap != nil {
		return snap, err
	}
	return first(u.s.build(qUsageTools, agent, filter{"service", ">", last.Service}))
}

// tally totals the agent's consumptions with eq in [from, to) through
// shape's aggregations; one with none costs only its count.
func (u *usageRun) tally(ctx context.Context, shape usageShape, eq []filter, from, to time.Time) (usage.Tally, error) {
	run := func(q Query, extra []filter, sum string) (count, total int64, err error) {
		filters := slices.Concat([]filter{{"agentId", "==", u.q.AgentID}}, eq, extra,
			[]filter{{"occurredAt", ">=", from}, {"occurredAt", "<", to}})
		query := u.s.build(q, filters...)
		agg := query.NewAggregationQuery().WithCount("n")
		if sum != "" {
			agg = agg.WithSum(sum, "sum")
		}
		res, err := agg.Transaction(u.tx).Get(ctx)
		if err != nil {
			return 0, 0, err
		}
		if count, err = aggregateInt(res, "n", q.Name); err != nil || sum == "" {
			return count, 0, err
		}
		total, err = aggregateInt(res, "sum", q.Name)
		return count, total, err
	}
	var t usage.Tally
	var err error
	if t.Count, _, err = run(shape.count, nil, ""); err != nil || t.Count == 0 {
		return t, err
	}
	if u.quota {
		quota := []filter{{"entitlementType", "==", string(entitlement.TypeQuota)}}
		_, units, err := run(shape.units, quota, "units")
		if err != nil {
			return t, err
		}
		_, refunded, err := run(shape.refundUnits, quota, "refund.units")
		if err != nil {
			return t, err
		}
		t.Units = units - refunded
	}
	for _, cur := range u.currencies {
		currency := []filter{{"cost.currency", "==", cur}}
		n, cents, err := run(shape.cents, currency, "cost.cents")
		if err != nil || n == 0 {
			if err != nil {
				return t, err
			}
			continue
		}
		_, refunded, err := run(shape.refundCents, currency, "refund.cost.cents")
		if err != nil {
			return t, err
		}
		if t.Cents == nil {
			t.Cents = map[string]int64{}
		}
		t.Cents[cur] = cents - refunded
	}
	return t, nil
}

// aggregateInt reads the integer alias of an aggregation result. Sums of
// integers stay integers in Firestore until they leave the int64 range,
// when they turn into doubles: that is corrupt data here (cents never sum
// that far), never rounded.
func aggregateInt(res firestore.AggregationResult, alias, query string) (int64, error) {
	v, ok := res[alias].(*firestorepb.Value)
	if !ok {
		return 0, store.Errorf(store.CodeInternal, "firestore: aggregation %s answered no %s", query, alias)
	}
	switch x := v.GetValueType().(type) {
	case *firestorepb.Value_IntegerValue:
		return x.IntegerValue, nil
	case *firestorepb.Value_NullValue:
		return 0, nil
	}
	return 0, store.Wrap(store.CodeInternal, errors.New("not an integer"), "firestore: aggregation %s: %s = %v", query, alias, v)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
