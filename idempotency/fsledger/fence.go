package fsledger

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fence"
)

// Fence implements idempotency.Ledger. The Firestore store checks these
// fences (store/firestore) when it runs on the ledger's database.
func (l *Ledger) Fence(res idempotency.Reservation) fence.Fence {
	return &Fence{FenceClaim: idempotency.FenceClaim{Reference: l.Reference(res.ID), Reservation: res}, doc: l.doc(res.ID)}
}

// Fence is the claim of one reservation of a Firestore ledger. A store's
// transaction reads Doc with its other reads, Checks what it read, and,
// when it changes something, writes Mark with its other writes: the
// change and the mark commit together, or neither does, and Reclaim's
// conditional delete is ordered against both by Firestore.
type Fence struct {
	idempotency.FenceClaim
	doc *firestore.DocumentRef
}

// Doc is the reservation's document.
func (f *Fence) Doc() *firestore.DocumentRef { return f.doc }

// Check reports whether snap, Doc as the change's transaction read it
// (existing or not), still is the reservation: in progress under its
// token. Otherwise it returns an error wrapping store.ErrFenced (or an
// Internal one for a corrupt row).
func (f *Fence) Check(snap *firestore.DocumentSnapshot) error {
	if !snap.Exists() {
		return fence.Lost(f, "the row is gone")
	}
	rec, err := decode(snap)
	switch {
	case err != nil:
		return err
	case rec.Token != f.Reservation.Token:
		return fence.Lost(f, "the row belongs to another reservation")
	case rec.State != idempotency.StateInProgress:
		return fence.Lost(f, "the row is "+string(rec.State))
	}
	return nil
}

// Mark is the update, for the change's transaction, that marks the row
// written at now.
func (f *Fence) Mark(now time.Time) []firestore.Update {
	return []firestore.Update{{Path: "writtenAt", Value: now.UTC()}}
}

// Reclaim implements idempotency.Ledger: a Delete with rec's update time
// as its precondition, after checking that rec (as read) may be reclaimed.
func (l *Ledger) Reclaim(ctx context.Context, rec idempotency.Record) error {
	if !idempotency.ValidID(rec.ID) {
		return fault.Errorf(fault.CodeInvalid, "id: not a hashed key")
	}
	if err := idempotency.CheckReclaim(rec, l.Reference(rec.ID)); err != nil {
		return err
	}
	_, err := l.doc(rec.ID).Delete(ctx, firestore.LastUpdateTime(rec.UpdateTime))
	return l.resolveError(ctx, err, rec.ID, "reclaim")
}
