package money_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

func TestMoney_Arithmetic(t *testing.T) {
	usd := func(c int64) money.Money { return money.Money{Cents: c, Currency: "USD"} }
	tests := []struct {
		name    string
		op      func() (money.Money, error)
		want    money.Money
		wantErr error
	}{
		{"Add", func() (money.Money, error) { return usd(150).Add(usd(50)) }, usd(200), nil},
		{"Sub", func() (money.Money, error) { return usd(150).Sub(usd(200)) }, usd(-50), nil},
		{"AddAtCeiling", func() (money.Money, error) { return usd(money.MaxCents - 1).Add(usd(1)) }, usd(money.MaxCents), nil},
		{"AddPastCeiling", func() (money.Money, error) { return usd(money.MaxCents).Add(usd(1)) }, money.Money{}, money.ErrOutOfRange},
		{"SubPastFloor", func() (money.Money, error) { return usd(-money.MaxCents).Sub(usd(1)) }, money.Money{}, money.ErrOutOfRange},
		{"AddInt64Overflow", func() (money.Money, error) { return usd(math.MaxInt64).Add(usd(1)) }, money.Money{}, money.ErrOutOfRange},
		{"SubMinInt64", func() (money.Money, error) { return usd(0).Sub(usd(math.MinInt64)) }, money.Money{}, money.ErrOutOfRange},
		{"CurrencyMismatch", func() (money.Money, error) { return usd(1).Add(money.Money{Cents: 1, Currency: "EUR"}) }, money.Money{}, money.ErrCurrencyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.op()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMoney_Validate(t *testing.T) {
	tests := []struct {
		m         money.Money
		wantField string
	}{
		{money.Money{Cents: 0, Currency: "USD"}, ""},
		{money.Money{Cents: money.MaxCents, Currency: "JPY"}, ""},
		{money.Money{Cents: -money.MaxCents, Currency: "EUR"}, ""},
		{money.Money{Cents: money.MaxCents + 1, Currency: "USD"}, "cents"},
		{money.Money{Cents: 1, Currency: "usd"}, "currency"},
		{money.Money{Cents: 1, Currency: "US"}, "currency"},
		{money.Money{Cents: 1, Currency: ""}, "currency"},
	}
	for _, tt := range tests {
		err := tt.m.Validate()
		var fe *field.Error
		switch {
		case tt.wantField == "" && err != nil:
			t.Errorf("%+v.Validate() = %v, want nil", tt.m, err)
		case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField):
			t.Errorf("%+v.Validate() = %v, want a field.Error on %q", tt.m, err, tt.wantField)
		}
	}
}

func TestMoney_Cmp(t *testing.T) {
	a, b := money.Money{Cents: 1, Currency: "USD"}, money.Money{Cents: 2, Currency: "USD"}
	if got, _ := a.Cmp(b); got != -1 {
		t.Errorf("Cmp(1, 2) = %d, want -1", got)
	}
	if got, _ := b.Cmp(a); got != 1 {
		t.Errorf("Cmp(2, 1) = %d, want 1", got)
	}
	if _, err := a.Cmp(money.Money{Cents: 1, Currency: "EUR"}); !errors.Is(err, money.ErrCurrencyMismatch) {
		t.Errorf("Cmp across currencies: err = %v, want ErrCurrencyMismatch", err)
	}
}

func TestMoney_UnmarshalJSON(t *testing.T) {
	tests := []struct {
		in        string
		want      money.Money
		wantField string // "" means success; "-" means a whole-value error
	}{
		{`{"cents":1500,"currency":"USD"}`, money.Money{Cents: 1500, Currency: "USD"}, ""},
		{` { "currency" : "EUR" , "cents" : -7 } `, money.Money{Cents: -7, Currency: "EUR"}, ""},
		{`{"cents":9007199254740991,"currency":"USD"}`, money.Money{Cents: money.MaxCents, Currency: "USD"}, ""},
		{`{"cents":9007199254740992,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":-9007199254740992,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":99999999999999999999999,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":15.0,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":1.5,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":1e3,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":1E3,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":"1500","currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":null,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":true,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":[1],"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":1,"currency":"usd"}`, money.Money{}, "currency"},
		{`{"cents":1,"currency":"USDX"}`, money.Money{}, "currency"},
		{`{"cents":1,"currency":1}`, money.Money{}, "currency"},
		{`{"cents":1}`, money.Money{}, "currency"},
		{`{"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":1,"cents":2,"currency":"USD"}`, money.Money{}, "cents"},
		{`{"cents":1,"currency":"USD","extra":1}`, money.Money{}, "extra"},
		{`[1,"USD"]`, money.Money{}, "-"},
		{`1500`, money.Money{}, "-"},
		{`{"cents":1,"currency":"USD"`, money.Money{}, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got money.Money
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantField == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Unmarshal(%s) = %+v, %v; want %+v, nil", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Unmarshal(%s) = %+v, nil; want an error on %q", tt.in, got, tt.wantField)
			}
			var fe *field.Error
			if tt.wantField != "-" && (!errors.As(err, &fe) || fe.Field != tt.wantField) {
				t.Errorf("Unmarshal(%s) err = %v, want a field.Error on %q", tt.in, err, tt.wantField)
			}
		})
	}
}

