package firestore

import (
	"context"
	"encoding/json"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// colTopUps holds an account's top-up, one document per account (ID: the
// account's). It is kept apart from the account's own document, which
// charges may read (account-wide limits): on Firestore a transaction that
// reads a document waits for one writing it, so top-up writes would then
// slow charges down. Its fields: agentId, watched (topup.TopUp.Watched,
// what the sweep queries), createdAt (the list order) and state, the
// top-up as JSON.
const colTopUps = "topups"

// qTopUpsWatched lists the top-ups a sweep looks at.
var qTopUpsWatched = Query{
	Name: "topups.watched", Collection: colTopUps,
	Equal: []string{"watched"}, Order: "createdAt",
}

func (s *Store) topUpRef(agentID string) *firestore.DocumentRef {
	return s.col(colTopUps).Doc(docID(agentID))
}

func topUpFrom(snap *firestore.DocumentSnapshot) (topup.TopUp, error) {
	f := read(snap)
	agent, state := f.str("agentId"), f.str("state")
	if f.err != nil {
		return topup.TopUp{}, f.err
	}
	var t topup.TopUp
	if err := json.Unmarshal([]byte(state), &t); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInternal, err, "top-up %s: corrupt state", snap.Ref.ID)
	}
	t.AgentID = agent
	return t, nil
}

// txTopUp reads the top-up of agentID inside tx. exists is false for an
// account with none stored yet; an unknown account is ErrNotFound.
func (s *Store) txTopUp(tx *firestore.Transaction, agentID string) (t topup.TopUp, created time.Time, exists bool, err error) {
	snap, err := tx.Get(s.topUpRef(agentID))
	switch {
	case err == nil:
		t, err = topUpFrom(snap)
		f := read(snap)
		created = f.instant("createdAt")
		if err == nil {
			err = f.err
		}
		return t, created, true, err
	case !isNotFound(err):
		return t, created, false, err
	}
	if _, err := tx.Get(s.col(colAccounts).Doc(docID(agentID))); err != nil {
		if isNotFound(err) {
			return t, created, false, store.Errorf(store.CodeNotFound, "account %q", agentID)
		}
		return t, created, false, err
	}
	return topup.TopUp{AgentID: agentID}, created, false, nil
}

func (s *Store) writeTopUp(tx *firestore.Transaction, t *topup.TopUp, created time.Time) error {
	state, err := json.Marshal(t)
	if err != nil {
		return store.Wrap(store.CodeInternal, err, "encode top-up")
	}
	return tx.Set(s.topUpRef(t.AgentID), map[string]any{
		"agentId": t.AgentID, "watched": t.Watched(), "createdAt": created, "state": string(state),
	})
}

// txPendingTopUp reads the payment of t's pending top-up inside tx, or nil.
func (s *Store) txPendingTopUp(tx *firestore.Transaction, t *topup.TopUp) (*payment.Payment, error) {
	if t.PendingPaymentID == "" {
		return nil, nil
	}
	p, err := s.txPayment(tx, t.PendingPaymentID)
	if store.CodeOf(err) == store.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// changeTopUp runs change on the top-up of agentID in a transaction and
// writes it when change says it changed. change does its own reads before
// any write.
func (s *Store) changeTopUp(ctx context.Context, what, agentID string, ensure bool,
	change func(tx *firestore.Transaction, t *topup.TopUp, now time.Time) (write bool, after func() error, err error)) (topup.TopUp, error) {
	var out topup.TopUp
	err := s.run(ctx, what, func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.clock()
		var create func() error
		if ensure {
			var err error
			if create, err = s.ensureAccount(tx, agentID, now); err != nil {
				return err
			}
		}
		var t topup.TopUp
		var created time.Time
		var exists bool
		var err error
		if create != nil {
			t = topup.TopUp{AgentID: agentID}
		} else if t, created, exists, err = s.txTopUp(tx, agentID); err != nil {
			return err
		}
		if !exists {
			created = now
		}
		write, after, err := change(tx, &t, now)
		if err != nil {
			return err
		}
		out = t
		if create != nil {
			if err := create(); err != nil {
				return err
			}
		}
		if write {
			if err := s.writeTopUp(tx, &t, created); err != nil {
				return err
			}
		}
		if after != nil {
			return after()
		}
		return nil
	})
	return out, err
}

// SaveTopUpMethod implements store.TopUps.
func (s *Store) SaveTopUpMethod(ctx context.Context, agentID string, m topup.Method) (topup.TopUp, error) {
	if agentID == "" || m.Customer == "" || m.PaymentMethod == "" {
		return topup.TopUp{}, store.Errorf(store.CodeInvalid, "method: an agent, a customer and a payment method are required")
	}
	return s.changeTopUp(ctx, "save top-up method", agentID, true, func(_ *firestore.Transaction, t *topup.TopUp, now time.Time) (bool, func() error, error) {
		t.Method, t.UpdatedAt = &m, now
		return true, nil, nil
	})
}

