package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/money"
)

// maxJSONInt bounds every JSON integer a request may carry: 2^53−1, the
// largest integer every JSON implementation represents exactly.
const maxJSONInt = 1<<53 - 1

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decode reads the request body into dst strictly: a JSON Content-Type, at
// most s.bodyLimit bytes, exactly one JSON value of dst's shape (no unknown
// or duplicate members, no wrong types, no trailing data, integers only where
// integers belong), then validator tags. Every failure is a 4xx *Error
// naming the field.
func (s *Server) decode(c echo.Context, dst any) error {
	req := c.Request()
	if !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return &Error{Status: http.StatusUnsupportedMediaType, Kind: KindUnsupportedMediaType,
			Detail: "the body must be application/json",
			Errors: []FieldError{{Field: "Content-Type", Detail: "must be application/json"}}}
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<16 {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(req.Body, s.bodyLimit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(s.bodyLimit)
		}
		return Invalid("", "the body could not be read")
	}
	if n > s.bodyLimit {
		return tooLarge(s.bodyLimit)
	}
	if err := DecodeJSON(buf.Bytes(), dst); err != nil {
		return err
	}
	return s.check(dst)
}

// decodeOptional is decode for routes whose body may be absent: an empty
// body leaves dst as it is.
func (s *Server) decodeOptional(c echo.Context, dst any) error {
	req := c.Request()
	if req.ContentLength == 0 && req.Header.Get(echo.HeaderContentType) == "" {
		return s.check(dst)
	}
	return s.decode(c, dst)
}

func tooLarge(limit int64) *Error {
	d := fmt.Sprintf("the body must be at most %d bytes", limit)
	return &Error{Status: http.StatusRequestEntityTooLarge, Kind: KindBodyTooLarge, Detail: d,
		Errors: []FieldError{{Field: "", Detail: d}}}
}

func isJSON(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// DecodeJSON decodes data, which must hold exactly one JSON value, into dst
// (a pointer) strictly: unknown and duplicate object members, wrong types,
// fractional or out-of-range integers (beyond ±2^53−1), and trailing data are
// errors. Amounts are decoded with money's strict codec. The error is an
// *Error (400) naming the dotted path of the offending field.
func DecodeJSON(data []byte, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("api.DecodeJSON: dst must be a non-nil pointer")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	d := walker{dec: dec}
	if err := d.value("", rv.Elem()); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Invalid("", "unexpected data after the JSON value")
	}
	return nil
}

// walker decodes a token stream into Go values, keeping the JSON path.
type walker struct{ dec *json.Decoder }

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

func (w walker) syntax(path string, err error) *Error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return Invalid(path, "the JSON body ends too early")
	}
	return Invalid(path, "malformed JSON")
}