// TestMoney_UnmarshalJSONFrom: inside a larger document, the streaming
// decoder's errors point at the offending member and name it relative to
// the amount.
func TestMoney_UnmarshalJSONFrom(t *testing.T) {
	tests := []struct {
		in          string
		wantPointer jsontext.Pointer
		wantField   string
		wantErr     error
	}{
		{`{"a":{"cents":1.5,"currency":"USD"}}`, "/a/cents", "cents", nil},
		{`{"a":{"cents":"1","currency":"USD"}}`, "/a/cents", "cents", nil},
		{`{"a":{"cents":9007199254740992,"currency":"USD"}}`, "/a/cents", "cents", money.ErrOutOfRange},
		{`{"a":{"currency":"USD","cents":1}, "b":{"cents":1}}`, "/b/currency", "currency", nil},
		{`{"a":{"cents":1,"currency":"US"}}`, "/a/currency", "currency", money.ErrInvalidCurrency},
		{`{"a":{"cents":1,"currency":"USD","x~y":1}}`, "/a/x~0y", "x~y", nil},
		{`{"a":12}`, "/a", "", nil},
		{`{"a":null}`, "/a", "", nil},
		{`{"l":[{"cents":1,"currency":"USD"},{"cents":1,"currency":1}]}`, "/l/1/currency", "currency", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var doc struct {
				A money.Money   `json:"a"`
				B *money.Money  `json:"b"`
				L []money.Money `json:"l"`
			}
			err := jsonv2.Unmarshal([]byte(tt.in), &doc)
			var se *jsonv2.SemanticError
			var fe *field.Error
			if !errors.As(err, &se) || !errors.As(err, &fe) {
				t.Fatalf("Unmarshal(%s) = %v, want a SemanticError with a FieldError", tt.in, err)
			}
			if se.JSONPointer != tt.wantPointer || fe.Field != tt.wantField || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("Unmarshal(%s): pointer %q field %q err %v, want %q %q %v", tt.in, se.JSONPointer, fe.Field, err, tt.wantPointer, tt.wantField, tt.wantErr)
			}
		})
	}
	var doc struct{ A money.Money }
	if err := jsonv2.Unmarshal([]byte(`{"A":{"cents":1,"currency":"USD"`), &doc); !errors.As(err, new(*jsontext.SyntacticError)) {
		t.Errorf("truncated amount: err = %v, want a SyntacticError", err)
	}
}

func TestMoney_MarshalJSON(t *testing.T) {
	got, err := json.Marshal(money.Money{Cents: -42, Currency: "GBP"})
	if want := `{"cents":-42,"currency":"GBP"}`; err != nil || string(got) != want {
		t.Errorf("Marshal = %s, %v; want %s", got, err, want)
	}
	if _, err := json.Marshal(money.Money{Cents: money.MaxCents + 1, Currency: "GBP"}); err == nil {
		t.Error("Marshal of an out-of-range amount succeeded, want an error")
	}
}

// FuzzUnmarshalJSON checks that the decoder never panics, never accepts an
// amount it would not itself produce, and round-trips what it accepts.
func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		`{"cents":1500,"currency":"USD"}`, `{"cents":-0,"currency":"EUR"}`, `{"cents":1e3,"currency":"USD"}`,
		`{"cents":9007199254740992,"currency":"USD"}`, `{"cents":"1","currency":"USD"}`, `{}`, `[]`, `null`,
		`{"cents":1,"currency":"USD","x":{}}`, `{"cents":01,"currency":"USD"}`, `{"cents":1,"currency":"US\u0044"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m money.Money
		if err := json.Unmarshal(data, &m); err != nil {
			return
		}
		if verr := m.Validate(); verr != nil {
			t.Fatalf("accepted %q as %+v, which does not validate: %v", data, m, verr)
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", m, err)
		}
		var back money.Money
		if err := json.Unmarshal(out, &back); err != nil || back != m {
			t.Fatalf("round trip of %+v gave %+v, %v", m, back, err)
		}
	})
}
