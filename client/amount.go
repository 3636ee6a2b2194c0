package client

import "github.com/stipend-mcp/stipend/money"

// Amount returns cents minor units of currency (an ISO 4217 code, such as
// "EUR"), as the Cost, MaxCost and Balance fields take it:
// client.ConsumeRequest{…, Cost: client.Amount(150, "EUR")}. It does not
// check the amount; a call with an invalid one is refused before it is
// sent (IsInvalid, naming the field).
func Amount(cents int64, currency string) *money.Money {
	return &money.Money{Cents: cents, Currency: currency}
}

// USD returns cents US cents: Amount(cents, "USD").
func USD(cents int64) *money.Money { return Amount(cents, "USD") }
