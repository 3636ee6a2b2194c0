package firestore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"golang.org/x/sync/errgroup"

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

// Usage implements store.UsageReader. Every query of a page reads at one
// instant, the read time of its first query (the agent's entitlements), so
// the page is one snapshot: the skip-scans as queries at that read time,
// each bucket's aggregations in a read-only transaction at that read time
// (a transaction of its own: a transaction lives at most 270 s, 60 s on
// the emulator, and a page of slow buckets could outlive one; read-only,
// it takes no locks and never holds up a charge). The queries are
// those of usage_queries.go: per page one query of the agent's entitlements
// and one refund count per kind of charge (quota units, each currency);
// per bucket one skip-scan (a one-document query) and one aggregation per
// kind, one more per kind the range has refunds of, and a count when the
// agent has a subscription. Each aggregation is billed as one document
// read per 1,000 index entries it matches. The skip-scans run one after
// another, each bucket's aggregations beside them, usageParallel buckets
// at a time (docs/BENCHMARKS.md measures them).
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
		tallies []*usage.Tally
	)
	u := &usageRun{s: s, q: &q, limit: p.Size() + 1}
	found, err := u.readKinds(ctx)
	if err == nil && found {
		err = u.readRefunds(ctx)
	}
	if err == nil && found && q.GroupBy.ByTime() {
		keys, tallies, err = u.byTime(ctx, after, ok)
	} else if err == nil && found {
		keys, tallies, err = u.byName(ctx, after, ok)
	}
	if err != nil {
		return nil, "", fsfault.Read(err, "usage")
	}
	size := min(len(keys), p.Size())
	buckets := make([]usage.Bucket, size)
	for i := range buckets {
		buckets[i] = q.Bucket(keys[i], *tallies[i])
	}
	if len(keys) > size {
		return buckets, q.Cursor(keys[size-1]), nil
	}
	return buckets, "", nil
}

// usageParallel bounds the buckets whose aggregations run at once.
const usageParallel = 8

// usageRun is one page of a usage query being read: the instant it reads
// at, and what the agent's entitlements say its consumptions can hold. Its
// queries may run concurrently, also inside one read-only transaction,
// whose reads change nothing in it.
type usageRun struct {
	s     *Store
	at    time.Time // the read time of every query
	q     *usage.Query
	limit int // buckets to find: the page and one more, to know if there is a next page
	// currencies are those of the agent's credits entitlements, any status:
	// a consumption's cost is always in its entitlement's currency, and
	// entitlements are never deleted. quota says whether it has a quota.
	currencies    []string
	quota         bool
	subscriptions bool
	// refunded says, per kind (entitlement.TypeQuota, or a currency),
	// whether any consumption of the range was refunded: most ranges have
	// few refunds or none, and a kind without any needs no refund sums.
	refunded map[string]bool
}

// readKinds reads which currencies and types the agent's entitlements
// have, and takes the read time of that query as the page's. found is
// false for an agent without entitlements, and so without consumptions
// (entitlements are never deleted).
func (u *usageRun) readKinds(ctx context.Context) (found bool, err error) {
	query := u.s.build(qEntitlementsByAgent, filter{"agentId", "==", u.q.AgentID}).Select("type", "credits.balance.currency")
	snaps, err := query.Documents(ctx).GetAll()
	if err != nil || len(snaps) == 0 {
		return false, err
	}
	u.at = snaps[0].ReadTime.Truncate(time.Microsecond) // read times are in microseconds
	for _, snap := range snaps {
		f := read(snap)
		switch entitlement.Type(f.str("type")) {
		case entitlement.TypeQuota:
			u.quota = true
		case entitlement.TypeSubscription:
			u.subscriptions = true
		case entitlement.TypeCredits:
			if cur := f.str("credits.balance.currency"); !slices.Contains(u.currencies, cur) {
				u.currencies = append(u.currencies, cur)
			}
		}
		if f.err != nil {
			return false, f.err
		}
	}
	return true, nil
}

// documents runs query at the page's read time.
func (u *usageRun) documents(ctx context.Context, query firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	return query.WithReadOptions(firestore.ReadTime(u.at)).Documents(ctx).GetAll()
}

// snapshot runs fn in a read-only transaction at the page's read time.
func (u *usageRun) snapshot(ctx context.Context, fn func(context.Context, *firestore.Transaction) error) error {
	return u.s.client.RunTransaction(ctx, fn, firestore.TransactionReadTime(u.at))
}

