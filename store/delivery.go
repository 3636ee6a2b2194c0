package store

import (
	"context"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/event"
)

// DeliveryStatus is where a delivery is in its state machine:
//
//	pending → in_flight → succeeded
//	                    → failed  (no retry planned: the endpoint is gone)
//	                    → dead    (the retry schedule is spent)
//	                    → pending (a failed attempt with a retry: later ScheduledAt)
//	in_flight (claim older than the claim TTL) → in_flight (claimed again)
//	failed | dead → pending (RetryDelivery, by hand)
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryInFlight  DeliveryStatus = "in_flight"
	DeliverySucceeded DeliveryStatus = "succeeded"
	DeliveryFailed    DeliveryStatus = "failed"
	DeliveryDead      DeliveryStatus = "dead"
)

// Valid reports whether s is a known status.
func (s DeliveryStatus) Valid() bool {
	return slices.Contains([]DeliveryStatus{DeliveryPending, DeliveryInFlight, DeliverySucceeded, DeliveryFailed, DeliveryDead}, s)
}

// Delivery is one event on its way to one endpoint.
type Delivery struct {
	// ID is also the request's webhook-id, so it is the same on every attempt.
	ID string `json:"id"`
	// Key is the caller's idempotency key (the fan-out uses event ID and
	// endpoint ID); it is stored, never shown.
	Key        string     `json:"-"`
	EndpointID string     `json:"endpointId"`
	EventID    string     `json:"eventId"`
	EventType  event.Type `json:"eventType"`
	// Payload is the request body, stored and sent as these exact bytes.
	Payload []byte         `json:"-"`
	Status  DeliveryStatus `json:"status"`
	// Attempts counts claims: every claim is one attempt to send, whether or
	// not its sender lived to report the result.
	Attempts int `json:"attempts"`
	// ScheduledAt is when the delivery is next due (pending).
	ScheduledAt time.Time `json:"scheduledAt"`
	// ClaimedBy, ClaimedAt and ClaimToken describe the current claim (in_flight).
	ClaimedBy  string     `json:"claimedBy,omitempty"`
	ClaimedAt  *time.Time `json:"claimedAt,omitempty"`
	ClaimToken string     `json:"-"`
	// LastStatusCode and LastError describe the last finished attempt.
	LastStatusCode int        `json:"lastStatusCode,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	LastAttemptAt  *time.Time `json:"lastAttemptAt,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// DeliveryFilter narrows ListDeliveries. Zero fields do not filter.
type DeliveryFilter struct {
	Status    DeliveryStatus
	EventType event.Type
}

// AttemptResult is what a sender reports to FinishDelivery.
type AttemptResult struct {
	// Status is DeliverySucceeded, DeliveryFailed or DeliveryDead.
	Status DeliveryStatus
	// RetryAt, with DeliveryFailed, is when to try again: the delivery goes
	// back to pending with ScheduledAt = RetryAt. Zero leaves it failed until
	// RetryDelivery.
	RetryAt time.Time
	// StatusCode is the receiver's HTTP status (0 when none came back).
	StatusCode int
	// Error says what went wrong, for operators (bounded by the store).
	Error string
	// Deferred, with DeliveryFailed and a RetryAt, says the delivery was
	// not sent at all: the dispatcher held it back (its endpoint is cooling
	// down after requests that got no answer). The claim's attempt is given
	// back (Attempts − 1), the delivery goes back to pending at RetryAt, and
	// the last real attempt's status and error are kept.
	Deferred bool
}

// MaxErrorLength bounds the stored AttemptResult.Error; a longer one is cut.
const MaxErrorLength = 1024

// MaxPayloadBytes bounds Delivery.Payload; EnqueueDelivery refuses a larger
// one as Invalid.
const MaxPayloadBytes = 512 << 10

// DeliveryStore is the durable state of outbound webhooks (endpoints and
// deliveries) and of inbound provider event deduplication. Many dispatcher
// processes may share one store; every guarantee below holds across them.
type DeliveryStore interface {
	// CreateEndpoint stores e (which must pass e.Validate: an Invalid error
	// naming the field otherwise), with CreatedAt set by the store,
	// Disabled false and no previous secret. Conflict if the ID exists.
	// Atomic: of concurrent calls with one ID, exactly one creates the
	// endpoint.
	CreateEndpoint(ctx context.Context, e Endpoint) (Endpoint, error)
	// GetEndpoint returns the endpoint, secrets included, or ErrNotFound.
	GetEndpoint(ctx context.Context, id string) (Endpoint, error)
	// ListEndpoints lists endpoints oldest first (by CreatedAt, then ID).
	ListEndpoints(ctx context.Context, p Page) (items []Endpoint, nextCursor string, err error)
	// DisableEndpoint marks the endpoint disabled with reason, atomically;
	// disabling a disabled endpoint returns it unchanged (the first reason
	// stays). ErrNotFound if absent. Its pending deliveries stay; senders
	// finish them as failed.
	DisableEndpoint(ctx context.Context, id, reason string) (Endpoint, error)
	// UpdateEndpoint applies u to the endpoint and returns the result, which
	// must pass Validate (an Invalid error naming the field otherwise, and
	// nothing changes). ErrNotFound if absent. ID, secrets and CreatedAt
	// never change here. The read and the write are one atomic step, so
	// concurrent updates of different fields all take effect. Deliveries
	// already enqueued keep their payload; each attempt goes to the URL the
	// endpoint has when it is made.
	UpdateEndpoint(ctx context.Context, id string, u EndpointUpdate) (Endpoint, error)
	// RotateEndpointSecret makes secret (ValidSecret: Invalid "secret: …"
	// otherwise) the endpoint's Secret and keeps the one it replaces as
	// PreviousSecret until graceUntil, atomically. A zero graceUntil drops
	// the replaced secret at once (no PreviousSecret). A secret that was
	// still PreviousSecret from an earlier rotation is dropped: an endpoint
	// holds at most two secrets. ErrNotFound if absent.
	RotateEndpointSecret(ctx context.Context, id, secret string, graceUntil time.Time) (Endpoint, error)
	// DeleteEndpoint deletes the endpoint, atomically; ErrNotFound if absent
	// (so a repeated delete is NotFound). Its deliveries stay, as the record
	// of what was sent: the fan-out enqueues no new ones, and a sender
	// finishes each one left pending as failed, without a request, when it
	// next comes due (GetEndpoint answers NotFound).
	DeleteEndpoint(ctx context.Context, id string) error

	// EnqueueDelivery stores d as pending (Attempts 0, ScheduledAt
	// d.ScheduledAt or now if zero) unless a delivery with d.Key exists: then
	// that one is returned with created false when its EndpointID and
	// EventID equal d's, and ErrConflict otherwise. d.ID, d.Key, d.EndpointID
	// and d.EventID are required and d.Payload is at most MaxPayloadBytes
	// (Invalid otherwise); a new key with an existing d.ID is a Conflict.
	// Atomic: concurrent calls with one key store exactly one delivery, and
	// every call returns it.
	EnqueueDelivery(ctx context.Context, d Delivery) (stored Delivery, created bool, err error)
	// GetDelivery returns the delivery, or ErrNotFound.
	GetDelivery(ctx context.Context, id string) (Delivery, error)
	// ListDeliveries lists deliveries oldest first (by CreatedAt, then ID).
	ListDeliveries(ctx context.Context, f DeliveryFilter, p Page) (items []Delivery, nextCursor string, err error)

	// ClaimDueDeliveries claims up to limit deliveries for workerID and
	// returns them in_flight, each with Attempts incremented, ClaimedBy,
	// ClaimedAt = now and a fresh ClaimToken. Candidates are pending
	// deliveries with ScheduledAt ≤ now, and in_flight deliveries whose
	// ClaimedAt is at or before now − claimTTL (their sender is presumed dead).
	// Each candidate is claimed in its own small atomic step, so a row
	// another worker took is skipped without failing the others. Within one
	// claim window, a delivery is claimed by exactly one caller, however many
	// call at once. It may return fewer than limit (even none) while due
	// rows remain; callers simply call again. A limit ≤ 0 claims nothing. A
	// failed call may have claimed some deliveries; those claims expire after
	// claimTTL like any other.
	//
	// Clocks: now is the caller's clock, and it alone decides what is due,
	// ClaimedAt, and whether a claim has expired; the store's own clock only
	// stamps UpdatedAt. So between instances a claim is taken over claimTTL
	// after it was made as the claiming instance's clock reads it: an
	// instance whose clock runs ahead by s takes an in_flight delivery over
	// s early, one behind s late. Safety never rests on the clocks: a taken
	// over claim's FinishDelivery is refused (its token is stale), so a skew
	// beyond the TTL's margin can make a delivery be sent twice (receivers
	// deduplicate on its webhook-id), never lose one. The dispatcher's
	// default TTL (twice the attempt timeout plus 30 s) leaves that margin.
	ClaimDueDeliveries(ctx context.Context, now time.Time, limit int, claimTTL time.Duration, workerID string) ([]Delivery, error)
	// FinishDelivery records the result of the attempt made under claimToken:
	// succeeded, dead, failed (terminal) or back to pending at r.RetryAt. It
	// returns the stored delivery, ErrNotFound if absent, or ErrConflict if the
	// delivery is no longer in_flight under that token (the claim expired and
	// another worker owns it now); then nothing changes. r must be a result
	// (see AttemptResult: Invalid otherwise); its Error is cut to
	// MaxErrorLength. The check and the change are one atomic step.
	FinishDelivery(ctx context.Context, id, claimToken string, r AttemptResult) (Delivery, error)
	// RetryDelivery moves a failed or dead delivery back to pending, due now,
	// keeping its Attempts, atomically. Conflict from any other status;
	// ErrNotFound if absent.
	RetryDelivery(ctx context.Context, id string) (Delivery, error)

	// RecordInboundEvent records that the provider event (source, eventID)
	// was received. It returns new true and now on the first call, and new
	// false with the first time on every later call; an empty source or
	// eventID is Invalid. Atomic: of concurrent calls, exactly one sees new
	// true. The records are the ones PaymentChange.Inbound writes.
	RecordInboundEvent(ctx context.Context, source, eventID string) (isNew bool, firstSeenAt time.Time, err error)
}
