package idempotency_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
)

func TestParseKey(t *testing.T) {
	max := strings.Repeat("k", idempotency.MaxKeyLen)
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr problem.Kind
	}{
		{"Bare", []string{"k-1"}, "k-1", ""},
		{"Quoted", []string{`"k-1"`}, "k-1", ""},
		{"Spaces", []string{`  "k 1"	`}, "k 1", ""},
		{"AtTheLimit", []string{max}, max, ""},
		{"QuotedAtTheLimit", []string{`"` + max + `"`}, max, ""},
		{"Missing", nil, "", problem.IdempotencyKeyMissing},
		{"Empty", []string{""}, "", problem.IdempotencyKeyInvalid},
		{"EmptyQuoted", []string{`""`}, "", problem.IdempotencyKeyInvalid},
		{"TooLong", []string{max + "k"}, "", problem.IdempotencyKeyInvalid},
		{"QuoteInside", []string{`k"1`}, "", problem.IdempotencyKeyInvalid},
		{"OpenQuote", []string{`"k1`}, "", problem.IdempotencyKeyInvalid},
		{"EscapedQuote", []string{`"k\"1"`}, "", problem.IdempotencyKeyInvalid},
		{"Backslash", []string{`k\1`}, "", problem.IdempotencyKeyInvalid},
		{"Control", []string{"k\x01"}, "", problem.IdempotencyKeyInvalid},
		{"NonASCII", []string{"clé"}, "", problem.IdempotencyKeyInvalid},
		{"Twice", []string{"k1", "k1"}, "", problem.IdempotencyKeyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add(idempotency.HeaderKey, v)
			}
			got, err := idempotency.ParseKey(h)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("ParseKey(%q) = %q, %v; want %q", tt.values, got, err, tt.want)
				}
				return
			}
			var ke *idempotency.KeyError
			if !errors.As(err, &ke) || ke.Kind != tt.wantErr {
				t.Fatalf("ParseKey(%q) = %q, %v; want a *KeyError of kind %s", tt.values, got, err, tt.wantErr)
			}
			p := ke.Problem()
			if p.Status != http.StatusBadRequest || p.Type != tt.wantErr.URI() || len(p.Errors) != 1 || p.Errors[0].Field != idempotency.HeaderKey {
				t.Errorf("Problem() = %+v, want a 400 %s naming %s", p, tt.wantErr, idempotency.HeaderKey)
			}
		})
	}
}
