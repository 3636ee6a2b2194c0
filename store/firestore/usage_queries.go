package firestore

import "slices"

// The usage queries (usage.go). Firestore has no GROUP BY, so a usage page
// is made of small queries, each declared here with the index it needs:
//
//   - skip-scans find the distinct values of a grouping, one query of one
//     document each: the next service after the last one
//     (services), the next (service, tool) pair after the last one (the
//     next tool of its service, toolsOfService, or else the first tool of
//     the next service, tools), the next member of a wallet after the last
//     one (qUsageMembers); hour and day buckets skip to the next
//     consumption at or after the end of the last bucket (byTime);
//   - aggregations total one bucket over [start, end) of occurredAt: a
//     count of all its consumptions; for quota entitlements the sum of
//     units and of refunded units; per currency a count and the sum of
//     cost cents, and the sum of refunded cents. Each sum is its own
//     query: Firestore computes an aggregation from one index holding every
//     field it names, so an aggregation over two fields would see only the
//     documents with both (an unrefunded consumption has no refund).
var (
	// usageOfAgent are an agent's (its calls, agentId), usageOfWallet a
	// wallet's (its members' calls charged to it, walletId: stored on
	// those only, so the wallet's indexes hold only them).
	usageOfAgent  = usageParty("agentId", "usage", qConsumptionsByAgent)
	usageOfWallet = usageParty("walletId", "walletUsage", qConsumptionsByWallet)
	// qUsageMembers is the skip-scan over the members a wallet's
	// consumptions were charged by; usageByMember totals one member.
	qUsageMembers = Query{
		Name: "consumptions.walletUsage.members", Collection: colConsumptions,
		Equal: []string{"walletId"}, Order: "agentId",
	}
	usageByMember = usageShapes("walletId", "walletUsage", "member", "agentId")

	usageQueries = slices.Concat(usageOfAgent.all(), usageOfWallet.all(), []Query{qUsageMembers}, usageByMember.all())
)

// usageSide is the queries of one side of a consumption: field is the
// account's (agentId or walletId), byTime the skip-scan of hour and day
// buckets.
type usageSide struct {
	field                           string
	byTime                          Query
	services, tools, toolsOfService Query
	byRange, byService, byTool      usageShape
}

func usageParty(field, name string, byTime Query) usageSide {
	return usageSide{
		field:  field,
		byTime: byTime,
		services: Query{
			Name: "consumptions." + name + ".services", Collection: colConsumptions,
			Equal: []string{field}, Order: "service",
		},
		tools: Query{
			Name: "consumptions." + name + ".tools", Collection: colConsumptions,
			Equal: []string{field}, Order: "service", Then: []string{"tool"},
		},
		// The next tool of one service; its index is tools'.
		toolsOfService: Query{
			Name: "consumptions." + name + ".toolsOfService", Collection: colConsumptions,
			Equal: []string{field, "service"}, Order: "tool",
		},
		byRange:   usageShapes(field, name, "range"),
		byService: usageShapes(field, name, "service", "service"),
		byTool:    usageShapes(field, name, "tool", "service", "tool"),
	}
}

func (p usageSide) all() []Query {
	return slices.Concat([]Query{p.services, p.tools, p.toolsOfService}, p.byRange.all(), p.byService.all(), p.byTool.all())
}

// usageShape is the aggregations of one kind of bucket: its equality
// filters (the account, and the service and tool of a bucket by name, or
// the member) and a range on occurredAt.
type usageShape struct {
	count, units, refundUnits, cents, refundCents Query
}

func usageShapes(field, party, name string, eq ...string) usageShape {
	q := func(what string, extra []string, sum string) Query {
		return Query{
			Name: "consumptions." + party + "." + name + "." + what, Collection: colConsumptions,
			Equal: slices.Concat([]string{field}, eq, extra), Order: "occurredAt", Sum: sum,
		}
	}
	quota, currency := []string{"entitlementType"}, []string{"cost.currency"}
	return usageShape{
		count:       q("count", nil, ""),
		units:       q("units", quota, "units"),
		refundUnits: q("refundUnits", quota, "refund.units"),
		cents:       q("cents", currency, "cost.cents"),
		refundCents: q("refundCents", currency, "refund.cost.cents"),
	}
}

func (u usageShape) all() []Query {
	return []Query{u.count, u.units, u.refundUnits, u.cents, u.refundCents}
}
