package money

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MarshalJSON encodes m as {"cents":N,"currency":"XXX"}.
func (m Money) MarshalJSON() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 48)
	b = append(b, `{"cents":`...)
	b = strconv.AppendInt(b, m.Cents, 10)
	b = append(b, `,"currency":"`...)
	b = append(b, m.Currency...)
	b = append(b, `"}`...)
	return b, nil
}

// UnmarshalJSON decodes {"cents":N,"currency":"XXX"} strictly: cents must be a
// JSON integer literal (no fraction, no exponent, not a string) within
// ±MaxCents; currency must be three upper-case letters; both are required;
// unknown and duplicate members are rejected. Errors are *FieldError values.
func (m *Money) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return &FieldError{Field: "", Reason: "malformed JSON", Err: err}
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return &FieldError{Field: "", Reason: "must be an object with cents and currency"}
	}
	var out Money
	var seenCents, seenCurrency bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return &FieldError{Field: "", Reason: "malformed JSON", Err: err}
		}
		key, _ := tok.(string)
		switch key {
		case "cents":
			if seenCents {
				return &FieldError{Field: "cents", Reason: "given more than once"}
			}
			seenCents = true
			if out.Cents, err = decodeCents(dec); err != nil {
				return err
			}
		case "currency":
			if seenCurrency {
				return &FieldError{Field: "currency", Reason: "given more than once"}
			}
			seenCurrency = true
			v, err := dec.Token()
			s, ok := v.(string)
			if err != nil || !ok {
				return &FieldError{Field: "currency", Reason: "must be a string"}
			}
			if !IsCurrency(s) {
				return &FieldError{Field: "currency", Reason: "must be a three-letter upper-case ISO 4217 code", Err: ErrInvalidCurrency}
			}
			out.Currency = s
		default:
			return &FieldError{Field: key, Reason: "unknown field"}
		}
	}
	if _, err := dec.Token(); err != nil { // closing '}'
		return &FieldError{Field: "", Reason: "malformed JSON", Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &FieldError{Field: "", Reason: "unexpected data after the amount"}
	}
	switch {
	case !seenCents:
		return &FieldError{Field: "cents", Reason: "is required"}
	case !seenCurrency:
		return &FieldError{Field: "currency", Reason: "is required"}
	}
	*m = out
	return nil
}

func decodeCents(dec *json.Decoder) (int64, error) {
	v, err := dec.Token()
	if err != nil {
		return 0, &FieldError{Field: "cents", Reason: "malformed JSON", Err: err}
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, &FieldError{Field: "cents", Reason: "must be a JSON integer"}
	}
	if !isIntegerLiteral(string(n)) {
		return 0, &FieldError{Field: "cents", Reason: "must be a JSON integer (no fraction or exponent)"}
	}
	c, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || c > MaxCents || c < -MaxCents {
		return 0, &FieldError{Field: "cents", Reason: fmt.Sprintf("must be between %d and %d", -MaxCents, MaxCents), Err: ErrOutOfRange}
	}
	return c, nil
}

// isIntegerLiteral reports whether s is -?(0|[1-9][0-9]*), the integer subset of
// the JSON number grammar.
func isIntegerLiteral(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