// PutTopUp implements store.TopUps.
func (s *Store) PutTopUp(ctx context.Context, agentID string, set topup.Settings) (topup.TopUp, error) {
	if err := set.Validate(); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInvalid, err, "top-up")
	}
	return s.changeTopUp(ctx, "put top-up", agentID, false, func(_ *firestore.Transaction, t *topup.TopUp, now time.Time) (bool, func() error, error) {
		if err := topup.Set(t, set.Clone(), now); err != nil {
			return false, nil, store.Wrap(store.CodeConflict, err, "top-up of %q", agentID)
		}
		return true, nil, nil
	})
}

// GetTopUp implements store.TopUps.
func (s *Store) GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	snap, err := s.topUpRef(agentID).Get(ctx)
	if err == nil {
		return topUpFrom(snap)
	}
	if !isNotFound(err) {
		return topup.TopUp{}, fsfault.Read(err, "get top-up")
	}
	if _, err := s.GetAccount(ctx, agentID); err != nil {
		return topup.TopUp{}, err
	}
	return topup.TopUp{AgentID: agentID}, nil
}

// DisableTopUp implements store.TopUps.
func (s *Store) DisableTopUp(ctx context.Context, agentID, reason string) (topup.TopUp, error) {
	return s.changeTopUp(ctx, "disable top-up", agentID, false, func(_ *firestore.Transaction, t *topup.TopUp, now time.Time) (bool, func() error, error) {
		if !t.Enabled {
			return false, nil, nil
		}
		topup.Disable(t, reason, now)
		return true, nil, nil
	})
}

// BeginTopUp implements store.TopUps. The top-up document is read in the
// transaction, so concurrent beginners serialize on it (a loser is aborted
// and retried, and then sees the sequence moved).
func (s *Store) BeginTopUp(ctx context.Context, agentID string, expectSeq int64) (payment.Payment, error) {
	var out payment.Payment
	var refused error
	_, err := s.changeTopUp(ctx, "begin top-up", agentID, false, func(tx *firestore.Transaction, t *topup.TopUp, now time.Time) (bool, func() error, error) {
		refused, out = nil, payment.Payment{}
		prior, err := s.txPendingTopUp(tx, t)
		if err != nil {
			return false, nil, err
		}
		pendingBefore := t.PendingPaymentID
		p, failure, berr := topup.Begin(t, expectSeq, prior, now)
		var writes []func() error
		if failure != nil {
			writes = append(writes, func() error { return s.enqueue(tx, event.TopUpFailed, agentID, now, failure) })
		}
		if berr != nil {
			refused = store.Wrap(store.CodeConflict, berr, "top-up of %q", agentID)
			return t.PendingPaymentID != pendingBefore, inOrder(writes), nil
		}
		// The payment's ID and key are derived from the sequence, which
		// only this transaction moves: they cannot exist unless the state
		// is corrupt.
		keyRef, ref := s.paymentKeyRef(p.IdempotencyKey), s.paymentRef(p.ID)
		for _, r := range []*firestore.DocumentRef{keyRef, ref} {
			if _, err := tx.Get(r); err == nil {
				return false, nil, store.Errorf(store.CodeInternal, "top-up payment %s exists already", p.ID)
			} else if !isNotFound(err) {
				return false, nil, err
			}
		}
		p.CreatedAt, p.UpdatedAt = stamp(p.CreatedAt), stamp(p.UpdatedAt)
		out = p
		writes = append(writes,
			func() error { return tx.Create(ref, paymentDoc(&p)) },
			func() error { return tx.Create(keyRef, map[string]any{"paymentId": p.ID, "createdAt": now}) })
		return true, inOrder(writes), nil
	})
	if err == nil {
		err = refused
	}
	return out, err
}

// inOrder runs fns in order, stopping at the first error.
func inOrder(fns []func() error) func() error {
	return func() error {
		for _, fn := range fns {
			if err := fn(); err != nil {
				return err
			}
		}
		return nil
	}
}

// SettleTopUp implements store.TopUps.
func (s *Store) SettleTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	return s.changeTopUp(ctx, "settle top-up", agentID, false, func(tx *firestore.Transaction, t *topup.TopUp, now time.Time) (bool, func() error, error) {
		prior, err := s.txPendingTopUp(tx, t)
		if err != nil {
			return false, nil, err
		}
		failure, changed := topup.Settle(t, prior, now)
		if failure == nil {
			return changed, nil, nil
		}
		return changed, func() error { return s.enqueue(tx, event.TopUpFailed, agentID, now, failure) }, nil
	})
}

// ListTopUps implements store.TopUps.
func (s *Store) ListTopUps(ctx context.Context, p store.Page) ([]topup.TopUp, string, error) {
	q := s.build(qTopUpsWatched, filter{"watched", "==", true})
	return list(ctx, q, listKey(qTopUpsWatched), qTopUpsWatched.Order, p, topUpFrom)
}
