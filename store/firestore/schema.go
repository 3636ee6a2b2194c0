package firestore

import (
	"reflect"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/money"
)

// A document's shape is declared once, as a list of fields each bound to a
// Go value (docs_*.go): encode writes the list into a document, decode reads
// it back strictly (decode.go). The stored field names are part of the
// deployment (indexes and rules name them); change them only with a
// migration. An optional field (opt, ptr) is absent when its value is zero
// or nil, never stored as null; instants are stored as stamp leaves them.
type field struct {
	name     string
	put      func() any    // the stored value
	get      func(*fields) // reads name from a document into the value
	zero     func() bool   // whether the value is zero
	optional bool          // absent when zero; read only when present
}

func encode(fs []field) map[string]any {
	d := make(map[string]any, len(fs))
	for _, fd := range fs {
		if !fd.optional || !fd.zero() {
			d[fd.name] = fd.put()
		}
	}
	return d
}

func (f *fields) decode(fs []field) {
	for _, fd := range fs {
		if !fd.optional || f.has(fd.name) {
			fd.get(f)
		}
	}
}

// decoder decodes a document into the fields of a new T.
func decoder[T any](fs func(*T) []field) func(*firestore.DocumentSnapshot) (T, error) {
	return func(snap *firestore.DocumentSnapshot) (T, error) {
		var v T
		f := read(snap)
		f.decode(fs(&v))
		return v, f.err
	}
}

// leaf binds a value stored as one Firestore value.
func leaf[T any](name string, p *T, put func(T) any, get func(*fields, string) T) field {
	return field{name: name, put: func() any { return put(*p) }, get: func(f *fields) { *p = get(f, name) },
		zero: func() bool { return isZero(*p) }}
}

func isZero(v any) bool {
	if z, ok := v.(interface{ IsZero() bool }); ok {
		return z.IsZero()
	}
	if r := reflect.ValueOf(v); r.Kind() == reflect.Slice || r.Kind() == reflect.Map {
		return r.Len() == 0
	}
	return reflect.ValueOf(v).IsZero()
}

// opt makes fd optional: absent when its value is zero.
func opt(fd field) field { fd.optional = true; return fd }

// when makes fd optional: absent unless present says otherwise.
func when(fd field, present func() bool) field {
	fd.optional, fd.zero = true, func() bool { return !present() }
	return fd
}

// ptr binds an optional value, absent when nil, with the field inner makes.
func ptr[T any](name string, p **T, inner func(string, *T) field) field {
	return field{name: name, optional: true, zero: func() bool { return *p == nil },
		put: func() any { return inner(name, *p).put() },
		get: func(f *fields) { v := new(T); inner(name, v).get(f); *p = v }}
}

func str[T ~string](name string, p *T) field {
	return leaf(name, p, func(v T) any { return string(v) }, func(f *fields, n string) T { return T(f.str(n)) })
}

func integer[T ~int | ~int64](name string, p *T) field {
	return leaf(name, p, func(v T) any { return int64(v) }, func(f *fields, n string) T { return T(f.integer(n)) })
}

func boolean(name string, p *bool) field {
	return leaf(name, p, func(v bool) any { return v }, (*fields).boolean)
}

func instant(name string, p *time.Time) field {
	return leaf(name, p, func(t time.Time) any { return stamp(t) }, (*fields).instant)
}

func amount(name string, p *money.Money) field {
	return leaf(name, p, func(m money.Money) any { return amountDoc(m) }, (*fields).amount)
}

func amountDoc(m money.Money) map[string]any {
	return map[string]any{"cents": m.Cents, "currency": m.Currency}
}

func strMap(name string, p *map[string]string) field {
	return leaf(name, p, func(m map[string]string) any { return m }, (*fields).strMap)
}

func blob(name string, p *[]byte) field {
	return leaf(name, p, func(b []byte) any { return b }, (*fields).blob)
}

// strs binds an array of strings; an absent one reads as none.
func strs[T ~string](name string, p *[]T) field {
	return leaf(name, p, func(v []T) any {
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = string(s)
		}
		return out
	}, func(f *fields, n string) []T {
		var out []T
		for _, s := range f.strs(n) {
			out = append(out, T(s))
		}
		return out
	})
}

// nested binds a value stored as a map of the fields fs makes; it is read in
// place, over what other fields read into it.
func nested[T any](fs func(*T) []field) func(string, *T) field {
	return func(name string, p *T) field {
		return field{name: name, put: func() any { return encode(fs(p)) },
			get:  func(f *fields) { f.sub(name, func(g *fields) { g.decode(fs(p)) }) },
			zero: func() bool { return isZero(*p) }}
	}
}

// array binds an array of maps, each of the fields fs makes; an absent one
// reads as none.
func array[T any](name string, p *[]T, fs func(*T) []field) field {
	return leaf(name, p, func(v []T) any {
		out := make([]any, len(v))
		for i := range v {
			out[i] = encode(fs(&v[i]))
		}
		return out
	}, func(f *fields, n string) []T {
		var out []T
		f.each(n, func(g *fields) {
			var v T
			g.decode(fs(&v))
			out = append(out, v)
		})
		return out
	})
}
