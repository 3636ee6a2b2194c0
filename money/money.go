// Package money holds Stipend's amount type: integer minor units (cents) in one
// ISO 4217 currency, with checked arithmetic and a strict JSON codec.
//
// Every amount is bounded by MaxCents (2^53−1). Receipts are signed over RFC 8785
// canonical JSON, where integers beyond 2^53 are not interoperable, so the store,
// the API and the signer all refuse amounts past that ceiling in the same place.
package money

import (
	"errors"
	"fmt"
	"math"

	"github.com/stipend-mcp/stipend/field"
)

// MaxCents is the largest magnitude an amount may have: 2^53−1 (JavaScript's
// Number.MAX_SAFE_INTEGER), the largest integer RFC 8785 represents exactly.
const MaxCents int64 = 1<<53 - 1

var (
	// ErrOutOfRange reports an amount, or the result of arithmetic, beyond ±MaxCents.
	ErrOutOfRange = errors.New("amount out of range")
	// ErrCurrencyMismatch reports arithmetic or a comparison across two currencies.
	ErrCurrencyMismatch = errors.New("currency mismatch")
	// ErrInvalidCurrency reports a currency that is not three upper-case ISO 4217 letters.
	ErrInvalidCurrency = errors.New("invalid currency")
)

// Money is an amount in integer minor units of one currency.
type Money struct {
	Cents    int64  `json:"cents"`
	Currency string `json:"currency"`
}

// New returns a validated amount.
func New(cents int64, currency string) (Money, error) {
	m := Money{Cents: cents, Currency: currency}
	return m, m.Validate()
}

// Validate reports whether m is within range and names a known currency.
// Its errors are *field.Error values naming "cents" or "currency".
func (m Money) Validate() error {
	if m.Cents > MaxCents || m.Cents < -MaxCents {
		return &field.Error{Field: "cents", Reason: fmt.Sprintf("must be between %d and %d", -MaxCents, MaxCents), Err: ErrOutOfRange}
	}
	if !IsCurrency(m.Currency) {
		return &field.Error{Field: "currency", Reason: "must be a three-letter upper-case ISO 4217 code", Err: ErrInvalidCurrency}
	}
	return nil
}

// IsZero reports whether m is the zero value (no amount, no currency).
func (m Money) IsZero() bool { return m == Money{} }

// Add returns m+o. It fails with ErrCurrencyMismatch or ErrOutOfRange, never wraps.
func (m Money) Add(o Money) (Money, error) {
	if m.Currency != o.Currency {
		return Money{}, fmt.Errorf("%w: %s and %s", ErrCurrencyMismatch, m.Currency, o.Currency)
	}
	return m.withCents(addChecked(m.Cents, o.Cents))
}

// Sub returns m−o. It fails with ErrCurrencyMismatch or ErrOutOfRange, never wraps.
func (m Money) Sub(o Money) (Money, error) {
	if m.Currency != o.Currency {
		return Money{}, fmt.Errorf("%w: %s and %s", ErrCurrencyMismatch, m.Currency, o.Currency)
	}
	if o.Cents == math.MinInt64 {
		return Money{}, ErrOutOfRange
	}
	return m.withCents(addChecked(m.Cents, -o.Cents))
}

// Cmp compares m and o: −1 if m < o, 0 if equal, +1 if m > o. Comparing two
// currencies is an error.
func (m Money) Cmp(o Money) (int, error) {
	if m.Currency != o.Currency {
		return 0, fmt.Errorf("%w: %s and %s", ErrCurrencyMismatch, m.Currency, o.Currency)
	}
	switch {
	case m.Cents < o.Cents:
		return -1, nil
	case m.Cents > o.Cents:
		return 1, nil
	}
	return 0, nil
}

// String formats m as "1500 USD" (minor units; no locale-dependent decimals).
func (m Money) String() string { return fmt.Sprintf("%d %s", m.Cents, m.Currency) }

func (m Money) withCents(c int64, ok bool) (Money, error) {
	if !ok || c > MaxCents || c < -MaxCents {
		return Money{}, ErrOutOfRange
	}
	return Money{Cents: c, Currency: m.Currency}, nil
}

func addChecked(a, b int64) (int64, bool) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) {
		return 0, false
	}
	return s, true
}

// IsCurrency reports whether code is three upper-case ASCII letters. Stipend
// accepts any such ISO 4217-shaped code rather than a frozen list, so a newly
// issued currency needs no release.
func IsCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	return true
}
