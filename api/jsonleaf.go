package api

import (
	"encoding/json"
	"reflect"

	"github.com/stipend-mcp/stipend/money"
)

// money reads an amount with money's rules: an object of exactly cents (a
// JSON integer within ±money.MaxCents) and currency (three upper-case letters).
func (s *scanner) money(path string, m *money.Money) error {
	if s.peek() != '{' {
		return s.wrongType(path, "must be an object with cents and currency")
	}
	var out money.Money
	var seenCents, seenCurrency bool
	err := s.members(path, func(name, sub string) error {
		switch name {
		case "cents":
			if seenCents {
				return Invalid(sub, "given more than once")
			}
			seenCents = true
			n, err := s.integer(sub, money.MaxCents)
			out.Cents = n
			return err
		case "currency":
			if seenCurrency {
				return Invalid(sub, "given more than once")
			}
			seenCurrency = true
			if s.peek() != '"' {
				return s.wrongType(sub, "must be a string")
			}
			c, err := s.str(sub)
			out.Currency = c
			return err
		}
		return Invalid(sub, "unknown field")
	})
	switch {
	case err != nil:
		return err
	case !seenCents:
		return Invalid(joinPath(path, "cents"), "is required")
	case !seenCurrency:
		return Invalid(joinPath(path, "currency"), "is required")
	}
	if err := out.Validate(); err != nil {
		return fieldErrorAt(path, err)
	}
	*m = out
	return nil
}

// leaf hands the next value to the type's own UnmarshalJSON (time.Time).
func (s *scanner) leaf(path string, v reflect.Value) error {
	start := s.pos
	if err := s.skip(path, 0); err != nil {
		return err
	}
	raw := s.data[start:s.pos]
	if string(raw) == "null" {
		return Invalid(path, "must not be null")
	}
	if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
		if v.Type() == timeType {
			return Invalid(path, "must be an RFC 3339 date-time string")
		}
		return fieldErrorAt(path, err)
	}
	return nil
}

// fieldErrorAt names path in a leaf type's validation error.
func fieldErrorAt(path string, err error) *Error {
	if fe, ok := err.(*money.FieldError); ok {
		return Invalid(joinPath(path, fe.Field), fe.Reason)
	}
	return Invalid(path, "is not valid")
}

func joinPath(path, name string) string {
	if name == "" {
		return path
	}
	if path == "" {
		return name
	}
	return path + "." + name
}
