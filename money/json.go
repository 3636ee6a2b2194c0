package money

import (
	"errors"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stipend-mcp/stipend/field"
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

// UnmarshalJSONFrom is Stipend's one strict amount decoder (the
// encoding/json/v2 UnmarshalerFrom interface). It reads one JSON object with
// exactly two members, each once, in any order: cents, a JSON integer
// literal (no fraction, no exponent, not a string), and currency, a string;
// then the amount must pass Validate. Its errors are the decoder's
// *jsontext.SyntacticError for malformed JSON, or a *json.SemanticError whose
// JSONPointer names the offending member (or the amount, if it is not an
// object) and whose Err is a *field.Error naming the same member relative to
// the amount.
func (m *Money) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch k := dec.PeekKind(); k {
	case '{':
	case 0: // malformed or truncated: the decoder says where
		_, err := dec.ReadToken()
		return err
	default:
		return &json.SemanticError{Err: &field.Error{Reason: "must be an object with cents and currency" + notNull(k)}}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	var out Money
	var seenCents, seenCurrency bool
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch name := tok.String(); {
		case name == "cents" && !seenCents:
			seenCents = true
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			var reason string
			if out.Cents, reason = parseCents(v); reason != "" {
				return memberError(dec.StackPointer(), &field.Error{Field: name, Reason: reason})
			}
		case name == "currency" && !seenCurrency:
			seenCurrency = true
			if k := dec.PeekKind(); k != '"' && k != 0 {
				return memberError(dec.StackPointer(), &field.Error{Field: name, Reason: "must be a string" + notNull(k)})
			}
			v, err := dec.ReadToken()
			if err != nil {
				return err
			}
			out.Currency = v.String()
		case name == "cents" || name == "currency":
			return memberError(dec.StackPointer(), &field.Error{Field: name, Reason: "given more than once"})
		default:
			return memberError(dec.StackPointer(), &field.Error{Field: name, Reason: "unknown field"})
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return err
	}
	// The amount is now the value last read; its pointer names it.
	switch {
	case !seenCents:
		return memberError(dec.StackPointer().AppendToken("cents"), &field.Error{Field: "cents", Reason: "is required"})
	case !seenCurrency:
		return memberError(dec.StackPointer().AppendToken("currency"), &field.Error{Field: "currency", Reason: "is required"})
	}
	var fe *field.Error
	if err := out.Validate(); errors.As(err, &fe) {
		return memberError(dec.StackPointer().AppendToken(fe.Field), fe)
	}
	*m = out
	return nil
}

// parseCents reads a JSON integer literal, or says why v is not one. A
// literal beyond int64 comes out clamped to ±(2^63−1), which Validate
// refuses like any amount past MaxCents.
func parseCents(v jsontext.Value) (int64, string) {
	if v.Kind() != '0' {
		return 0, "must be a JSON integer" + notNull(v.Kind())
	}
	for _, c := range v {
		if c == '.' || c == 'e' || c == 'E' {
			return 0, "must be a JSON integer (no fraction or exponent)"
		}
	}
	n, _ := strconv.ParseInt(string(v), 10, 64) // the decoder checked the number grammar
	return n, ""
}

func notNull(k jsontext.Kind) string {
	if k == 'n' {
		return ", not null"
	}
	return ""
}

// memberError reports fe, the member of an amount at JSON Pointer p. Inside
// the object p is the decoder's own StackPointer: the member last read.
func memberError(p jsontext.Pointer, fe *field.Error) error {
	return &json.SemanticError{JSONPointer: p, Err: fe}
}

// UnmarshalJSON is UnmarshalJSONFrom for encoding/json (v1) callers: data
// must hold exactly one amount. Its errors are *field.Error values; malformed
// JSON is one naming no field.
func (m *Money) UnmarshalJSON(data []byte) error {
	// Duplicates are left to UnmarshalJSONFrom, whose error names the member.
	err := json.Unmarshal(data, m, jsontext.AllowDuplicateNames(true))
	var fe *field.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return fe
	}
	return &field.Error{Reason: "malformed JSON", Err: err}
}
