package firestore

import (
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	fielderr "github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// fields reads a stored document strictly. Every getter checks the stored
// type; the first mismatch is kept in err, naming the document and field,
// and later getters return zero values. Nothing is converted silently: a
// float where an integer belongs is corruption, not a number to round.
type fields struct {
	path   string
	prefix string // of field names in errors, inside an array element
	data   map[string]any
	err    error
}

// read starts decoding snap.
func read(snap *firestore.DocumentSnapshot) *fields {
	return &fields{path: docPath(snap.Ref), data: snap.Data()}
}

// docPath names a document in errors: "<prefixed collection>/<id>".
func docPath(ref *firestore.DocumentRef) string { return ref.Parent.ID + "/" + ref.ID }

// corrupt records that field is not what Stipend stores there.
func (f *fields) corrupt(field, format string, args ...any) {
	if f.err == nil {
		f.err = store.Errorf(store.CodeInternal, "corrupt document %s: field %s%s: %s", f.path, f.prefix, field, fmt.Sprintf(format, args...))
	}
}

// get looks up a dotted field path; ok is false when it is absent or null.
func (f *fields) get(field string) (any, bool) {
	var cur any = f.data
	for _, part := range strings.Split(field, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

func (f *fields) has(field string) bool { _, ok := f.get(field); return ok }

// value reads a required field of stored type T, named want in errors.
func value[T any](f *fields, field, want string) T {
	v, ok := f.get(field)
	if !ok {
		f.corrupt(field, "missing")
	} else if t, ok := v.(T); ok {
		return t
	} else {
		f.corrupt(field, "is %T, want %s", v, want)
	}
	var zero T
	return zero
}

func (f *fields) str(field string) string    { return value[string](f, field, "a string") }
func (f *fields) integer(field string) int64 { return value[int64](f, field, "an integer") }
func (f *fields) boolean(field string) bool  { return value[bool](f, field, "a boolean") }
func (f *fields) instant(field string) time.Time {
	return value[time.Time](f, field, "a timestamp").UTC()
}

// optional reads a field of stored type T that may be absent (zero then).
func optional[T any](f *fields, field, want string) T {
	if !f.has(field) {
		var zero T
		return zero
	}
	return value[T](f, field, want)
}

func (f *fields) optStr(field string) string { return optional[string](f, field, "a string") }

// optInstant reads an optional timestamp (nil when absent).
func (f *fields) optInstant(field string) *time.Time {
	if !f.has(field) {
		return nil
	}
	t := f.instant(field)
	return &t
}

// amount reads a required amount {cents, currency}: cents must be a stored
// integer within ±money.MaxCents and currency an ISO 4217-shaped code.
func (f *fields) amount(field string) (m money.Money) {
	f.sub(field, func(g *fields) {
		m = money.Money{Cents: g.integer("cents"), Currency: g.str("currency")}
		if err := m.Validate(); err != nil {
			g.corrupt(fieldOf(err), "%v", err)
		}
	})
	return m
}

// strs reads an optional array of strings (nil when absent or empty).
func (f *fields) strs(field string) []string {
	var out []string
	for i, x := range optional[[]any](f, field, "an array") {
		s, ok := x.(string)
		if !ok {
			f.corrupt(fmt.Sprintf("%s[%d]", field, i), "is %T, want a string", x)
		}
		out = append(out, s)
	}
	return out
}

// strMap reads an optional map of strings (nil when absent or empty).
func (f *fields) strMap(field string) map[string]string {
	m := optional[map[string]any](f, field, "a map")
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			f.corrupt(field+"."+k, "is %T, want a string", x)
		}
		out[k] = s
	}
	return out
}

// fieldOf returns the field a money validation error names.
func fieldOf(err error) string {
	if fe, ok := err.(*fielderr.Error); ok && fe.Field != "" {
		return fe.Field
	}
	return "cents"
}

// sub decodes the required map field with fn, whose errors name the
// map's fields ("grant.scope.service").
func (f *fields) sub(field string, fn func(*fields)) {
	if m := value[map[string]any](f, field, "a map"); m != nil {
		f.within(field+".", m, fn)
	}
}

// within decodes m, a map inside f's document, with fn; prefix names it in
// errors.
func (f *fields) within(prefix string, m map[string]any, fn func(*fields)) {
	g := &fields{path: f.path, prefix: f.prefix + prefix, data: m}
	fn(g)
	if g.err != nil && f.err == nil {
		f.err = g.err
	}
}

// each decodes an optional array of maps, calling fn with a reader for each
// element; errors name the element ("grants[1].type").
func (f *fields) each(field string, fn func(*fields)) {
	for i, x := range optional[[]any](f, field, "an array") {
		m, ok := x.(map[string]any)
		if !ok {
			f.corrupt(fmt.Sprintf("%s[%d]", field, i), "is %T, want a map", x)
			return
		}
		f.within(fmt.Sprintf("%s[%d].", field, i), m, fn)
	}
}

// blob reads a bytes field; an absent one reads as no bytes.
func (f *fields) blob(field string) []byte {
	if !f.has(field) {
		return []byte{}
	}
	return value[[]byte](f, field, "bytes")
}
