package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// Amount is what one call really cost, as its tool reports it with Charge:
// Cost for credits, Units for a quota. A nil field is not reported, and the
// call is charged the price (the hold's maximum) for it.
type Amount = entitlement.Amount

// Cents is an Amount of n cents (minor units) in currency.
func Cents(n int64, currency string) Amount {
	return Amount{Cost: &money.Money{Cents: n, Currency: currency}}
}

// UnitsUsed is an Amount of n quota units.
func UnitsUsed(n int64) Amount { return Amount{Units: &n} }

// CentsOrUnits is an Amount for a tool priced with CreditsOrUnits: n cents
// in currency if credits pay, units if a quota does.
func CentsOrUnits(n int64, currency string, units int64) Amount {
	a := Cents(n, currency)
	a.Units = &units
	return a
}

// ErrNotOnSuccess is returned by Charge outside a call the gate charges on
// success: a call that did not pass the gate, a free tool, a tool priced
// with PolicyBefore, or a call run uncharged (fail open).
var ErrNotOnSuccess = errors.New("mcpgate: Charge called outside a call the gate charges on success")

// Charge reports from inside a tool handler what the call really cost. The
// gate captures that amount when the tool succeeds, instead of the price.
// The price is the most a call may cost: a report above it charges the
// price and is logged at WARN. Called more than once, the last report
// counts. A field a report leaves out (nil) is charged the price, so a tool
// priced with CreditsOrUnits reports both (CentsOrUnits). Charge returns an
// error, and the report is ignored, for an amount the price cannot take (a
// cost in another currency or for a tool credits cannot pay, a negative
// amount), or ErrNotOnSuccess. It is safe to call from any goroutine of the
// call, until the handler returns.
func Charge(ctx context.Context, a Amount) error {
	m, _ := ctx.Value(meterKey{}).(*meter)
	if m == nil {
		return ErrNotOnSuccess
	}
	return m.report(ctx, a)
}

type meterKey struct{}

// meter holds what a call's tool reported with Charge.
type meter struct {
	tool  string
	price Price
	log   *slog.Logger

	mu       sync.Mutex
	reported Amount
}

// report checks a against the price, caps it there and records it.
func (m *meter) report(ctx context.Context, a Amount) error {
	var capped Amount
	over := false
	if a.Cost != nil {
		switch {
		case m.price.Cost == nil:
			return fmt.Errorf("mcpgate: Charge: tool %s is not paid in credits, so it cannot report a cost", m.tool)
		case a.Cost.Currency != m.price.Cost.Currency:
			return fmt.Errorf("mcpgate: Charge: cost in %q, but tool %s is priced in %s", a.Cost.Currency, m.tool, m.price.Cost.Currency)
		case a.Cost.Cents < 0:
			return fmt.Errorf("mcpgate: Charge: negative cost %d", a.Cost.Cents)
		}
		c := *a.Cost
		if c.Cents > m.price.Cost.Cents {
			c.Cents, over = m.price.Cost.Cents, true
		}
		capped.Cost = &c
	}
	if a.Units != nil {
		if *a.Units < 0 {
			return fmt.Errorf("mcpgate: Charge: negative units %d", *a.Units)
		}
		u := min(*a.Units, max(m.price.Units, 1))
		over = over || u < *a.Units
		capped.Units = &u
	}
	if over {
		m.log.WarnContext(ctx, "mcpgate: the tool reported more than its price; charging the price",
			"tool", m.tool, "reported", amountString(a), "price", m.price.String())
	}
	m.mu.Lock()
	m.reported = capped
	m.mu.Unlock()
	return nil
}

// amount is the last report.
func (m *meter) amount() Amount {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reported
}

// amountString describes a for a log line, such as "7 cents USD, 2 units".
func amountString(a Amount) string {
	var s string
	if a.Cost != nil {
		s = cost(a.Cost)
	}
	if a.Units != nil {
		if s != "" {
			s += ", "
		}
		s += units(*a.Units)
	}
	if s == "" {
		return "nothing"
	}
	return s
}
