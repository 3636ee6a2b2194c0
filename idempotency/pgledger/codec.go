package pgledger

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
)

// columns are the columns scan reads, in its order.
const columns = `id, route, fingerprint, state, operation_id, trace_id, created_at, completed_at, expire_at,
	response_status, response_header, response_body, attempt, updated_at, fenced, written_at`

// scan reads one ledger row strictly, returning the record and the nonce
// of the Reserve call that created it (also its Token). An unknown state,
// or a completed row without its response, is corrupt, and the error names
// the row.
func scan(row pgx.Row) (idempotency.Record, string, error) {
	var (
		rec                                   idempotency.Record
		state, nonce                          string
		completed, expire, createdAt, written *time.Time
		updated                               time.Time
		status                                *int
		header                                []byte
		body                                  []byte
	)
	err := row.Scan(&rec.ID, &rec.Route, &rec.Fingerprint, &state, &rec.OperationID, &rec.TraceID, &createdAt,
		&completed, &expire, &status, &header, &body, &nonce, &updated, &rec.Fenced, &written)
	if err != nil {
		return idempotency.Record{}, "", err
	}
	rec.Token = nonce
	if written != nil {
		rec.WrittenAt = written.UTC()
	}
	corrupt := func(format string, args ...any) (idempotency.Record, string, error) {
		return idempotency.Record{}, "", fault.Errorf(fault.CodeInternal, "corrupt row idempotency_ledger/%s: "+format, append([]any{rec.ID}, args...)...)
	}
	if createdAt == nil {
		return corrupt("created_at missing")
	}
	rec.State = idempotency.State(state)
	rec.CreatedAt, rec.UpdateTime = createdAt.UTC(), updated.UTC()
	switch rec.State {
	case idempotency.StateInProgress:
	case idempotency.StateCompleted:
		if completed == nil || expire == nil || status == nil {
			return corrupt("completed without response or expire_at")
		}
		resp := idempotency.Response{Status: *status, Body: body}
		if header != nil {
			if err := json.Unmarshal(header, &resp.Header); err != nil {
				return corrupt("response_header: %v", err)
			}
		}
		rec.CompletedAt, rec.ExpireAt, rec.Response = completed.UTC(), expire.UTC(), &resp
	default:
		return corrupt("state %q", state)
	}
	return rec, nonce, nil
}

// headerArg encodes a response's headers for the jsonb column (NULL for none).
func headerArg(h map[string][]string) ([]byte, error) {
	if h == nil {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fault.Wrap(fault.CodeInternal, err, "encode response headers")
	}
	return b, nil
}
