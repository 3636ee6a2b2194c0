package stripepay

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// MaxAmount is the largest amount Stripe charges in one payment: eight
// digits of the currency's smallest unit.
const MaxAmount = 99_999_999

// minimums are Stripe's smallest charge per settlement currency, in the
// smallest unit (https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts).
// Stripe refuses less with amount_too_small; a currency not listed here is
// left to Stripe, whose refusal is answered as a 400 too.
var minimums = map[string]int64{
	"USD": 50, "AED": 200, "AUD": 50, "BGN": 100, "BRL": 50, "CAD": 50, "CHF": 50, "CZK": 1500,
	"DKK": 250, "EUR": 50, "GBP": 30, "HKD": 400, "HUF": 17500, "INR": 50, "JPY": 50, "MXN": 1000,
	"MYR": 200, "NOK": 300, "NZD": 50, "PLN": 200, "RON": 200, "SEK": 300, "SGD": 50, "THB": 1000,
}

// CheckAmount refuses, before any call to Stripe, an amount Stripe is known
// to refuse: below its minimum for the currency or above MaxAmount. The
// error is a *field.Error naming amount.cents.
func CheckAmount(m money.Money) error {
	if min, ok := minimums[m.Currency]; ok && m.Cents < min {
		return &field.Error{Field: "amount.cents", Reason: fmt.Sprintf("must be at least %d: Stripe's minimum charge in %s", min, m.Currency)}
	}
	if m.Cents > MaxAmount {
		return &field.Error{Field: "amount.cents", Reason: fmt.Sprintf("must be at most %d: Stripe's largest charge", MaxAmount)}
	}
	return nil
}

// MaxURLLength bounds a redirect URL of a Checkout Session.
const MaxURLLength = 2048

// CheckURL refuses a Checkout redirect URL Stripe would refuse: not an
// absolute http or https URL with a host, or longer than MaxURLLength.
func CheckURL(name, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > MaxURLLength:
		err = fmt.Errorf("must be at most %d characters", MaxURLLength)
	case err != nil:
		err = errors.New("is not a URL")
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || strings.ContainsAny(raw, " \t\r\n"):
		err = errors.New("must be an absolute http or https URL")
	}
	if err != nil {
		return &field.Error{Field: name, Reason: err.Error()}
	}
	return nil
}
