package firestore

import "slices"

// The usage queries (usage.go). Firestore has no GROUP BY, so a usage page
// is made of small queries, each declared here with the index it needs:
//
//   - skip-scans find the distinct values of a grouping, one query of one
//     document each: the next service after the last one
//     (qUsageServices), the next (service, tool) pair after the last one
//     (the next tool of its service, qUsageToolsOfService, or else the
//     first tool of the next service, qUsageTools); hour and day buckets skip to the next consumption at
//     or after the end of the last bucket (qConsumptionsByAgent);
//   - aggregations total one bucket over [start, end) of occurredAt: a
//     count of all its consumptions; for quota entitlements the sum of
//     units and of refunded units; per currency a count and the sum of
//     cost cents, and the sum of refunded cents. Each sum is its own
//     query: Firestore computes an aggregation from one index holding every
//     field it names, so an aggregation over two fields would see only the
//     documents with both (an unrefunded consumption has no refund).
var (
	qUsageServices = Query{
		Name: "consumptions.usage.services", Collection: colConsumptions,
		Equal: []string{"agentId"}, Order: "service",
	}
	qUsageTools = Query{
		Name: "consumptions.usage.tools", Collection: colConsumptions,
		Equal: []string{"agentId"}, Order: "service", Then: []string{"tool"},
	}
	// qUsageToolsOfService is the next tool of one service; its index is
	// qUsageTools'.
	qUsageToolsOfService = Query{
		Name: "consumptions.usage.toolsOfService", Collection: colConsumptions,
		Equal: []string{"agentId", "service"}, Order: "tool",
	}
	usageByRange   = usageShapes("range")
	usageByService = usageShapes("service", "service")
	usageByTool    = usageShapes("tool", "service", "tool")

	usageQueries = slices.Concat([]Query{qUsageServices, qUsageTools, qUsageToolsOfService},
		usageByRange.all(), usageByService.all(), usageByTool.all())
)

// usageShape is the aggregations of one kind of bucket: its equality
// filters (the agent, and the service and tool of a bucket by name) and a
// range on occurredAt.
type usageShape struct {
	count, units, refundUnits, cents, refundCents Query
}

func usageShapes(name string, eq ...string) usageShape {
	q := func(what string, extra []string, sum string) Query {
		return Query{
			Name: "consumptions.usage." + name + "." + what, Collection: colConsumptions,
			Equal: slices.Concat([]string{"agentId"}, eq, extra), Order: "occurredAt", Sum: sum,
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
