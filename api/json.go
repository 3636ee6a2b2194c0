package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// strict is how request bodies are read: the library's own strictness
// (duplicate names, invalid UTF-8, integers that are not integer literals
// are errors), unknown members refused, and the rules it has no option for.
// strictText adds decodeText, for a body that may hold U+0000 (DecodeJSON).
// strictNoNull and strictTextNoNull are the same without the refuseNull
// functions, for a body without the word null (and so without a null), on
// which they would do nothing but cost a call for every value.
var (
	strict, strictText             = strictOptions(false, true), strictOptions(true, true)
	strictNoNull, strictTextNoNull = strictOptions(false, false), strictOptions(true, false)
)

func strictOptions(text, nulls bool) json.Options {
	unmarshalers := []*json.Unmarshalers{json.UnmarshalFromFunc(decodeInt)}
	if nulls {
		unmarshalers = append(unmarshalers,
			json.UnmarshalFromFunc(refuseNull[string]),
			json.UnmarshalFromFunc(refuseNull[bool]),
			json.UnmarshalFromFunc(refuseNull[int64]),
			json.UnmarshalFromFunc(refuseNullPointer[int64]),
			json.UnmarshalFromFunc(refuseNullPointer[money.Money]),
		)
	}
	if text {
		unmarshalers = append(unmarshalers, json.UnmarshalFromFunc(decodeText))
	}
	return json.JoinOptions(
		jsontext.AllowDuplicateNames(false),
		jsontext.AllowInvalidUTF8(false),
		json.RejectUnknownMembers(true),
		json.WithUnmarshalers(json.JoinUnmarshalers(unmarshalers...)),
	)
}

// escapedNUL is how U+0000 appears in JSON: only escaped (a raw control
// character is invalid). A body without it holds no U+0000 and is read
// without decodeText, whose per-string cost the hot path does not pay.
var escapedNUL = []byte(`\u0000`)

// nullWord is in every body with a null (and in some without one, in a
// string).
var nullWord = []byte("null")

// refuseNull refuses null for a T, where Go could not tell it from an absent
// member. (Pointers, slices and maps read null as absent; so do the named
// string types of enums, whose validator tags then judge the empty value.)
func refuseNull[T any](dec *jsontext.Decoder, _ *T) error {
	if dec.PeekKind() != 'n' {
		return errors.ErrUnsupported // the library decodes it
	}
	if _, err := dec.ReadToken(); err != nil { // "nul" is malformed, not null
		return err
	}
	return &json.SemanticError{JSONKind: 'n', GoType: reflect.TypeFor[T]()}
}

// decodeText refuses U+0000 in every string of a body: a member's value, a
// map key (metadata), an array element. PostgreSQL cannot store it in text
// and Firestore and memory could, so this one rule, at the boundary, keeps
// the stores alike: a 400 naming the field (the map, for a key), whatever
// the store.
func decodeText(dec *jsontext.Decoder, s *string) error {
	if dec.PeekKind() != '"' {
		return errors.ErrUnsupported // the library refuses it
	}
	kind, n := dec.StackIndex(dec.StackDepth())
	isKey := kind == '{' && n%2 == 0
	raw, err := dec.ReadValue() // a view of the quoted string, valid UTF-8, no raw control characters
	if err != nil {
		return err
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 { // no escapes, so no U+0000 either: the common case, one allocation
		*s = string(body)
		return nil
	}
	v, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return err
	}
	if bytes.IndexByte(v, 0) >= 0 {
		at := dec.StackPointer() // a value's own; for a key, the map's
		if isKey {
			at = at.Parent()
		}
		return &json.SemanticError{JSONPointer: at, JSONKind: '"', Err: &field.Error{Reason: "must not contain U+0000 (NUL)"}}
	}
	*s = string(v)
	return nil
}

// refuseNullPointer refuses null for an optional integer or amount (a *T
// member): only an absent member means its default (a capture's maximum, a
// refund of the whole charge), and null would read as absent. A member
// where null has a meaning of its own is a nullable[T] (limits_body.go).
func refuseNullPointer[T any](dec *jsontext.Decoder, _ **T) error {
	return refuseNull[T](dec, nil)
}

// decodeInt bounds every integer a request carries (request bodies use
// int64) by ±2^53−1, the largest integer every JSON implementation
// represents exactly: the same ceiling as money.MaxCents.
func decodeInt(dec *jsontext.Decoder, n *int64) error {
	if dec.PeekKind() != '0' {
		return errors.ErrUnsupported // the library refuses it
	}
	if err := json.UnmarshalDecode(dec, (*jsonInt)(n)); err != nil {
		return err
	}
	if *n > money.MaxCents || *n < -money.MaxCents {
		return &json.SemanticError{JSONKind: '0', Err: strconv.ErrRange}
	}
	return nil
}

// jsonInt is int64 decoded the library's default way (decodeInt does not apply).
type jsonInt int64

