package api_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/jsonlog"
	"github.com/stipend-mcp/stipend/money"
)

// BenchmarkConsumeHandler measures the CPU cost of one POST /v1/consume
// through the whole handler chain (auth, decode, store, encode, access log,
// metrics) without the network, next to a bare echo handler answering the
// same JSON. The over-HTTP comparison is api/internal/httpbench.
func BenchmarkConsumeHandler(b *testing.B) {
	e := newEnv(b, func(c *api.Config) { // cmd/stipend's logger
		c.Logger = slog.New(jsonlog.New(io.Discard, jsonlog.CloudLogging(slog.LevelInfo)))
	})
	balance := money.Money{Cents: 1 << 50, Currency: "USD"}
	if _, err := e.store.CreateEntitlement(context.Background(), entitlement.Entitlement{
		ID: "bench", AgentID: agentA, Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"},
		Status: entitlement.StatusActive, CreatedAt: e.clock.Now(), Credits: entitlement.Credits{Balance: balance, Granted: balance},
	}); err != nil {
		b.Fatal(err)
	}
	answer := e.must(200, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "warm", 1)}).Body

	bare := echo.New()
	bare.POST("/v1/consume", func(c echo.Context) error { return c.JSONBlob(http.StatusOK, answer) })

	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		body := make([]byte, 0, 256)
		for i := 0; b.Loop(); i++ {
			body = append(body[:0], `{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k-`...)
			body = strconv.AppendInt(body, int64(i), 10)
			body = append(body, `","cost":{"cents":1,"currency":"USD"}}`...)
			// Each consumption at its own instant, as with a real clock: the
			// memory store keeps an agent's consumptions sorted by instant.
			e.clock.Advance(time.Microsecond)
			r := httptest.NewRequest(http.MethodPost, "/v1/consume", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+e.keys.Host)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("Stipend", func(b *testing.B) { run(b, e.srv.Handler()) })
	b.Run("Bare", func(b *testing.B) { run(b, bare) })
}

// BenchmarkDecodeJSON measures the strict decode of request bodies alone
// (no validator tags): the consume body of every paid call, and a payment
// with a grant (nested objects, an instant).
func BenchmarkDecodeJSON(b *testing.B) {
	bodies := []struct {
		name string
		body string
		dst  func() any
	}{
		{"Consume", `{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k-12345","cost":{"cents":1,"currency":"USD"}}`,
			func() any { return new(api.ConsumeBody) }},
		{"Payment", `{"agentId":"agent-a","amount":{"cents":1500,"currency":"USD"},"provider":"manual","grant":{"type":"quota",` +
			`"scope":{"service":"search","tools":["web","news"]},"limit":100,"period":"day","expiresAt":"2027-01-01T00:00:00Z"}}`,
			func() any { return new(api.PaymentBody) }},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			body := []byte(bb.body)
			b.ReportAllocs()
			for b.Loop() {
				if err := api.DecodeJSON(body, bb.dst()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
