package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/money"
)

// sample has every kind of field the request bodies use.
type sample struct {
	Name  string            `json:"name"`
	N     int64             `json:"n"`
	Flag  bool              `json:"flag"`
	Cost  *money.Money      `json:"cost"`
	Price money.Money       `json:"price"`
	At    *time.Time        `json:"at"`
	Tags  []string          `json:"tags"`
	Meta  map[string]string `json:"meta"`
	Inner *struct {
		Units int64       `json:"units"`
		Cost  money.Money `json:"cost"`
	} `json:"inner"`
}

func TestDecodeJSON(t *testing.T) {
	t.Run("Valid", func(t *testing.T) {
		var got sample
		err := api.DecodeJSON([]byte(`{"name":"x","n":-3,"flag":true,"cost":{"cents":5,"currency":"EUR"},
			"price":{"currency":"USD","cents":0},"at":"2026-01-02T03:04:05Z","tags":["a","b"],"meta":{"k":"v"},
			"inner":{"units":9007199254740991,"cost":{"cents":1,"currency":"JPY"}}}`), &got)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		if got.Name != "x" || got.N != -3 || !got.Flag || *got.Cost != (money.Money{Cents: 5, Currency: "EUR"}) ||
			got.Price.Currency != "USD" || !got.At.Equal(at) || len(got.Tags) != 2 || got.Meta["k"] != "v" ||
			got.Inner.Units != 1<<53-1 || got.Inner.Cost.Currency != "JPY" {
			t.Errorf("DecodeJSON: got %+v", got)
		}
	})
	t.Run("Escapes", func(t *testing.T) {
		var got sample
		if err := api.DecodeJSON([]byte(`{"name":"a\"b\\c\u00e9\n","meta":{"\u006b":"v"}}`), &got); err != nil {
			t.Fatal(err)
		}
		if got.Name != "a\"b\\c\u00e9\n" || got.Meta["k"] != "v" {
			t.Errorf("escapes: got %q %v", got.Name, got.Meta)
		}
	})
	t.Run("NUL", func(t *testing.T) {
		// U+0000 is refused in any string, naming the field (a map key: the map);
		// a literal backslash before "u0000" is no U+0000.
		var got sample
		if err := api.DecodeJSON([]byte(`{"name":"a\\u0000","meta":{"k":"\\u0000"}}`), &got); err != nil || got.Name != `a\u0000` {
			t.Errorf("escaped backslash: %v, name %q; want accepted as written", err, got.Name)
		}
		for body, field := range map[string]string{`{"name":"a\u0000"}`: "name", `{"tags":["x","\u0000"]}`: "tags[1]",
			`{"meta":{"k\u0000":"v"}}`: "meta", `{"inner":{"cost":{"cents":1,"currency":"US\u0000"}}}`: "inner.cost.currency"} {
			var e *api.Error
			if err := api.DecodeJSON([]byte(body), &sample{}); !errors.As(err, &e) || len(e.Errors) != 1 || e.Errors[0].Field != field {
				t.Errorf("DecodeJSON(%s) = %v, want a 400 naming %q", body, err, field)
			}
		}
	})
	t.Run("EscapedNames", func(t *testing.T) {
		var got sample
		if err := api.DecodeJSON([]byte(`{"n\u0061me":"x","price":{"\u0063ents":2,"currency":"US\u0044"}}`), &got); err != nil {
			t.Fatal(err)
		}
		if got.Name != "x" || got.Price != (money.Money{Cents: 2, Currency: "USD"}) {
			t.Errorf("escaped names: got %+v", got)
		}
	})
	t.Run("Nulls", func(t *testing.T) {
		var got sample
		if err := api.DecodeJSON([]byte(`{"at":null,"tags":null,"meta":null,"inner":null}`), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(sample{}, got); diff != "" {
			t.Errorf("nulls (-want +got):\n%s", diff)
		}
	})
	tests := []struct {
		name, body, field string
	}{
		{"Unknown", `{"nope":1}`, "nope"},
		{"UnknownNested", `{"inner":{"units":1,"x":2}}`, "inner.x"},
		{"Duplicate", `{"name":"a","name":"b"}`, "name"},
		{"DuplicateMapKey", `{"meta":{"k":"a","k":"b"}}`, "meta.k"},
		{"DuplicateInMoney", `{"cost":{"cents":1,"cents":2,"currency":"USD"}}`, "cost.cents"},
		{"StringForInt", `{"n":"1"}`, "n"},
		{"FloatForInt", `{"n":1.0}`, "n"},
		{"ExponentForInt", `{"n":1e3}`, "n"},
		{"BigInt", `{"n":9007199254740992}`, "n"},
		{"HugeInt", `{"n":123456789012345678901234567890}`, "n"},
		{"LeadingZero", `{"n":01}`, ""},
		{"IntForString", `{"name":5}`, "name"},
		{"NullForString", `{"name":null}`, "name"},
		{"NullForMoney", `{"price":null}`, "price"},
		{"NullForOptionalMoney", `{"cost":null}`, "cost"},
		{"StringForBool", `{"flag":"true"}`, "flag"},
		{"ObjectForArray", `{"tags":{}}`, "tags"},
		{"IntInArray", `{"tags":["a",1]}`, "tags[1]"},
		{"IntInMap", `{"meta":{"k":1}}`, "meta.k"},
		{"MoneyFloat", `{"inner":{"cost":{"cents":0.5,"currency":"USD"}}}`, "inner.cost.cents"},
		{"MoneyOverCeiling", `{"cost":{"cents":-9007199254740992,"currency":"USD"}}`, "cost.cents"},
		{"MoneyMissingCurrency", `{"cost":{"cents":1}}`, "cost.currency"},
		{"MoneyNotObject", `{"cost":12}`, "cost"},
		{"BadTime", `{"at":"yesterday"}`, "at"},
		{"BadTimeOneDigitHour", `{"at":"2026-01-02T3:04:05Z"}`, "at"},
		{"BadTimeZoneHour", `{"at":"2026-01-02T03:04:05+24:00"}`, "at"},
		{"Trailing", `{"name":"a"}x`, ""},
		{"TwoValues", `{} {}`, ""},
		{"Empty", ``, ""},
		{"TruncatedTop", `{"name":"a"`, ""},
		{"TruncatedNested", `{"inner":{"units":`, "inner.units"},
		{"TruncatedArray", `{"tags":["a",`, "tags[1]"},
		{"TopArray", `[]`, ""},
		{"TopString", `"x"`, ""},
		{"BadSyntax", `{"name" "a"}`, "name"},
		{"InvalidUTF8", "{\"name\":\"a\xffb\"}", "name"},
		{"ControlInString", "{\"name\":\"a\x01b\"}", "name"},
		{"BadEscape", `{"name":"a\qb"}`, "name"},
		{"MissingColon", `{"name","a"}`, "name"},
		{"MissingComma", `{"name":"a" "n":1}`, ""},
		{"BadLiteral", `{"flag":tru}`, "flag"},
		{"TrailingComma", `{"name":"a",}`, ""},
		{"BadNumber", `{"n":-}`, "n"},
		{"TopNull", `null`, ""},
		{"TopMalformedNull", `nul`, ""},
		{"NullForInt", `{"n":null}`, "n"},
		{"NullForBool", `{"flag":null}`, "flag"},
		{"NullInArray", `{"tags":[null]}`, "tags[0]"},
		{"NullInMap", `{"meta":{"k":null}}`, "meta.k"},
		{"BadEscapeInArray", `{"tags":["a\q"]}`, "tags[0]"},
		{"MissingCommaInArray", `{"tags":["a" "b"]}`, "tags[1]"},
		{"TruncatedEmptyArray", `{"tags":[`, "tags[0]"},
		{"NumericMapKey", `{"meta":{"1":2}}`, "meta.1"},
		{"MoneyUnknownMember", `{"inner":{"cost":{"cents":1,"currency":"USD","x":1}}}`, "inner.cost.x"},
		{"MoneyNullCents", `{"cost":{"cents":null,"currency":"USD"}}`, "cost.cents"},
		{"MoneyStringCents", `{"cost":{"cents":"1","currency":"USD"}}`, "cost.cents"},
		{"MoneyNullCurrency", `{"price":{"cents":1,"currency":null}}`, "price.currency"},
		{"MoneyLowerCurrency", `{"price":{"cents":1,"currency":"usd"}}`, "price.currency"},
		{"MoneyMissingCents", `{"price":{"currency":"USD"}}`, "price.cents"},
		{"MoneyArray", `{"price":[1,"USD"]}`, "price"},
		{"MoneyTruncated", `{"price":{"cents":1,`, "price"},
		{"UnknownEscapedName", `{"a/b~c":1}`, "a/b~c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got sample
			err := api.DecodeJSON([]byte(tt.body), &got)
			var ae *api.Error
			if !errors.As(err, &ae) {
				t.Fatalf("DecodeJSON(%s) = %v, want *api.Error", tt.body, err)
			}
			if ae.Status != http.StatusBadRequest || len(ae.Errors) != 1 || ae.Errors[0].Field != tt.field {
				t.Errorf("DecodeJSON(%s): status %d errors %+v, want 400 naming %q", tt.body, ae.Status, ae.Errors, tt.field)
			}
		})
	}
}