// decoder is a pooled JSON decoder with its reader.
type decoder struct {
	r   bytes.Reader
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// DecodeJSON decodes data, which must hold exactly one JSON value, into dst
// (a non-nil pointer) with the encoding/json/v2 pre-release
// (github.com/go-json-experiment/json), strictly: unknown and duplicate
// object members, wrong types, integers given as fractions, exponents or
// strings, integers beyond ±2^53−1, U+0000 in any string (decodeText), null for a string, boolean, integer or
// amount (optional or not; nullable[T] members read null as null), invalid UTF-8 and trailing data are errors. Amounts follow
// money.Money.UnmarshalJSONFrom. The error is an *Error (400) naming the
// dotted path of the offending field ("cost.cents", "grant.scope.tools[1]").
func DecodeJSON(data []byte, dst any) error {
	d := decoders.Get().(*decoder)
	defer func() {
		d.r.Reset(nil)
		if len(data) <= 1<<16 { // keep no large buffer alive
			decoders.Put(d)
		}
	}()
	d.r.Reset(data)
	opts := strict
	switch nul, null := bytes.Contains(data, escapedNUL), bytes.Contains(data, nullWord); {
	case nul && null:
		opts = strictText // may hold U+0000 (or a literal backslash before "u0000")
	case nul:
		opts = strictTextNoNull
	case !null:
		opts = strictNoNull
	}
	d.dec.Reset(&d.r, opts)
	if d.dec.PeekKind() == 'n' { // the library would read it as an empty body
		if _, err := d.dec.ReadToken(); err != nil {
			return decodeError(&d.dec, err)
		}
		return Invalid("", expected(reflect.TypeOf(dst).Elem())+", not null")
	}
	if err := json.UnmarshalDecode(&d.dec, dst); err != nil {
		return decodeError(&d.dec, err)
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return Invalid("", "unexpected data after the JSON value")
	}
	return nil
}

// decodeError names the field of a decoding error and says what is wrong
// with it, in the words of the API.
func decodeError(dec *jsontext.Decoder, err error) *Error {
	var se *json.SemanticError
	var xe *jsontext.SyntacticError
	var fe *field.Error
	switch {
	case errors.As(err, &xe):
		return Invalid(fieldAt(dec, xe.JSONPointer, true), syntaxDetail(xe))
	case errors.As(err, &se) && errors.As(err, &fe):
		return Invalid(fieldAt(dec, se.JSONPointer, false), fe.Reason)
	case errors.As(err, &se):
		return Invalid(fieldAt(dec, se.JSONPointer, false), semanticDetail(se))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Invalid("", "the JSON body ends too early")
	}
	return Invalid("", "the body could not be decoded")
}

// fieldAt turns a JSON Pointer into the field's dotted path ("grant.scope",
// "tags[1]"). The decoder's stack, as the error left it, tells array
// indices from member names. A syntax error between the elements of an
// array names the element that was expected.
func fieldAt(dec *jsontext.Decoder, p jsontext.Pointer, syntax bool) string {
	var b strings.Builder
	level := 0
	for tok := range p.Tokens() {
		level++
		if kind, _ := stackAt(dec, level); kind == '[' {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if kind, n := stackAt(dec, level+1); syntax && kind == '[' && level+1 == dec.StackDepth() {
		b.WriteString("[" + strconv.FormatInt(n, 10) + "]")
	}
	return b.String()
}

// stackAt is dec.StackIndex for levels that may be past the decoder's depth.
func stackAt(dec *jsontext.Decoder, level int) (jsontext.Kind, int64) {
	if level > dec.StackDepth() {
		return 0, 0
	}
	return dec.StackIndex(level)
}

func syntaxDetail(e *jsontext.SyntacticError) string {
	switch {
	case errors.Is(e, jsontext.ErrDuplicateName):
		return "given more than once"
	case errors.Is(e, io.ErrUnexpectedEOF):
		return "the JSON body ends too early"
	}
	return fmt.Sprintf("malformed JSON at byte %d: %v", e.ByteOffset, e.Err)
}

var timeType = reflect.TypeFor[time.Time]()

func semanticDetail(e *json.SemanticError) string {
	switch {
	case errors.Is(e, json.ErrUnknownName):
		return "unknown field"
	case errors.Is(e, strconv.ErrRange):
		return fmt.Sprintf("must be an integer between %d and %d", -money.MaxCents, money.MaxCents)
	case e.JSONKind == 'n':
		return expected(e.GoType) + ", not null"
	case e.JSONKind == '0' && e.GoType != nil && e.GoType.Kind() == reflect.Int64:
		return "must be a JSON integer (no fraction or exponent)"
	}
	return expected(e.GoType)
}

// expected says what JSON a value of Go type t must be.
func expected(t reflect.Type) string {
	if t == nil {
		return "is not valid"
	}
	if t == timeType {
		return "must be an RFC 3339 date-time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "must be a string"
	case reflect.Bool:
		return "must be true or false"
	case reflect.Int64:
		return "must be a JSON integer"
	case reflect.Slice:
		return "must be an array"
	case reflect.Map, reflect.Struct:
		return "must be an object"
	}
	return "is not valid"
}
