package firestore

import (
	"context"
	"errors"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// Balance implements store.UsageReader: one query reads the agent's active
// entitlements, and their open leases are read at its read time (exact
// reads, reads_exact.go), so the totals are of one snapshot.
func (s *Store) Balance(ctx context.Context, agentID string) (entitlement.Balance, error) {
	es, err := s.activeEntitlements(ctx, true, agentID) // exact: leases folded in
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
	side  usageSide // the account's side of its consumptions (usage_queries.go)
	limit int       // buckets to find: the page and one more, to know if there is a next page
	// currencies are those of the credits entitlements the account's
	// consumptions were charged to, any status:
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

// readKinds reads which currencies and types the entitlements the
// account's consumptions were charged to have, and takes the read time of
// the first query as the page's: the account's own entitlements, read
// beside the account (which says on which side of a consumption the
// account is, side: a wallet's usage is its members' calls charged to it;
// its kind never changes); then, for an agent, at that read time, the
// wallets it charged (qWalletsCharged, a skip-scan of one query per wallet,
// one for an agent that never charged a wallet) and their entitlements.
// found is false when there are none, and so no consumptions (entitlements
// are never deleted).
func (u *usageRun) readKinds(ctx context.Context) (found bool, err error) {
	var (
		g       errgroup.Group
		account []*firestore.DocumentSnapshot
	)
	g.Go(func() (err error) {
		account, err = u.s.client.GetAll(ctx, []*firestore.DocumentRef{u.s.doc(colAccounts, u.q.AgentID)})
		return err
	})
	snaps, err := u.s.build(qEntitlementsByAgent, filter{"agentId", "==", u.q.AgentID}).Select("type", "credits.balance.currency").Documents(ctx).GetAll()
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return false, err
	}
	u.at, u.side = account[0].ReadTime, usageOfAgent
	if len(snaps) > 0 {
		u.at = snaps[0].ReadTime
	}
	u.at = u.at.Truncate(time.Microsecond) // read times are in microseconds
	if account[0].Exists() {
		a, err := accountFrom(account[0])
		if err != nil {
			return false, err
		}
		if a.IsWallet() {
			u.side = usageOfWallet
		}
	}
	if err := u.addKinds(snaps); err != nil || u.side.field != usageOfAgent.field {
		return len(snaps) > 0, err
	}
	wallets, err := u.walletsCharged(ctx)
	if err != nil {
		return false, err
	}
	for chunk := range slices.Chunk(wallets, 30) { // the most an "in" filter takes
		query := u.s.build(qEntitlementsByAgent, filter{"agentId", "in", chunk}).Select("type", "credits.balance.currency")
		more, err := u.documents(ctx, query)
		if err != nil {
			return false, err
		}
		if err := u.addKinds(more); err != nil {
			return false, err
		}
		snaps = append(snaps, more...)
	}
	return len(snaps) > 0, nil
}

// addKinds records the types and currencies of the entitlements snaps.
func (u *usageRun) addKinds(snaps []*firestore.DocumentSnapshot) error {
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
			return f.err
		}
	}
	return nil
}

// walletsCharged lists the wallets the agent's consumptions were charged
// to, by a skip-scan: one one-document query per wallet, and one that
// finds no more (for most agents, the only one).
func (u *usageRun) walletsCharged(ctx context.Context) ([]string, error) {
	var wallets []string
	for {
		filters := []filter{{"agentId", "==", u.q.AgentID}}
		if n := len(wallets); n > 0 {
			filters = append(filters, filter{"walletId", ">", wallets[n-1]})
		}
		snaps, err := u.documents(ctx, u.s.build(qWalletsCharged, filters...).Select("walletId").Limit(1))
		if err != nil || len(snaps) == 0 {
			return wallets, err
		}
		f := read(snaps[0])
		wallets = append(wallets, f.str("walletId"))
		if f.err != nil {
			return nil, f.err
		}
	}
}

// documents runs query at the page's read time.
func (u *usageRun) documents(ctx context.Context, query firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	return query.WithReadOptions(firestore.ReadTime(u.at)).Documents(ctx).GetAll()
}

