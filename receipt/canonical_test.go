package receipt_test

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
)

// TestJCS_RFC8785Vectors checks the canonicaliser on RFC 8785's examples
// (testdata/rfc8785/NAME.input.json → NAME.output.json, byte for byte).
func TestJCS_RFC8785Vectors(t *testing.T) {
	inputs, err := filepath.Glob("testdata/rfc8785/*.input.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no test vectors in testdata/rfc8785 (err %v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			input := readFile(t, in)
			want := readFile(t, strings.TrimSuffix(in, ".input.json")+".output.json")
			got, err := jcs.Transform(input)
			if err != nil {
				t.Fatalf("jcs.Transform(%s): %v", in, err)
			}
			if string(got) != string(want) {
				t.Errorf("jcs.Transform(%s)\n got %s\nwant %s", in, got, want)
			}
		})
	}
}

// TestJCS_RFC8785Numbers checks number serialisation on RFC 8785 Appendix B.
func TestJCS_RFC8785Numbers(t *testing.T) {
	f, err := os.Open("testdata/rfc8785/numbers-appendix-b.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bits, want, _ := strings.Cut(line, ",")
		raw, err := hex.DecodeString(bits)
		if err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		v := math.Float64frombits(binary.BigEndian.Uint64(raw))
		got, err := jcs.NumberToJSON(v)
		switch {
		case want == "error" && err == nil:
			t.Errorf("jcs.NumberToJSON(0x%s) = %q, want an error", bits, got)
		case want != "error" && (err != nil || got != want):
			t.Errorf("jcs.NumberToJSON(0x%s) = %q, %v; want %q", bits, got, err, want)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("read %d vectors, want the whole Appendix B table", n)
	}
}

func TestCanonical(t *testing.T) {
	got, err := receipt.Canonical(sampleReceipt(t))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agentId":"agent-1","amount":{"cents":1500,"currency":"USD"},"grants":[{"balance":{"cents":1500,"currency":"USD"},` +
		`"entitlementId":"ent-1","scope":{"service":"search"},"type":"credits"},{"entitlementId":"ent-2","limit":100,"period":"day",` +
		`"scope":{"service":"search","tools":["web"]},"type":"quota"}],"id":"rcpt-1","issuedAt":"2026-11-30T10:00:00.123456Z",` +
		`"issuer":"https://stipend.example","kind":"payment","paymentId":"pay-1","version":1}`
	if string(got) != want {
		t.Errorf("Canonical(sample)\n got %s\nwant %s", got, want)
	}
}

func TestCanonical_NilGrantsIsEmptyArray(t *testing.T) {
	r := sampleReceipt(t)
	r.Grants = nil
	got, err := receipt.Canonical(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"grants":[]`) {
		t.Errorf("Canonical(nil grants) = %s, want \"grants\":[]", got)
	}
}

// TestCanonical_Ceiling: an amount past money.MaxCents would be rounded by
// the canonicaliser, so it must be refused before, naming the field.
func TestCanonical_Ceiling(t *testing.T) {
	over := money.MaxCents + 1
	tests := []struct {
		name      string
		edit      func(*receipt.Receipt)
		wantField string
	}{
		{"AmountOverCeiling", func(r *receipt.Receipt) { r.Amount.Cents = over }, "amount.cents"},
		{"AmountUnderNegativeCeiling", func(r *receipt.Receipt) { r.Amount.Cents = -over }, "amount.cents"},
		{"AmountMaxInt64", func(r *receipt.Receipt) { r.Amount.Cents = math.MaxInt64 }, "amount.cents"},
		{"GrantBalanceOverCeiling", func(r *receipt.Receipt) { r.Grants[0].Balance.Cents = over }, "grants[0].balance.cents"},
		{"GrantLimitOverCeiling", func(r *receipt.Receipt) { r.Grants[1].Limit = over }, "grants[1].limit"},
		{"BadCurrency", func(r *receipt.Receipt) { r.Amount.Currency = "usd" }, "amount.currency"},
		{"MissingID", func(r *receipt.Receipt) { r.ID = "" }, "id"},
		{"WrongVersion", func(r *receipt.Receipt) { r.Version = 2 }, "version"},
		{"UnknownKind", func(r *receipt.Receipt) { r.Kind = "gift" }, "kind"},
		{"MissingIssuedAt", func(r *receipt.Receipt) { r.IssuedAt = time.Time{} }, "issuedAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleReceipt(t)
			tt.edit(&r)
			got, err := receipt.Canonical(r)
			if err == nil {
				t.Fatalf("Canonical = %s, want an error naming %s", got, tt.wantField)
			}
			if !errors.Is(err, receipt.ErrInvalid) {
				t.Errorf("Canonical error %v, want one matching ErrInvalid", err)
			}
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("Canonical error %v, want field %s", err, tt.wantField)
			}
		})
	}
	t.Run("AtCeiling", func(t *testing.T) {
		r := sampleReceipt(t)
		r.Amount.Cents = money.MaxCents
		got, err := receipt.Canonical(r)
		if err != nil {
			t.Fatalf("Canonical(MaxCents): %v", err)
		}
		if !strings.Contains(string(got), `"cents":9007199254740991`) {
			t.Errorf("Canonical(MaxCents) = %s, want cents 9007199254740991 exactly", got)
		}
	})
	t.Run("OverCeilingIsOutOfRange", func(t *testing.T) {
		r := sampleReceipt(t)
		r.Amount.Cents = over
		if _, err := receipt.Canonical(r); !errors.Is(err, money.ErrOutOfRange) {
			t.Errorf("Canonical error %v, want money.ErrOutOfRange", err)
		}
	})
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
