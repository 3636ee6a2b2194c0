package conformance

var (
	accountTests     []subtest
	entitlementTests []subtest
	consumeTests     []subtest
	checkTests       []subtest
	consumptionTests []subtest
	eventTests       []subtest
	paymentTests     []subtest
)
