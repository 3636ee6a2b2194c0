package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

var _ store.DeliveryStore = (*Store)(nil)

func (s *Store) endpoint(src source, id string) (store.Endpoint, error) {
	return load(src, s.doc(colEndpoints, id), endpointFrom, store.Errorf(store.CodeNotFound, "webhook endpoint %s", id))
}

func (s *Store) delivery(src source, id string) (store.Delivery, error) {
	return load(src, s.doc(colDeliveries, id), deliveryFrom, store.Errorf(store.CodeNotFound, "delivery %s", id))
}

// GetEndpoint implements store.DeliveryStore.
func (s *Store) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	return s.endpoint(direct{ctx, "get webhook endpoint"}, id)
}

// ListEndpoints implements store.DeliveryStore.
func (s *Store) ListEndpoints(ctx context.Context, p store.Page) ([]store.Endpoint, string, error) {
	return list(ctx, s.build(qEndpoints), listKey(qEndpoints), qEndpoints.Order, p, endpointFrom)
}

// DeleteEndpoint implements store.DeliveryStore: one delete with the
// precondition that the document exists, so an absent one is NotFound.
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	_, err := s.doc(colEndpoints, id).Delete(ctx, firestore.Exists)
	if isNotFound(err) {
		return store.Errorf(store.CodeNotFound, "webhook endpoint %s", id)
	}
	if err != nil {
		return fsfault.Write(err, "delete webhook endpoint")
	}
	return nil
}

// GetDelivery implements store.DeliveryStore.
func (s *Store) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	return s.delivery(direct{ctx, "get delivery"}, id)
}

// ListDeliveries implements store.DeliveryStore.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter, p store.Page) ([]store.Delivery, string, error) {
	var filters []filter
	if f.Status != "" {
		filters = append(filters, filter{"status", "==", string(f.Status)})
	}
	if f.EventType != "" {
		filters = append(filters, filter{"eventType", "==", string(f.EventType)})
	}
	q := s.build(qDeliveries, filters...)
	return list(ctx, q, listKey(qDeliveries, string(f.Status), string(f.EventType)), qDeliveries.Order, p, deliveryFrom)
}

// candidateFactor is how many candidates ClaimDueDeliveries reads per
// delivery asked for, so that rows lost to other workers can be replaced
// from the same read.
const candidateFactor = 3

// ClaimDueDeliveries implements store.DeliveryStore. Two head-of-queue
// queries gather candidates: in_flight rows whose claim expired, then pending
// rows that are due. Each candidate is claimed in its own atomic step: a
// single-document update with the precondition that the document is
// unchanged since the query read it (its update time). Of workers racing for
// a row exactly one update commits; the rest fail the precondition at once,
// take no lock and move on to the next candidate. That keeps claims cheap on
// the emulator, whose transactions lock pessimistically.
func (s *Store) ClaimDueDeliveries(ctx context.Context, now time.Time, limit int, claimTTL time.Duration, workerID string) ([]store.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	now = stamp(now)
	n := limit * candidateFactor
	// The two queries are independent: run them at once.
	var stale []*firestore.DocumentSnapshot
	var g errgroup.Group
	g.Go(func() (err error) {
		stale, err = direct{ctx, "find expired delivery claims"}.all(s.build(qStaleClaims,
			filter{"status", "==", string(store.DeliveryInFlight)}).Where("claimedAt", "<=", now.Add(-claimTTL)).Limit(n))
		return err
	})
	due, err := direct{ctx, "find due deliveries"}.all(s.build(qDueDeliveries,
		filter{"status", "==", string(store.DeliveryPending)}).Where("scheduledAt", "<=", now).Limit(n))
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	var out []store.Delivery
	for _, snap := range append(stale, due...) {
		if len(out) == limit {
			break
		}
		d, ok, err := s.claimOne(ctx, snap, now, workerID)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// claimOne claims the delivery read as snap, unless it changed since.
func (s *Store) claimOne(ctx context.Context, snap *firestore.DocumentSnapshot, now time.Time, workerID string) (store.Delivery, bool, error) {
	d, err := deliveryFrom(snap)
	if err != nil {
		return store.Delivery{}, false, err
	}
	d.Status, d.Attempts = store.DeliveryInFlight, d.Attempts+1
	d.ClaimedBy, d.ClaimedAt, d.ClaimToken = workerID, &now, uuid.NewString()
	d.UpdatedAt = s.clock()
	_, err = snap.Ref.Update(ctx, []firestore.Update{
		{Path: "status", Value: string(d.Status)},
		{Path: "attempts", Value: int64(d.Attempts)},
		{Path: "claimedBy", Value: d.ClaimedBy},
		{Path: "claimedAt", Value: now},
		{Path: "claimToken", Value: d.ClaimToken},
		{Path: "updatedAt", Value: d.UpdatedAt},
	}, firestore.LastUpdateTime(snap.UpdateTime))
	switch status.Code(err) {
	case codes.OK:
		return d, true, nil
	case codes.FailedPrecondition, codes.NotFound, codes.Aborted:
		// Another worker claimed (or finished) it first.
		return store.Delivery{}, false, nil
	}
	return store.Delivery{}, false, fsfault.Write(err, "claim delivery")
}

// RecordInboundEvent implements store.DeliveryStore. The marker is created
// with a plain Create, which fails with AlreadyExists for every caller but
// the first: no transaction and no lock, so a burst of redeliveries of one
// event does not queue on the emulator's (or production's) locks. A later
// caller reads the first-seen time from the existing marker.
func (s *Store) RecordInboundEvent(ctx context.Context, source, eventID string) (bool, time.Time, error) {
	if source == "" || eventID == "" {
		return false, time.Time{}, store.Errorf(store.CodeInvalid, "source and eventId: required")
	}
	ref := s.col(colInbound).Doc(unit.InboundKey(source, eventID))
	now := s.clock()
	_, err := ref.Create(ctx, inboundDoc(source, eventID, now))
	if err == nil {
		return true, now, nil
	}
	if status.Code(err) != codes.AlreadyExists {
		return false, time.Time{}, fsfault.Write(err, "record inbound event")
	}
	snap, err := ref.Get(ctx)
	if err != nil {
		return false, time.Time{}, fsfault.Read(err, "read inbound event")
	}
	f := read(snap)
	first := f.instant("firstSeenAt")
	return false, first, f.err
}

func stampOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return stamp(t)
}
