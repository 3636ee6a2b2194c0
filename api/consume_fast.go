package api

import (
	"slices"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// The consume body, read on every paid call, has a fast path: the shape
// nearly every client sends (known members once each, strings of plain
// printable ASCII, integers as plain digits, an amount of cents and
// currency) is read by hand, and its validator tags are checked by the
// functions they name, without reflection. Anything else (an escape, a
// null, a duplicate, an unknown member, a fraction…) takes the general
// path (DecodeJSON, then check), which answers it as before: the fast path
// only accepts what the general one would decode to the same value, and
// only skips check for what check would pass. FuzzConsumeFastPath holds
// it to both.

// fastBody is a request body with a fast path (decodeBody).
type fastBody interface {
	// decodeFast decodes data into the body and reports true, or reports
	// false and leaves the body as it was.
	decodeFast(data []byte) bool
	// tagsHold reports whether the body's validator tags hold.
	tagsHold() bool
}

func (b *consumeBody) tagsHold() bool {
	return entitlement.ValidName(b.AgentID) && entitlement.ValidName(b.Service) && entitlement.ValidName(b.Tool) &&
		entitlement.ValidIdempotencyKey(b.IdempotencyKey) && (b.Units == nil || validUnits(*b.Units)) &&
		(b.EntitlementID == "" || entitlement.ValidName(b.EntitlementID))
}

// consumeMembers are the members of consumeBody: the first five strings
// (decodeFast's texts, in this order), then units and cost.
var consumeMembers = [...]string{"agentId", "service", "tool", "idempotencyKey", "entitlementId", "units", "cost"}

func (b *consumeBody) decodeFast(data []byte) bool {
	var out consumeBody
	texts := [...]*string{&out.AgentID, &out.Service, &out.Tool, &out.IdempotencyKey, &out.EntitlementID}
	s := scanner{data: data}
	if !s.byte('{') {
		return false
	}
	seen := 0 // a bit per member of consumeMembers
	for first := true; ; first = false {
		if s.byte('}') {
			break
		}
		if !first && !s.byte(',') {
			return false
		}
		name, ok := s.raw()
		if !ok || !s.byte(':') {
			return false
		}
		i := slices.IndexFunc(consumeMembers[:], func(m string) bool { return m == string(name) })
		if i < 0 || seen&(1<<i) != 0 {
			return false
		}
		seen |= 1 << i
		switch consumeMembers[i] {
		case "units":
			out.Units = new(int64)
			*out.Units, ok = s.integer()
		case "cost":
			out.Cost = new(money.Money)
			*out.Cost, ok = s.amount()
		default:
			*texts[i], ok = s.str()
		}
		if !ok {
			return false
		}
	}
	s.space()
	if s.i != len(s.data) {
		return false
	}
	*b = out
	return true
}

// scanner reads the plain JSON of a fast path; each method skips the
// whitespace before what it reads and reports false for anything else.
type scanner struct {
	data []byte
	i    int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte reads c.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// raw reads a string of printable ASCII without escapes, as a view of the
// data (whose bytes are the string's).
func (s *scanner) raw() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return s.data[start : s.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// str is raw as a string of its own.
func (s *scanner) str() (string, bool) {
	v, ok := s.raw()
	return string(v), ok
}

// integer reads a non-negative integer of at most 15 digits (below 2^53,
// the bound of every integer a request carries), without a sign, a
// fraction or an exponent, and no leading zero.
func (s *scanner) integer() (int64, bool) {
	s.space()
	start := s.i
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
	}
	digits := s.data[start:s.i]
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	if s.i < len(s.data) {
		switch s.data[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	var n int64
	for _, d := range digits {
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// amount reads {"cents": integer, "currency": string}, in either order,
// that money.Money.Validate accepts.
func (s *scanner) amount() (money.Money, bool) {
	var m money.Money
	if !s.byte('{') {
		return m, false
	}
	var cents, currency bool
	for first := true; ; first = false {
		if s.byte('}') {
			break
		}
		if !first && !s.byte(',') {
			return m, false
		}
		name, ok := s.raw()
		if !ok || !s.byte(':') {
			return m, false
		}
		switch {
		case string(name) == "cents" && !cents:
			cents = true
			m.Cents, ok = s.integer()
		case string(name) == "currency" && !currency:
			currency = true
			m.Currency, ok = s.str()
		default:
			return m, false
		}
		if !ok {
			return m, false
		}
	}
	return m, cents && currency && m.Validate() == nil
}
