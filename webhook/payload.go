package webhook

import (
	"encoding/json"
	"time"

	"github.com/stipend-mcp/stipend/event"
)

// message is the JSON body of an outbound webhook, in the Standard Webhooks
// shape: type, timestamp and data (plus Stipend's event id and agent).
type message struct {
	ID        string          `json:"id"`
	Type      event.Type      `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	AgentID   string          `json:"agentId,omitempty"`
	Data      json.RawMessage `json:"data"`
}

// Payload returns the request body that delivers e, with the event's Data
// as its "data" (compacted JSON). The body is computed once, at fan-out, and
// stored, so every attempt sends (and signs) the same bytes.
func Payload(e *event.Event) ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return json.Marshal(message{ID: e.ID, Type: e.Type, Timestamp: e.OccurredAt.UTC(), AgentID: e.AgentID, Data: data})
}
