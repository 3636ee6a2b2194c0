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
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// What one usage bucket totals, through the aggregations of usage_queries.go
// (usage.go finds the buckets).

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
				if err := u.aggregate(ctx, tx, k.refunds(u.side.byRange), nil, k.filter, u.q.From, u.q.To, k.refundField, &n, &unused); err != nil {
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

// aggregate runs q (filtered by the account, eq, extra and [from, to) of
// occurredAt) as an aggregation in tx: the count into count and, with sum,
// the sum of that field into total.
func (u *usageRun) aggregate(ctx context.Context, tx *firestore.Transaction, q Query, eq, extra []filter, from, to time.Time, sum string, count, total *int64) error {
	filters := slices.Concat([]filter{{u.side.field, "==", u.q.AgentID}}, eq, extra,
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
