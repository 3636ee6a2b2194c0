package fsledger

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
)

// row is a ledger document. Field names are part of the deployed contract:
// the TTL policy names expireAt, which is set only on completed rows, so an
// in-progress row is never deleted by TTL.
type row struct {
	Route       string          `firestore:"route"`
	Fingerprint string          `firestore:"fingerprint"`
	State       string          `firestore:"state"`
	OperationID string          `firestore:"operationId"`
	TraceID     string          `firestore:"traceId"`
	CreatedAt   time.Time       `firestore:"createdAt"`
	CompletedAt time.Time       `firestore:"completedAt,omitempty"`
	ExpireAt    time.Time       `firestore:"expireAt,omitempty"`
	Response    *storedResponse `firestore:"response,omitempty"`
	// Attempt is a random nonce of the Reserve call that created the row:
	// the reservation's token (idempotency.Record.Token).
	Attempt string `firestore:"attempt"`
	// Fenced and WrittenAt: see idempotency.Record. WrittenAt is written by
	// the store's transaction (Fence.Mark), never by the ledger.
	Fenced    bool      `firestore:"fenced,omitempty"`
	WrittenAt time.Time `firestore:"writtenAt,omitempty"`
}

// storedResponse is the replay result inside a completed row.
type storedResponse struct {
	Status int64               `firestore:"status"`
	Header map[string][]string `firestore:"header,omitempty"`
	Body   []byte              `firestore:"body"`
}

func newRow(a idempotency.Attempt, now time.Time, nonce string) row {
	return row{
		Route: a.Route, Fingerprint: a.Fingerprint, State: string(idempotency.StateInProgress),
		OperationID: a.OperationID, TraceID: a.TraceID, CreatedAt: now, Attempt: nonce, Fenced: a.Fenced,
	}
}

// newNonce returns 128 random bits in hex.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func toStored(r idempotency.Response) *storedResponse {
	c := r.Clone()
	return &storedResponse{Status: int64(c.Status), Header: c.Header, Body: c.Body}
}

// record converts a row to the domain type.
func (r row) record(id string, updateTime time.Time) idempotency.Record {
	rec := idempotency.Record{
		ID: id, Route: r.Route, Fingerprint: r.Fingerprint, State: idempotency.State(r.State),
		OperationID: r.OperationID, TraceID: r.TraceID, Fenced: r.Fenced,
		CreatedAt: r.CreatedAt.UTC(), UpdateTime: updateTime, Token: r.Attempt,
	}
	if !r.WrittenAt.IsZero() {
		rec.WrittenAt = r.WrittenAt.UTC()
	}
	if !r.CompletedAt.IsZero() {
		rec.CompletedAt = r.CompletedAt.UTC()
	}
	if !r.ExpireAt.IsZero() {
		rec.ExpireAt = r.ExpireAt.UTC()
	}
	if r.Response != nil {
		rec.Response = &idempotency.Response{Status: int(r.Response.Status), Header: r.Response.Header, Body: r.Response.Body}
	}
	return rec
}

// decode reads a ledger document strictly. An unknown state or a completed
// row without a response is corrupt, and the error says which document.
func decode(snap *firestore.DocumentSnapshot) (idempotency.Record, error) {
	var r row
	if err := snap.DataTo(&r); err != nil {
		return idempotency.Record{}, fault.Wrap(fault.CodeInternal, err, "corrupt document %s", snap.Ref.ID)
	}
	rec := r.record(snap.Ref.ID, snap.UpdateTime)
	switch rec.State {
	case idempotency.StateInProgress:
	case idempotency.StateCompleted:
		if rec.Response == nil || rec.ExpireAt.IsZero() {
			return idempotency.Record{}, fault.Errorf(fault.CodeInternal, "corrupt document %s: completed without response or expireAt", snap.Ref.ID)
		}
	default:
		return idempotency.Record{}, fault.Errorf(fault.CodeInternal, "corrupt document %s: state %q", snap.Ref.ID, r.State)
	}
	return rec, nil
}
