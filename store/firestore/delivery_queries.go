package firestore

// The webhook queries; they are listed in Queries (queries.go), so the index
// test checks them against firestore.indexes.json.
var (
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
