package firestore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
)

// Query is one query the adapter runs, declared here so that a test can check
// every query against firestore.indexes.json: a query added without its
// composite index fails that test, not production.
type Query struct {
	// Name identifies the query in cursors and in test failures.
	Name string
	// Collection is the collection, before the prefix.
	Collection string
	// Equal lists the fields always compared with == (or "in").
	Equal []string
	// Optional lists equality filters the caller may add; every
	// combination of them is a distinct query shape needing its own index.
	Optional []string
	// Order is the field the results are ordered by, ascending, with the
	// document ID as the tiebreak ("" for none). A range filter, if any, is on
	// this field.
	Order string
	// Then lists further fields the results are ordered by after Order,
	// ascending, before the document ID (a skip-scan over distinct pairs).
	Then []string
	// Sum is the field an aggregation query over this shape sums ("" for
	// none). Firestore sums from an index that holds the field before the
	// document ID, so the query is also ordered by it, after Order and
	// Then, and its index ends with it (usage_queries.go).
	Sum string
}

// The adapter's queries. Nothing else in the package builds a query.
var (
	qEntitlementsByAgent = Query{
		Name: "entitlements.byAgent", Collection: colEntitlements,
		Equal: []string{"agentId"}, Optional: []string{"status", "type", "scope.service"}, Order: "createdAt",
	}
	qActiveEntitlements = Query{
		Name: "entitlements.active", Collection: colEntitlements,
		Equal: []string{"agentId", "status"},
	}
	qConsumptionsByAgent = Query{
		Name: "consumptions.byAgent", Collection: colConsumptions,
		Equal: []string{"agentId"}, Order: "occurredAt",
	}
	// qConsumptionsByWallet is a wallet's: its members' charges to it
	// (walletId is stored on those only, so only they are in its index).
	qConsumptionsByWallet = Query{
		Name: "consumptions.byWallet", Collection: colConsumptions,
		Equal: []string{"walletId"}, Order: "occurredAt",
	}
	// qWalletsCharged is a skip-scan over the wallets an agent's
	// consumptions were charged to (usage.go).
	qWalletsCharged = Query{
		Name: "consumptions.walletsCharged", Collection: colConsumptions,
		Equal: []string{"agentId"}, Order: "walletId",
	}
	// The memberships of a wallet, by member, and of an agent, by wallet.
	qMembersOfWallet = Query{
		Name: "memberships.byWallet", Collection: colMemberships,
		Equal: []string{"walletId"}, Order: "memberId",
	}
	qWalletsOfMember = Query{
		Name: "memberships.byMember", Collection: colMemberships,
		Equal: []string{"memberId"}, Order: "walletId",
	}
	// qHoldsExpiring finds the entitlements with a hold to expire
	// (ExpireHolds): a range on one field, served by its automatic index.
	qHoldsExpiring = Query{
		Name: "entitlements.holdsExpiring", Collection: colEntitlements, Order: "holdsExpireAt",
	}
	qPaymentByIntent = Query{
		Name: "payments.byProviderIntent", Collection: colPayments,
		Equal: []string{"providerIntentId"},
	}
	qReceiptsByAgent = Query{
		Name: "receipts.byAgent", Collection: colReceipts,
		Equal: []string{"agentId"}, Order: "issuedAt",
	}
	qPendingEvents = Query{
		Name: "events.pending", Collection: colEvents,
		Equal: []string{"dispatched"}, Order: "occurredAt",
	}
	// qPendingPayments finds the pending payments of a provider, oldest
	// first, for the reconciliation sweep (ListPendingPayments).
	qPendingPayments = Query{
		Name: "payments.pending", Collection: colPayments,
		Equal: []string{"provider", "status"}, Order: "createdAt",
	}
	// qTopUpsWatched lists the top-ups a sweep looks at.
	qTopUpsWatched = Query{
		Name: "topups.watched", Collection: colTopUps,
		Equal: []string{"watched"}, Order: "createdAt",
	}
	// The webhook queries.
	qEndpoints = Query{
		Name: "webhookEndpoints.all", Collection: colEndpoints, Order: "createdAt",
	}
	qDeliveries = Query{
		Name: "deliveries.list", Collection: colDeliveries,
		Optional: []string{"status", "eventType"}, Order: "createdAt",
	}
	// qDueDeliveries has a range filter scheduledAt ≤ now.
	qDueDeliveries = Query{
		Name: "deliveries.due", Collection: colDeliveries,
		Equal: []string{"status"}, Order: "scheduledAt",
	}
	// qStaleClaims has a range filter claimedAt ≤ now − claim TTL.
	qStaleClaims = Query{
		Name: "deliveries.staleClaims", Collection: colDeliveries,
		Equal: []string{"status"}, Order: "claimedAt",
	}
)