// FuzzDecodeJSON: whatever the body, the decoder answers a 4xx problem
// naming a field, or succeeds; it never panics. The seed corpus runs in
// every normal test run.
func FuzzDecodeJSON(f *testing.F) {
	seeds := []string{
		`{"agentId":"a","service":"s","tool":"t","idempotencyKey":"k","cost":{"cents":1,"currency":"USD"},"units":2}`,
		`{"agentId":"a","amount":{"cents":100,"currency":"USD"},"provider":"manual","grant":{"type":"quota","scope":{"service":"s","tools":["x"]},"limit":5,"period":"day","expiresAt":"2030-01-01T00:00:00Z"}}`,
		`{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k","maxCost":{"cents":5,"currency":"USD"},"maxUnits":1,"ttlSeconds":60}`,
		`{"agentId":"agent-a","cost":{"cents":1,"currency":"USD"},"units":0}`,
		`{"agentId":"agent-a"}`,
		`{"cost":{"cents":1,"currency":"USD"},"units":1}`,
		`{"ttlSeconds":86401}`,
		`{"units":-1}`,
		`{"cost":{"cents":1.5,"currency":"USD"}}`,
		`{"cost":{"cents":9007199254740992,"currency":"USD"}}`,
		`{"units":"1"}`,
		`{"agentId":`,
		`{"grant":{"scope":{"tools":[1]}}}`,
		`{"type":"credits","scope":{"service":"s"},"balance":{"cents":100,"currency":"USD"},"limits":{"maxPerCall":{"cents":5,"currency":"USD"},"spendLimit":{"period":"day","max":{"cents":50,"currency":"USD"}}},"alerts":[{"percent":10},{"amount":{"cents":5,"currency":"USD"}}]}`,
		`{"type":"quota","scope":{"service":"s"},"limit":5,"period":"day","limits":{"maxUnitsPerCall":2,"spendLimit":{"period":"hour","maxUnits":3}},"alerts":[{"units":-1}]}`,
		`{"metadata":{"a":"b","a":"c"}}`,
		`{"x":1}`,
		`[]`, `null`, ``, `{}}`, `{"agentId":"a"} trailing`,
		strings.Repeat(`{"grant":`, 50),
		`{"agentId":"` + strings.Repeat("a", 1000) + `"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	base := newEnv(f)
	base.grantCredits(agentA, 1000)
	var held struct{ Hold struct{ ID string } }
	base.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: base.keys.Host, Body: authorizeBody(agentA, "fuzz-hold", 5)}).decode(f, &held)
	var used struct{ Consumption struct{ ID string } }
	base.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: base.keys.Host, Body: consumeBody(agentA, "fuzz-used", 5)}).decode(f, &used)
	paths := []string{"/v1/consume", "/v1/payments", "/v1/accounts/a/entitlements", "/v1/authorize",
		"/v1/holds/" + held.Hold.ID + "/capture", "/v1/holds/" + held.Hold.ID + "/release", "/v1/consumptions/" + used.Consumption.ID + "/refund"}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := base.with(t)
		e.noSpec = true // the spec check is slow; TestOpenAPI_Responses covers these answers
		for _, path := range paths {
			key := e.keys.Admin
			if path == "/v1/consume" {
				key = e.keys.Host
			}
			res := e.do(req{Method: "POST", Path: path, Key: key, Body: body,
				Header: map[string]string{"Idempotency-Key": "fuzz"}})
			switch {
			case res.Status >= 200 && res.Status < 300:
				continue
			case res.Status == 402 || res.Status == 404 || res.Status == 409 || res.Status == 422:
				continue // a well-formed request the store refused (404: another agent's hold)
			case res.Status >= 500:
				t.Fatalf("%s %q: status %d body %s", path, body, res.Status, res.Body)
			}
			p := res.problem(t)
			if len(p.Errors) == 0 || p.Type == "" || p.Title == "" || p.Detail == "" {
				t.Fatalf("%s %q: problem %+v lacks a field error", path, body, p)
			}
		}
		var s sample
		if err := api.DecodeJSON(body, &s); err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 || len(ae.Errors) != 1 {
				t.Fatalf("DecodeJSON(%q) = %v", body, err)
			}
			return
		}
		// Whatever the strict decoder accepts, encoding/json reads the same way.
		var ref sample
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("DecodeJSON accepted %q, encoding/json refuses it: %v", body, err)
		}
		if diff := cmp.Diff(ref, s); diff != "" {
			t.Fatalf("DecodeJSON(%q) differs from encoding/json (-json +strict):\n%s", body, diff)
		}
	})
}

func TestQuotaLimitTag(t *testing.T) {
	e := newEnv(t)
	body := func(limit int64) map[string]any {
		return map[string]any{"type": "quota", "scope": map[string]any{"service": "s"}, "limit": limit, "period": "day"}
	}
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/a/entitlements", Key: e.keys.Admin, Body: body(api.MaxQuotaLimit)})
	p := e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/accounts/a/entitlements", Key: e.keys.Admin, Body: body(api.MaxQuotaLimit + 1)}).problem(t)
	if p.Errors[0].Field != "limit" {
		t.Errorf("errors = %+v, want limit", p.Errors)
	}
}