// readRefunds finds which kinds had a consumption of the range refunded:
// one count per kind over the whole range.
func (u *usageRun) readRefunds(ctx context.Context) error {
	return u.snapshot(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		u.refunded = map[string]bool{}
		g, ctx := errgroup.WithContext(ctx)
		var mu sync.Mutex
		for _, k := range u.kinds() {
			g.Go(func() error {
				var n, unused int64
				if err := u.aggregate(ctx, tx, k.refunds(usageByRange), nil, k.filter, u.q.From, u.q.To, k.refundField, &n, &unused); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				u.refunded[k.name] = n > 0
				return nil
			})
		}
		return g.Wait()
	})
}

// usageKind is one kind of charge a bucket totals apart: the consumptions
// of quotas (units) or those in one currency (cents).
type usageKind struct {
	name               string // entitlement.TypeQuota, or the currency
	filter             []filter
	field, refundField string
	// charges and refunds pick a shape's queries of this kind.
	charges, refunds func(usageShape) Query
}

// kinds lists the kinds of charge the agent's consumptions can hold.
func (u *usageRun) kinds() []usageKind {
	var out []usageKind
	if u.quota {
		out = append(out, usageKind{name: string(entitlement.TypeQuota),
			filter: []filter{{"entitlementType", "==", string(entitlement.TypeQuota)}}, field: "units", refundField: "refund.units",
			charges: func(s usageShape) Query { return s.units }, refunds: func(s usageShape) Query { return s.refundUnits }})
	}
	for _, cur := range u.currencies {
		out = append(out, usageKind{name: cur,
			filter: []filter{{"cost.currency", "==", cur}}, field: "cost.cents", refundField: "refund.cost.cents",
			charges: func(s usageShape) Query { return s.cents }, refunds: func(s usageShape) Query { return s.refundCents }})
	}
	return out
}