// value decodes the next JSON value into v.
func (w walker) value(path string, v reflect.Value) error {
	t := v.Type()
	if t.Kind() == reflect.Pointer && reflect.PointerTo(t.Elem()).Implements(unmarshalerType) {
		var raw json.RawMessage
		if err := w.dec.Decode(&raw); err != nil {
			return w.syntax(path, err)
		}
		if string(raw) == "null" {
			v.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		if err := unmarshalLeaf(path, p, raw); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		var raw json.RawMessage
		if err := w.dec.Decode(&raw); err != nil {
			return w.syntax(path, err)
		}
		if string(raw) == "null" {
			return Invalid(path, "must not be null")
		}
		return unmarshalLeaf(path, v.Addr(), raw)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.syntax(path, err)
	}
	return w.valueFrom(tok, path, v)
}

// valueFrom decodes the value that starts with tok into v.
func (w walker) valueFrom(tok json.Token, path string, v reflect.Value) error {
	switch v.Kind() {
	case reflect.Pointer:
		if tok == nil {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := w.valueFrom(tok, path, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.String:
		s, ok := tok.(string)
		if !ok {
			return w.wrongType(tok, path, "must be a string")
		}
		v.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := tok.(bool)
		if !ok {
			return w.wrongType(tok, path, "must be true or false")
		}
		v.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num, ok := tok.(json.Number)
		if !ok {
			return w.wrongType(tok, path, "must be a JSON integer")
		}
		n, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil || !isIntegerLiteral(string(num)) {
			if strings.ContainsAny(string(num), ".eE") {
				return Invalid(path, "must be a JSON integer (no fraction or exponent)")
			}
			return Invalid(path, fmt.Sprintf("must be an integer between %d and %d", -maxJSONInt, maxJSONInt))
		}
		if n > maxJSONInt || n < -maxJSONInt || v.OverflowInt(n) {
			return Invalid(path, fmt.Sprintf("must be an integer between %d and %d", -maxJSONInt, maxJSONInt))
		}
		v.SetInt(n)
		return nil
	case reflect.Slice:
		if tok == nil {
			v.SetZero()
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return w.wrongType(tok, path, "must be an array")
		}
		out := reflect.MakeSlice(v.Type(), 0, 4)
		for i := 0; w.dec.More(); i++ {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := w.value(path+"["+strconv.Itoa(i)+"]", e); err != nil {
				return err
			}
			out = reflect.Append(out, e)
		}
		if _, err := w.dec.Token(); err != nil {
			return w.syntax(path, err)
		}
		v.Set(out)
		return nil
	case reflect.Map:
		return w.object(tok, path, v)
	case reflect.Struct:
		return w.object(tok, path, v)
	}
	panic("api: request type has an unsupported field kind " + v.Kind().String())
}

func (w walker) object(tok json.Token, path string, v reflect.Value) error {
	if tok == nil && v.Kind() == reflect.Map {
		v.SetZero()
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return w.wrongType(tok, path, "must be an object")
	}
	var fields *structFields
	if v.Kind() == reflect.Struct {
		fields = fieldsOf(v.Type())
	} else {
		v.Set(reflect.MakeMap(v.Type()))
	}
	var seen uint64
	for w.dec.More() {
		kt, err := w.dec.Token()
		if err != nil {
			return w.syntax(path, err)
		}
		name, _ := kt.(string)
		sub := joinPath(path, name)
		if fields == nil {
			key := reflect.ValueOf(name).Convert(v.Type().Key())
		if v.MapIndex(key).IsValid() {
				return Invalid(sub, "given more than once")
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if err := w.value(sub, e); err != nil {
				return err
			}
			v.SetMapIndex(key, e)
			continue
		}
		i, ok := fields.byName[name]
		if !ok {
			return Invalid(sub, "unknown field")
		}
		if seen&(1<<i) != 0 {
			return Invalid(sub, "given more than once")
		}
		seen |= 1 << i
		if err := w.value(sub, v.Field(fields.index[i])); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return w.syntax(path, err)
	}
	return nil
}

// wrongType reports a value of the wrong JSON type.
func (w walker) wrongType(tok json.Token, path, detail string) error {
	if tok == nil {
		return Invalid(path, detail+", not null")
	}
	return Invalid(path, detail)
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

// unmarshalLeaf runs a type's own strict decoder (money.Money, time.Time) and
// names the field in its error.
func unmarshalLeaf(path string, p reflect.Value, raw []byte) error {
	err := p.Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	if err == nil {
		return nil
	}
	var fe *money.FieldError
	if errors.As(err, &fe) {
		return Invalid(joinPath(path, fe.Field), fe.Reason)
	}
	if p.Type().Elem() == timeType {
		return Invalid(path, "must be an RFC 3339 date-time string")
	}
	return Invalid(path, "is not valid")
}

// isIntegerLiteral reports whether s is -?(0|[1-9][0-9]*).
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

// structFields is the decoding table of a request struct.
type structFields struct {
	byName map[string]int // JSON name → position in index
	index  []int          // position → struct field index
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.byName[name] = len(f.index)
		f.index = append(f.index, i)
	}
	if len(f.index) > 64 {
		panic("api: request struct " + t.String() + " has more than 64 fields")
	}
	fieldCache.Store(t, f)
	return f
}