// Queries lists every query the adapter runs.
var Queries = slices.Concat([]Query{
	qEntitlementsByAgent, qActiveEntitlements, qHoldsExpiring, qConsumptionsByAgent,
	qConsumptionsByWallet, qWalletsCharged, qMembersOfWallet, qWalletsOfMember,
	qPaymentByIntent, qReceiptsByAgent, qPendingEvents, qPendingPayments,
	qEndpoints, qDeliveries, qDueDeliveries, qStaleClaims,
	qTopUpsWatched,
}, usageQueries)

// filter is one filter of a query run: an equality ("==", "in") on one of
// the query's Equal or Optional fields, or a range ("<", "<=", ">", ">=") on
// its Order field.
type filter struct {
	field string
	op    string
	value any
}

// build returns q on s's collection with filters and q's order. A filter
// outside q's declared shape, or a missing Equal field, is a programming
// error: it panics, so the first test that runs the query fails instead of
// production meeting a query without its index.
func (s *Store) build(q Query, filters ...filter) firestore.Query {
	query := s.col(q.Collection).Query
	seen := map[string]bool{}
	for _, f := range filters {
		if !declared(q, f) {
			panic(fmt.Sprintf("firestore: query %s: filter %s %s is not declared in Queries", q.Name, f.field, f.op))
		}
		seen[f.field] = true
		query = query.Where(f.field, f.op, f.value)
	}
	for _, field := range q.Equal {
		if !seen[field] {
			panic(fmt.Sprintf("firestore: query %s: missing filter on %s", q.Name, field))
		}
	}
	if q.Order != "" {
		query = query.OrderBy(q.Order, firestore.Asc)
		for _, field := range q.Then {
			query = query.OrderBy(field, firestore.Asc)
		}
		if q.Sum != "" {
			query = query.OrderBy(q.Sum, firestore.Asc)
		}
		query = query.OrderBy(firestore.DocumentID, firestore.Asc)
	}
	return query
}

func declared(q Query, f filter) bool {
	switch f.op {
	case "==", "in":
		return slices.Contains(q.Equal, f.field) || slices.Contains(q.Optional, f.field)
	case "<", "<=", ">", ">=":
		return q.Order != "" && f.field == q.Order
	}
	return false
}

// cursor is the decoded form of a page cursor: the last item's order value
// and document ID, and a hash of the list and filter it belongs to.
type cursor struct {
	List  string    `json:"l"`
	After time.Time `json:"t"`
	DocID string    `json:"d"`
}

// listKey identifies a query and its filter values, so a cursor from one
// list is refused by another.
func listKey(q Query, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(q.Name))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func encodeCursor(list string, after time.Time, docID string) string {
	b, _ := json.Marshal(cursor{List: list, After: after, DocID: docID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor decodes the cursor s of the list listID; ok is false for
// "" (the first page).
func decodeCursor(s, listID string) (c cursor, ok bool, err error) {
	if s == "" {
		return cursor{}, false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil || c.List != listID || c.DocID == "" {
		return cursor{}, false, store.Errorf(store.CodeInvalid, "malformed cursor")
	}
	return c, true, nil
}

// list runs one page of query (built by build, so ordered by order and then
// document ID) and decodes it. It returns the next page's cursor, or "" on
// the last page.
func list[T any](ctx context.Context, query firestore.Query, listID, order string, p store.Page, decode func(*firestore.DocumentSnapshot) (T, error)) ([]T, string, error) {
	size := p.Size()
	if c, ok, err := decodeCursor(p.Cursor, listID); err != nil {
		return nil, "", err
	} else if ok {
		query = query.StartAfter(c.After, c.DocID)
	}
	snaps, err := query.Limit(size + 1).Documents(ctx).GetAll()
	if err != nil {
		return nil, "", fsfault.Read(err, "list %s", listID)
	}
	items, err := decodeAll(snaps[:min(len(snaps), size)], decode)
	if err != nil || len(snaps) <= size {
		return items, "", err
	}
	last := snaps[size-1]
	f := read(last)
	after := f.instant(order)
	if f.err != nil {
		return nil, "", f.err
	}
	return items, encodeCursor(listID, after, last.Ref.ID), nil
}
