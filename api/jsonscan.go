package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stipend-mcp/stipend/money"
)

// maxJSONInt bounds every JSON integer a request may carry: 2^53−1, the
// largest integer every JSON implementation represents exactly.
const maxJSONInt = 1<<53 - 1

// maxDepth bounds nesting inside values skipped as a whole.
const maxDepth = 64

// DecodeJSON decodes data, which must hold exactly one JSON value, into dst
// (a pointer) strictly: unknown and duplicate object members, wrong types,
// fractional or out-of-range integers (beyond ±2^53−1), invalid UTF-8 and
// trailing data are errors. Amounts follow money's strict rules. The error
// is an *Error (400) naming the dotted path of the offending field.
//
// It is a small hand-written scanner rather than encoding/json's token
// API: it sits on the hot path of every consume, and it knows the path of
// every value it reads.
func DecodeJSON(data []byte, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("api.DecodeJSON: dst must be a non-nil pointer")
	}
	s := scanner{data: data}
	if err := s.value("", rv.Elem()); err != nil {
		return err
	}
	s.space()
	if s.pos != len(s.data) {
		return Invalid("", "unexpected data after the JSON value")
	}
	return nil
}

var (
	moneyType       = reflect.TypeFor[money.Money]()
	timeType        = reflect.TypeFor[time.Time]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// scanner reads one JSON document into Go values, keeping the JSON path.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// syntax reports malformed JSON at path.
func (s *scanner) syntax(path string) *Error {
	if s.pos >= len(s.data) {
		return Invalid(path, "the JSON body ends too early")
	}
	return Invalid(path, fmt.Sprintf("malformed JSON at byte %d", s.pos))
}

// literal consumes word ("null", "true", "false") if it is next.
func (s *scanner) literal(word string) bool {
	if strings.HasPrefix(string(s.data[s.pos:min(len(s.data), s.pos+len(word))]), word) {
		s.pos += len(word)
		return true
	}
	return false
}

// value decodes the next JSON value into v.
func (s *scanner) value(path string, v reflect.Value) error {
	c := s.peek()
	if c == 0 {
		return s.syntax(path)
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if c == 'n' {
			if !s.literal("null") {
				return s.syntax(path)
			}
			v.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		if err := s.value(path, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	switch {
	case t == moneyType:
		return s.money(path, v.Addr().Interface().(*money.Money))
	case reflect.PointerTo(t).Implements(unmarshalerType):
		return s.leaf(path, v)
	}
	switch t.Kind() {
	case reflect.String:
		if c != '"' {
			return s.wrongType(path, "must be a string")
		}
		str, err := s.str(path)
		if err != nil {
			return err
		}
		v.SetString(str)
		return nil
	case reflect.Bool:
		switch {
		case s.literal("true"):
			v.SetBool(true)
		case s.literal("false"):
			v.SetBool(false)
		default:
			return s.wrongType(path, "must be true or false")
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := s.integer(path, maxJSONInt)
		if err != nil {
			return err
		}
		if v.OverflowInt(n) {
			return Invalid(path, "is out of range")
		}
		v.SetInt(n)
		return nil
	case reflect.Slice:
		return s.array(path, v)
	case reflect.Map, reflect.Struct:
		return s.object(path, v)
	}
	panic("api: request type has an unsupported field kind " + t.Kind().String())
}

// wrongType reports a value of the wrong JSON type at path.
func (s *scanner) wrongType(path, detail string) error {
	if s.literal("null") {
		return Invalid(path, detail+", not null")
	}
	return Invalid(path, detail)
}

// str reads a JSON string. Strings without escapes are copied as they are;
// others go through encoding/json, which knows every escape.
func (s *scanner) str(path string) (string, error) {
	start := s.pos
	s.pos++ // the opening quote
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			raw := s.data[start:s.pos]
			if !utf8.Valid(raw) {
				return "", Invalid(path, "must be valid UTF-8")
			}
			if escaped {
				var out string
				if err := json.Unmarshal(raw, &out); err != nil {
					return "", Invalid(path, "is not a valid JSON string")
				}
				return out, nil
			}
			body := raw[1 : len(raw)-1]
			return string(body), nil
		case c == '\\':
			escaped = true
			s.pos += 2
		case c < 0x20:
			return "", Invalid(path, "is not a valid JSON string (control character)")
		default:
			s.pos++
		}
	}
	s.pos = len(s.data)
	return "", s.syntax(path)
}

// number reads a JSON number literal and returns its text.
func (s *scanner) number(path string) (string, error) {
	start := s.pos
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '0' {
		i++
	} else if digits() == 0 {
		return "", s.syntax(path)
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			s.pos = i
			return "", s.syntax(path)
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			s.pos = i
			return "", s.syntax(path)
		}
	}
	s.pos = i
	return string(d[start:i]), nil
}

// integer reads a JSON integer literal with |n| ≤ limit.
func (s *scanner) integer(path string, limit int64) (int64, error) {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, s.wrongType(path, "must be a JSON integer")
	}
	lit, err := s.number(path)
	if err != nil {
		return 0, err
	}
	if strings.ContainsAny(lit, ".eE") {
		return 0, Invalid(path, "must be a JSON integer (no fraction or exponent)")
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || n > limit || n < -limit {
		return 0, Invalid(path, fmt.Sprintf("must be an integer between %d and %d", -limit, limit))
	}
	return n, nil
}

// array reads a JSON array (or null) into the slice v.
func (s *scanner) array(path string, v reflect.Value) error {
	if s.literal("null") {
		v.SetZero()
		return nil
	}
	if s.data[s.pos] != '[' {
		return s.wrongType(path, "must be an array")
	}
	s.pos++
	out := reflect.MakeSlice(v.Type(), 0, 4)
	if s.peek() == ']' {
		s.pos++
		v.Set(out)
		return nil
	}
	for i := 0; ; i++ {
		e := reflect.New(v.Type().Elem()).Elem()
		if err := s.value(path+"["+strconv.Itoa(i)+"]", e); err != nil {
			return err
		}
		out = reflect.Append(out, e)
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			v.Set(out)
			return nil
		default:
			return s.syntax(path + "[" + strconv.Itoa(i+1) + "]")
		}
	}
}

// members reads the members of a JSON object, calling member for each
// with its path; the scanner stands before the member's value.
func (s *scanner) members(path string, member func(name, sub string) error) error {
	s.pos++ // '{'
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.syntax(path)
		}
		name, err := s.str(path)
		if err != nil {
			return err
		}
		sub := joinPath(path, name)
		if s.peek() != ':' {
			return s.syntax(sub)
		}
		s.pos++
		if err := member(name, sub); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.syntax(path)
		}
	}
}