// byTime finds the hour or day buckets after the cursor's: it skips to the
// first consumption at or after the end of the last bucket, totals that
// consumption's bucket (beside the next skips), and goes on from its end.
// Empty hours and days cost nothing.
func (u *usageRun) byTime(ctx context.Context, after usage.Key, ok bool) ([]usage.Key, []*usage.Tally, error) {
	from := u.q.From
	if ok {
		_, end := u.q.Span(after.Wall)
		from = later(from, end)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(usageParallel)
	var keys []usage.Key
	var tallies []*usage.Tally
	for len(keys) < u.limit && from.Before(u.q.To) && gctx.Err() == nil {
		query := u.s.build(qConsumptionsByAgent, filter{"agentId", "==", u.q.AgentID},
			filter{"occurredAt", ">=", from}, filter{"occurredAt", "<", u.q.To}).Select("occurredAt").Limit(1)
		snaps, err := u.documents(ctx, query)
		var at time.Time
		if err == nil && len(snaps) > 0 {
			f := read(snaps[0])
			at, err = f.instant("occurredAt"), f.err
		}
		if err != nil || len(snaps) == 0 {
			return keys, tallies, errors.Join(err, g.Wait())
		}
		end := u.q.Next(at)
		t, to := new(usage.Tally), earlier(end, u.q.To)
		keys, tallies = append(keys, usage.Key{Wall: u.q.Wall(at)}), append(tallies, t)
		g.Go(func() (err error) {
			*t, err = u.tally(gctx, usageByRange, nil, at, to)
			return err
		})
		from = end
	}
	return keys, tallies, g.Wait()
}

// byName finds the service or (service, tool) buckets after the cursor's:
// it skips to the next distinct value among all the agent's consumptions
// (a one-document query ordered by the value) and totals it over the
// range, as many values at a time as buckets are still wanted; a value
// with no consumption in the range is passed over.
func (u *usageRun) byName(ctx context.Context, last usage.Key, ok bool) ([]usage.Key, []*usage.Tally, error) {
	var keys []usage.Key
	var tallies []*usage.Tally
	for done := false; len(keys) < u.limit && !done; {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(usageParallel)
		var batch []usage.Key
		var totals []*usage.Tally
		for len(batch) < u.limit-len(keys) && gctx.Err() == nil {
			key, found, err := u.nextName(ctx, last, ok)
			if err != nil {
				return nil, nil, errors.Join(err, g.Wait())
			}
			if !found {
				done = true
				break
			}
			shape, eq := usageByService, []filter{{"service", "==", key.Service}}
			if u.q.GroupBy == usage.ByTool {
				shape, eq = usageByTool, append(eq, filter{"tool", "==", key.Tool})
			}
			t := new(usage.Tally)
			batch, totals = append(batch, key), append(totals, t)
			g.Go(func() (err error) {
				*t, err = u.tally(gctx, shape, eq, u.q.From, u.q.To)
				return err
			})
			last, ok = key, true
		}
		if err := g.Wait(); err != nil {
			return nil, nil, err
		}
		for i, t := range totals {
			if t.Count > 0 {
				keys, tallies = append(keys, batch[i]), append(tallies, t)
			}
		}
	}
	return keys, tallies, nil
}

// nextName reads the key of the next service, or (service, tool) pair,
// after last (the first of all when ok is false); found is false when
// there is none.
func (u *usageRun) nextName(ctx context.Context, last usage.Key, ok bool) (key usage.Key, found bool, err error) {
	agent := filter{"agentId", "==", u.q.AgentID}
	first := func(q firestore.Query) (usage.Key, bool, error) {
		snaps, err := u.documents(ctx, q.Select("service", "tool").Limit(1))
		if err != nil || len(snaps) == 0 {
			return usage.Key{}, false, err
		}
		f := read(snaps[0])
		key := usage.Key{Service: f.str("service")}
		if u.q.GroupBy == usage.ByTool {
			key.Tool = f.str("tool")
		}
		return key, f.err == nil, f.err
	}
	switch {
	case u.q.GroupBy == usage.ByService && !ok:
		return first(u.s.build(qUsageServices, agent))
	case u.q.GroupBy == usage.ByService:
		return first(u.s.build(qUsageServices, agent, filter{"service", ">", last.Service}))
	case !ok:
		return first(u.s.build(qUsageTools, agent))
	}
	key, found, err = first(u.s.build(qUsageToolsOfService, agent, filter{"service", "==", last.Service}, filter{"tool", ">", last.Tool}))
	if err != nil || found {
		return key, found, err
	}
	return first(u.s.build(qUsageTools, agent, filter{"service", ">", last.Service}))
}

// tally totals the agent's consumptions with eq in [from, to) through
// shape's aggregations, all at once: per kind the count and sum of its
// charges and, if the range has refunds of that kind, their sum. Without a
// subscription (whose consumptions charge neither) the counts add up to
// the bucket's; with one, a count of all runs too.
func (u *usageRun) tally(ctx context.Context, shape usageShape, eq []filter, from, to time.Time) (usage.Tally, error) {
	kinds := u.kinds()
	counts := make([]int64, len(kinds))
	sums := make([]int64, len(kinds))
	refunded := make([]int64, len(kinds))
	var all, unused int64
	err := u.snapshot(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		g, ctx := errgroup.WithContext(ctx)
		if u.subscriptions {
			g.Go(func() error { return u.aggregate(ctx, tx, shape.count, eq, nil, from, to, "", &all, &unused) })
		}
		for i, k := range kinds {
			g.Go(func() error {
				return u.aggregate(ctx, tx, k.charges(shape), eq, k.filter, from, to, k.field, &counts[i], &sums[i])
			})
			if u.refunded[k.name] {
				g.Go(func() error {
					var n int64
					return u.aggregate(ctx, tx, k.refunds(shape), eq, k.filter, from, to, k.refundField, &n, &refunded[i])
				})
			}
		}
		return g.Wait()
	})
	if err != nil {
		return usage.Tally{}, err
	}
	var t usage.Tally
	for i, k := range kinds {
		t.Count += counts[i]
		switch {
		case k.name == string(entitlement.TypeQuota):
			t.Units = sums[i] - refunded[i]
		case counts[i] > 0:
			if t.Cents == nil {
				t.Cents = map[string]int64{}
			}
			t.Cents[k.name] = sums[i] - refunded[i]
		}
	}
	if u.subscriptions {
		t.Count = all
	}
	return t, nil
}

// aggregate runs q (filtered by the agent, eq, extra and [from, to) of
// occurredAt) as an aggregation in tx: the count into count and, with sum,
// the sum of that field into total.
func (u *usageRun) aggregate(ctx context.Context, tx *firestore.Transaction, q Query, eq, extra []filter, from, to time.Time, sum string, count, total *int64) error {
	filters := slices.Concat([]filter{{"agentId", "==", u.q.AgentID}}, eq, extra,
		[]filter{{"occurredAt", ">=", from}, {"occurredAt", "<", to}})
	query := u.s.build(q, filters...)
	agg := query.NewAggregationQuery().WithCount("n")
	if sum != "" {
		agg = agg.WithSum(sum, "sum")
	}
	res, err := agg.Transaction(tx).Get(ctx)
	if err != nil {
		return err
	}
	if *count, err = aggregateInt(res, "n", q.Name); err != nil || sum == "" {
		return err
	}
	*total, err = aggregateInt(res, "sum", q.Name)
	return err
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
