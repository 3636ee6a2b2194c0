package firestore

import (
	"context"
	"slices"
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
	snaps, err := direct{ctx, "pending events"}.all(s.build(qPendingEvents, filter{"dispatched", "==", false}).Limit(limit))
	if err != nil {
		return nil, err
	}
	return decodeAll(snaps, eventFrom)
}

// markChunk bounds the events marked in one transaction (500 writes per commit).
const markChunk = 400

// MarkEventsDispatched implements store.EntitlementStore.
func (s *Store) MarkEventsDispatched(ctx context.Context, ids []string) error {
	for chunk := range slices.Chunk(ids, markChunk) {
		var refs []*firestore.DocumentRef
		for _, id := range chunk {
			if id != "" {
				refs = append(refs, s.doc(colEvents, id))
			}
		}
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
