package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// RefundPaymentPart takes the part of payment id refunded since the last
// call off its credits and stores the refund receipt of the part.
func (s *Store) RefundPaymentPart(_ context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payments[id]
	if p == nil {
		return store.Completion{}, store.Errorf(store.CodeNotFound, "payment %q", id)
	}
	inKey, seen := s.inboundSeen(ch.Inbound)
	part, replay, err := transition.RefundPart(p, total)
	if seen {
		replay, err = true, nil
	}
	if err != nil {
		return store.Completion{}, err
	}
	if replay {
		return s.completion(p, "", true), nil
	}
	now := s.clock()
	type cut struct {
		stored  *entitlement.Entitlement
		next    entitlement.Entitlement
		expired []string
	}
	var cuts []cut
	r := transition.NewReceipt(receipt.KindRefund, ch.Issuer, p.AgentID, p.ID, part, []receipt.Grant{}, now)
	for _, eid := range p.EntitlementIDs {
		e := s.entitlements[eid]
		if e == nil {
			continue
		}
		next, expired := edit(e, now)
		next.Refresh(now)
		transition.CutCredits(&next, part)
		cuts = append(cuts, cut{stored: e, next: next, expired: expired})
		shownNext := next.Clone()
		r.Grants = append(r.Grants, receipt.GrantOf(&shownNext))
	}
	signed, err := transition.SignReceipt(&ch, r)
	if err != nil {
		return store.Completion{}, err
	}
	next := copyPayment(p)
	next.RefundedAmount, next.UpdatedAt = &total, now
	evs, err := s.newEvents(pending(event.PaymentPartiallyRefunded, p.AgentID, &next))
	if err != nil {
		return store.Completion{}, err
	}

	*p = next
	for i := range cuts {
		s.commit(cuts[i].stored, &cuts[i].next, cuts[i].expired, now)
	}
	s.putReceipt(&signed)
	s.events.add(evs...)
	s.recordInbound(inKey, now)
	c := s.completion(p, "", false)
	c.Receipt = copyReceipt(&signed)
	return c, nil
}

// DisputePayment revokes what is left of payment id's grant and records
// the dispute.
func (s *Store) DisputePayment(_ context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payments[id]
	if p == nil {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment %q", id)
	}
	inKey, seen := s.inboundSeen(ch.Inbound)
	replay, err := transition.CheckDispute(p)
	if seen {
		replay, err = true, nil
	}
	if err != nil || replay {
		return copyPayment(p), err
	}
	now := s.clock()
	next := copyPayment(p)
	next.DisputedAt, next.DisputeReason, next.UpdatedAt = &now, ch.Reason, now
	ps := []pendingEvent{pending(event.PaymentDisputed, p.AgentID, &next)}
	var revoked []revocation
	for _, eid := range p.EntitlementIDs {
		if e := s.entitlements[eid]; e != nil && e.Status == entitlement.StatusActive {
			revoked = append(revoked, revocationOf(e, now))
		}
	}
	for i := range revoked {
		ps = append(ps, pending(event.EntitlementRevoked, p.AgentID, &revoked[i].next))
	}
	evs, err := s.newEvents(ps...)
	if err != nil {
		return payment.Payment{}, err
	}

	*p = next
	for i := range revoked {
		s.revoke(&revoked[i], now)
	}
	s.events.add(evs...)
	s.recordInbound(inKey, now)
	return copyPayment(p), nil
}