// object reads a JSON object into a struct (known members only, each at
// most once) or a map (each key at most once); a map may also be null.
func (s *scanner) object(path string, v reflect.Value) error {
	if v.Kind() == reflect.Map && s.literal("null") {
		v.SetZero()
		return nil
	}
	if s.data[s.pos] != '{' {
		return s.wrongType(path, "must be an object")
	}
	if v.Kind() == reflect.Map {
		v.Set(reflect.MakeMap(v.Type()))
		return s.members(path, func(name, sub string) error {
			key := reflect.ValueOf(name).Convert(v.Type().Key())
			if v.MapIndex(key).IsValid() {
				return Invalid(sub, "given more than once")
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if err := s.value(sub, e); err != nil {
				return err
			}
			v.SetMapIndex(key, e)
			return nil
		})
	}
	fields := fieldsOf(v.Type())
	var seen uint64
	return s.members(path, func(name, sub string) error {
		i, ok := fields.byName[name]
		if !ok {
			return Invalid(sub, "unknown field")
		}
		if seen&(1<<i) != 0 {
			return Invalid(sub, "given more than once")
		}
		seen |= 1 << i
		return s.value(sub, v.Field(fields.index[i]))
	})
}

// skip moves past one JSON value, checking its syntax.
func (s *scanner) skip(path string, depth int) error {
	if depth > maxDepth {
		return Invalid(path, "is nested too deeply")
	}
	switch c := s.peek(); {
	case c == '"':
		_, err := s.str(path)
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number(path)
		return err
	case c == '{':
		return s.members(path, func(_, sub string) error { return s.skip(sub, depth+1) })
	case c == '[':
		s.pos++
		if s.peek() == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.skip(path, depth+1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.syntax(path)
			}
		}
	case s.literal("null"), s.literal("true"), s.literal("false"):
		return nil
	}
	return s.syntax(path)
}