// snapshot runs fn in a read-only transaction at the page's read time.
func (u *usageRun) snapshot(ctx context.Context, fn func(context.Context, *firestore.Transaction) error) error {
	return u.s.client.RunTransaction(ctx, fn, firestore.TransactionReadTime(u.at))
}

// byTime finds the hour or day buckets after the cursor's: it skips to the
// first consumption at or after the end of the last bucket, totals that
// consumption's bucket (beside the next skips), and goes on from its end.
// Empty hours and days cost nothing.
func (u *usageRun) byTime(ctx context.Context, after usage.Key, ok bool) ([]usage.Key, []*usage.Tally, error) {
	from := u.q.From
	if ok {
		_, end := u.q.Span(after.Wall)
		if end.After(from) {
			from = end
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(usageParallel)
	var keys []usage.Key
	var tallies []*usage.Tally
	for len(keys) < u.limit && from.Before(u.q.To) && gctx.Err() == nil {
		query := u.s.build(u.side.byTime, filter{u.side.field, "==", u.q.AgentID},
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
		t, to := new(usage.Tally), end
		if u.q.To.Before(end) {
			to = u.q.To
		}
		keys, tallies = append(keys, usage.Key{Wall: u.q.Wall(at)}), append(tallies, t)
		g.Go(func() (err error) {
			*t, err = u.tally(gctx, u.side.byRange, nil, at, to)
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
			shape, eq := u.bucketOf(key)
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

// nextName reads the key of the next service, (service, tool) pair or
// member after last (the first of all when ok is false); found is false
// when there is none.
func (u *usageRun) nextName(ctx context.Context, last usage.Key, ok bool) (key usage.Key, found bool, err error) {
	account := filter{u.side.field, "==", u.q.AgentID}
	switch {
	case u.q.GroupBy == usage.ByMember && u.side.field == usageOfAgent.field:
		// An agent's calls are its own: one bucket.
		return usage.Key{Member: u.q.AgentID}, !ok || last.Member < u.q.AgentID, nil
	case u.q.GroupBy == usage.ByMember && !ok:
		return u.first(ctx, u.s.build(qUsageMembers, account))
	case u.q.GroupBy == usage.ByMember:
		return u.first(ctx, u.s.build(qUsageMembers, account, filter{"agentId", ">", last.Member}))
	case u.q.GroupBy == usage.ByService && !ok:
		return u.first(ctx, u.s.build(u.side.services, account))
	case u.q.GroupBy == usage.ByService:
		return u.first(ctx, u.s.build(u.side.services, account, filter{"service", ">", last.Service}))
	case !ok:
		return u.first(ctx, u.s.build(u.side.tools, account))
	}
	key, found, err = u.first(ctx, u.s.build(u.side.toolsOfService, account, filter{"service", "==", last.Service}, filter{"tool", ">", last.Tool}))
	if err != nil || found {
		return key, found, err
	}
	return u.first(ctx, u.s.build(u.side.tools, account, filter{"service", ">", last.Service}))
}

// first reads the key of the first document of a skip-scan q.
func (u *usageRun) first(ctx context.Context, q firestore.Query) (usage.Key, bool, error) {
	snaps, err := u.documents(ctx, q.Select("service", "tool", "agentId").Limit(1))
	if err != nil || len(snaps) == 0 {
		return usage.Key{}, false, err
	}
	f := read(snaps[0])
	var key usage.Key
	switch u.q.GroupBy {
	case usage.ByMember:
		key.Member = f.str("agentId")
	case usage.ByTool:
		key.Service, key.Tool = f.str("service"), f.str("tool")
	default:
		key.Service = f.str("service")
	}
	return key, f.err == nil, f.err
}

// bucketOf is the aggregations and equality filters of the named bucket
// key.
func (u *usageRun) bucketOf(key usage.Key) (usageShape, []filter) {
	switch {
	case u.q.GroupBy == usage.ByMember && u.side.field == usageOfAgent.field:
		return u.side.byRange, nil
	case u.q.GroupBy == usage.ByMember:
		return usageByMember, []filter{{"agentId", "==", key.Member}}
	case u.q.GroupBy == usage.ByTool:
		return u.side.byTool, []filter{{"service", "==", key.Service}, {"tool", "==", key.Tool}}
	}
	return u.side.byService, []filter{{"service", "==", key.Service}}
}
