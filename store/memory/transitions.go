package memory

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// Each transition works in two halves under the mutex: first everything
// that can fail (lookups, state checks, signing, encoding events), then the
// writes, which cannot fail, so a failed call changes nothing.

// CompletePayment moves a pending payment to succeeded, grants its
// entitlement, stores the signed receipt and writes the events.
func (s *Store) CompletePayment(_ context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, inKey, replay, err := s.move(id, &ch, payment.StatusSucceeded)
	if err != nil {
		return store.Completion{}, err
	}
	if replay {
		return s.completion(p, p.ReceiptID, true), nil
	}
	now := s.clock()
	e := p.Grant.Entitlement(uuid.NewString(), p, now)
	e = e.Clone() // share nothing with the payment's grant
	normalizeTimes(&e)
	signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindPayment, ch.Issuer, p.AgentID, p.ID, p.Amount, []receipt.Grant{receipt.GrantOf(&e)}, now))
	if err != nil {
		return store.Completion{}, err
	}
	next := copyPayment(p)
	next.Status, next.SucceededAt, next.UpdatedAt = payment.StatusSucceeded, &now, now
	next.ReceiptID, next.EntitlementIDs = signed.ID, []string{e.ID}
	evs, err := s.newEvents(
		pending(event.PaymentSucceeded, p.AgentID, &next),
		pending(event.EntitlementGranted, p.AgentID, &e),
	)
	if err != nil {
		return store.Completion{}, err
	}

	*p = next
	s.ensureAccount(p.AgentID)
	s.putEntitlement(&e)
	s.putReceipt(&signed)
	s.events.add(evs...)
	s.recordInbound(inKey, now)
	return s.completion(p, p.ReceiptID, false), nil
}

// FailPayment moves a pending payment to failed and writes payment.failed.
func (s *Store) FailPayment(_ context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, inKey, replay, err := s.move(id, &ch, payment.StatusFailed)
	if err != nil {
		return payment.Payment{}, err
	}
	if replay {
		return copyPayment(p), nil
	}
	now := s.clock()
	next := copyPayment(p)
	next.Status, next.FailedAt, next.FailureReason, next.UpdatedAt = payment.StatusFailed, &now, ch.Reason, now
	evs, err := s.newEvents(pending(event.PaymentFailed, p.AgentID, &next))
	if err != nil {
		return payment.Payment{}, err
	}

	*p = next
	s.events.add(evs...)
	s.recordInbound(inKey, now)
	return copyPayment(p), nil
}

// RefundPayment moves a succeeded payment to refunded, revokes what remains
// of its grant, stores the refund receipt and writes the events.
func (s *Store) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, inKey, replay, err := s.move(id, &ch, payment.StatusRefunded)
	if err != nil {
		return store.Completion{}, err
	}
	if replay {
		return s.completion(p, p.RefundReceiptID, true), nil
	}
	now := s.clock()
	r := transition.NewReceipt(receipt.KindRefund, ch.Issuer, p.AgentID, p.ID, transition.Remaining(p), []receipt.Grant{}, now)
	var revoked []revocation
	for _, eid := range p.EntitlementIDs {
		e := s.entitlements[eid]
		if e == nil {
			continue
		}
		left := shown(e, now) // what remains, after a pending quota reset
		r.Grants = append(r.Grants, receipt.GrantOf(&left))
		if e.Status == entitlement.StatusActive {
			revoked = append(revoked, revocationOf(e, now))
		}
	}
	var evs []pendingEvent
	for i := range revoked {
		evs = append(evs, pending(event.EntitlementRevoked, p.AgentID, &revoked[i].next))
	}
	signed, err := transition.SignReceipt(&ch, r)
	if err != nil {
		return store.Completion{}, err
	}
	next := copyPayment(p)
	next.Status, next.RefundedAt, next.UpdatedAt, next.RefundReceiptID = payment.StatusRefunded, &now, now, signed.ID
	all, err := s.newEvents(append([]pendingEvent{pending(event.PaymentRefunded, p.AgentID, &next)}, evs...)...)
	if err != nil {
		return store.Completion{}, err
	}
	if err := markFence(ctx); err != nil {
		return store.Completion{}, err
	}

	*p = next
	for i := range revoked {
		s.revoke(&revoked[i], now)
	}
	s.putReceipt(&signed)
	s.events.add(all...)
	s.recordInbound(inKey, now)
	return s.completion(p, p.RefundReceiptID, false), nil
}

// move looks up payment id for a move to status to: it returns the payment,
// the key of ch's inbound event ("" without one), and replay true when the
// move was made before (p is already there, or the inbound event was
// recorded). It fails when there is no such payment or p cannot move to to.
// Callers hold s.mu.
func (s *Store) move(id string, ch *store.PaymentChange, to payment.Status) (p *payment.Payment, inKey string, replay bool, err error) {
	p = s.payments[id]
	if p == nil {
		return nil, "", false, store.Errorf(store.CodeNotFound, "payment %q", id)
	}
	inKey, seen := s.inboundSeen(ch.Inbound)
	switch {
	case seen, p.Status.Toward(to) == payment.Replay:
		return p, inKey, true, nil
	case p.Status.Toward(to) == payment.Refuse:
		return nil, "", false, transition.RefusedPayment(id, p.Status, to)
	}
	return p, inKey, false, nil
}

// completion answers with p, the receipt receiptID (none if "") and p's
// entitlements as they are now. Callers hold s.mu.
func (s *Store) completion(p *payment.Payment, receiptID string, replayed bool) store.Completion {
	c := store.Completion{Payment: copyPayment(p), Replayed: replayed}
	if r := s.receipts[receiptID]; r != nil {
		c.Receipt = copyReceipt(r)
	}
	now := s.clock()
	for _, id := range p.EntitlementIDs {
		if e := s.entitlements[id]; e != nil {
			c.Entitlements = append(c.Entitlements, shown(e, now))
		}
	}
	return c
}

// inboundSeen returns the key of in and whether it was recorded; ("",
// false) without an inbound event. Callers hold s.mu.
func (s *Store) inboundSeen(in *store.InboundEvent) (string, bool) {
	if in == nil {
		return "", false
	}
	key := transition.InboundKey(in.Source, in.EventID)
	_, ok := s.inbound[key]
	return key, ok
}

// recordInbound records the inbound key, if any. Callers hold s.mu.
func (s *Store) recordInbound(key string, now time.Time) {
	if key != "" {
		s.inbound[key] = now
	}
}
