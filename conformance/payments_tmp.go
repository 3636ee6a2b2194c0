package conformance

var paymentTests []subtest
