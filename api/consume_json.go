package api

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// The consume answer is written by hand: it is the answer of the hot path,
// and encoding/json's reflection was its largest single cost. A test keeps
// it byte-for-byte equal to json.Marshal(consumeAnswer{...}).

var answerPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// handEncodes reports whether appendConsumeAnswer can encode c: every fresh
// consumption, not a replayed one refunded since (its refund) or a
// capture's (its holdId). encoding/json writes those: they are rare and off
// the hot path.
func handEncodes(c *entitlement.Consumption) bool { return c.Refund == nil && c.HoldID == "" }

// appendConsumeAnswer appends {"result":…,"consumption":{…}} to b, for a
// consumption that handEncodes.
func appendConsumeAnswer(b []byte, result store.Outcome, c *entitlement.Consumption) []byte {
	b = append(b, `{"result":`...)
	b = appendString(b, string(result))
	b = append(b, `,"consumption":{"id":`...)
	b = appendString(b, c.ID)
	b = append(b, `,"agentId":`...)
	b = appendString(b, c.AgentID)
	b = append(b, `,"entitlementId":`...)
	b = appendString(b, c.EntitlementID)
	b = append(b, `,"entitlementType":`...)
	b = appendString(b, string(c.EntitlementType))
	if c.WalletID != "" {
		b = append(b, `,"walletId":`...)
		b = appendString(b, c.WalletID)
	}
	b = append(b, `,"service":`...)
	b = appendString(b, c.Service)
	b = append(b, `,"tool":`...)
	b = appendString(b, c.Tool)
	b = append(b, `,"idempotencyKey":`...)
	b = appendString(b, c.IdempotencyKey)
	if !c.Cost.IsZero() {
		b = append(b, `,"cost":`...)
		b = appendMoney(b, c.Cost)
	}
	b = append(b, `,"units":`...)
	b = strconv.AppendInt(b, c.Units, 10)
	b = append(b, `,"occurredAt":"`...)
	b = c.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if !c.BalanceAfter.IsZero() {
		b = append(b, `,"balanceAfter":`...)
		b = appendMoney(b, c.BalanceAfter)
	}
	if c.RemainingAfter != nil {
		b = append(b, `,"remainingAfter":`...)
		b = strconv.AppendInt(b, *c.RemainingAfter, 10)
	}
	return append(b, "}}"...)
}

func appendMoney(b []byte, m money.Money) []byte {
	b = append(b, `{"cents":`...)
	b = strconv.AppendInt(b, m.Cents, 10)
	b = append(b, `,"currency":`...)
	b = appendString(b, m.Currency)
	return append(b, '}')
}

// appendString appends s as a JSON string, escaped as encoding/json does.
// Plain printable ASCII (what IDs and names are) is copied as is; anything
// else goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
