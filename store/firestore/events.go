package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// enqueue writes an outbox event inside tx; data is delivered as its JSON.
func (s *Store) enqueue(tx *firestore.Transaction, typ event.Type, agentID string, now time.Time, data any) error {
	evs, err := unit.Events(now, unit.Pending{Type: typ, AgentID: agentID, Data: data})
	if err != nil {
		return err
	}
	return tx.Create(s.col(colEvents).Doc(evs[0].ID), eventDoc(&evs[0]))
}

// PendingEvents implements store.EntitlementStore.
func (s *Store) PendingEvents(ctx context.Context, limit int) ([]event.Event, error) {
	if limit <= 0 {
		return nil, nil
	}
	snaps, err := s.build(qPendingEvents, filter{"dispatched", "==", false}).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fsfault.Read(err, "pending events")
	}
	out := make([]event.Event, 0, len(snaps))
	for _, snap := range snaps {
		e, err := eventFrom(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// markChunk bounds the events marked in one transaction (500 writes per commit).
const markChunk = 400

// MarkEventsDispatched implements store.EntitlementStore.
func (s *Store) MarkEventsDispatched(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), markChunk)
		refs := make([]*firestore.DocumentRef, 0, n)
		for _, id := range ids[:n] {
			if id != "" {
				refs = append(refs, s.col(colEvents).Doc(docID(id)))
			}
		}
		ids = ids[n:]
		if len(refs) == 0 {
			continue
		}
		err := s.run(ctx, "mark events dispatched", func(ctx context.Context, tx *firestore.Transaction) error {
			snaps, err := tx.GetAll(refs)
			if err != nil {
				return err
			}
			for _, snap := range snaps {
				if snap.Exists() {
					if err := tx.Update(snap.Ref, []firestore.Update{{Path: "dispatched", Value: true}}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Ping implements store.EntitlementStore: one bounded read of a document
// that need not exist.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.col(colAccounts).Doc("stipend-ping").Get(ctx)
	if err != nil && !isNotFound(err) {
		return fsfault.Read(err, "ping")
	}
	return nil
}
