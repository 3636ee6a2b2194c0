package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// row checks a stored row strictly, as the Firestore store checks its
// documents: the first value that is not what Stipend stores there is kept
// in err, naming the table, the row and the column, and the later checks do
// nothing. The schema already refuses most of it (CHECKs, the cents and
// currency domains); this catches what a hand edit, a restore of another
// version or a bug could still leave. Nothing is converted silently.
type row struct {
	table, id string
	err       error
}

// corrupt records that column holds what Stipend never stores.
func (r *row) corrupt(column, format string, args ...any) {
	if r.err == nil {
		r.err = store.Errorf(store.CodeInternal, "corrupt row %s/%s: column %s: %s", r.table, r.id, column, fmt.Sprintf(format, args...))
	}
}

// money returns the amount stored as cents and currency in column: the zero
// amount when both are zero or empty (no amount), else a valid one.
func (r *row) money(column string, cents int64, currency string) money.Money {
	m := money.Money{Cents: cents, Currency: currency}
	if m.IsZero() {
		return m
	}
	if err := m.Validate(); err != nil {
		r.corrupt(column, "%v", err)
		return money.Money{}
	}
	return m
}

// amount returns a required, valid amount (a credits balance, a payment).
func (r *row) amount(column string, cents int64, currency string) money.Money {
	m := r.money(column, cents, currency)
	if m.IsZero() && r.err == nil {
		r.corrupt(column, "no currency")
	}
	return m
}

// nonNegative checks a count (units, a quota, attempts).
func (r *row) nonNegative(column string, n int64) int64 {
	if n < 0 {
		r.corrupt(column, "%d is negative", n)
	}
	return n
}

// oneOf checks that s is one of the values Stipend stores in column.
func (r *row) oneOf(column, s string, valid bool) string {
	if !valid {
		r.corrupt(column, "unknown value %q", s)
	}
	return s
}

// strings decodes a JSON object of strings (metadata); SQL NULL or {} is
// an empty map (nil).
func (r *row) strings(column string, raw []byte) map[string]string {
	var m map[string]string
	if err := strictJSON(raw, &m); err != nil {
		r.corrupt(column, "not an object of strings: %v", err)
		return nil
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// strictJSON decodes raw into v, refusing unknown fields and trailing data.
func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the value")
	}
	return nil
}

// instant returns a scanned timestamp in UTC (the zero time for NULL).
func instant(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// instantPtr returns a scanned nullable timestamp in UTC.
func instantPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// required checks that a NOT NULL-by-meaning timestamp is set.
func (r *row) required(column string, t *time.Time) time.Time {
	if t == nil {
		r.corrupt(column, "missing")
	}
	return instant(t)
}

// nullTime is the parameter for a column a kind of entitlement leaves
// unset (a quota's reset for credits): SQL NULL for the zero time, which
// those columns never hold as an instant.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := stamp(t)
	return &u
}

// nullTimePtr is the parameter for an optional instant: SQL NULL when it is
// absent (nil). A given instant is kept, the zero time
// (0001-01-01T00:00:00Z) included: it is an instant, not "none".
func nullTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := stamp(*t)
	return &u
}

// jsonArg encodes v for a jsonb or json column.
func jsonArg(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, store.Wrap(store.CodeInternal, err, "encode %T", v)
	}
	return b, nil
}
