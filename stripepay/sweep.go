package stripepay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/periodic"
	"github.com/stipend-mcp/stipend/store"
)

// DefaultSweepAge is how long a Stripe payment stays pending before the
// sweep reads it from Stripe: long enough for its webhook to have arrived.
const DefaultSweepAge = 5 * time.Minute

// Pending is the part of store.EntitlementStore the sweep lists.
type Pending interface {
	ListPendingPayments(ctx context.Context, f store.PendingFilter, p store.Page) ([]payment.Payment, string, error)
}

// Sweep reconciles the Stripe payments still pending after Age with their
// objects at Stripe: it reads each one's Checkout Session or PaymentIntent
// and applies its state as the webhook would have, so a lost or misrouted
// event never loses a grant. Every instance may sweep at once: the store's
// transitions replay, so a payment is granted once, whoever applies it.
type Sweep struct {
	Store   Pending
	Stripe  *Client
	Applier *Applier
	// Age is how old a pending payment must be to be read (default
	// DefaultSweepAge).
	Age time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives a line per failed read and per healed payment
	// (default slog.Default()).
	Logger *slog.Logger
	// TopUps, if set, is checked after the payments: every account whose
	// auto top-up is on or pending (TopUps.Once).
	TopUps *TopUps
	// MaxGap is the longest a pending payment waits between two reads
	// after the first (default DefaultSweepMaxGap); see readPointPassed.
	MaxGap time.Duration
	// Claims, if set, shares the sweep between instances: at each tick of
	// Run, only the instance that claims the job SweepJob for the interval
	// sweeps, so N instances read Stripe as often as one does, and another
	// takes over the turn when that one stops (store.Claimer). Owner names
	// this instance in the claims (required with Claims).
	Claims store.Claimer
	Owner  string

	// last is when this sweep's previous Once listed the pending payments
	// (zero: none did, so every pending payment is read); retry holds the
	// payments whose read failed then, read again whatever their age.
	last  time.Time
	retry map[string]bool
}

// Report says what one sweep did.
type Report struct {
	// Checked payments were read from Stripe; Applied of them moved (or had
	// moved meanwhile); Failed could not be read or applied and are tried
	// again at the next sweep.
	Checked, Applied, Failed int
	// TopUpsChecked accounts with auto top-up were checked; TopUpsFailed
	// of those checks failed.
	TopUpsChecked, TopUpsFailed int
}

func (r Report) String() string {
	return fmt.Sprintf("checked %d, applied %d, failed %d", r.Checked, r.Applied, r.Failed)
}

// Once sweeps the pending Stripe payments older than Age, page by page. The
// first Once of a Sweep reads every one; each later one reads only those
// that passed a read point since the previous Once (readPointPassed: the
// reads back off with the payment's age, to one per MaxGap), and those
// whose read failed then. A payment whose read or change fails is counted
// and logged, and the sweep goes on; only a failure to list stops it. Once
// is not safe for concurrent use (Run calls it from one goroutine).
func (s *Sweep) Once(ctx context.Context) (Report, error) {
	clock, age, maxGap := time.Now, s.Age, s.MaxGap
	if s.Now != nil {
		clock = s.Now
	}
	if age <= 0 {
		age = DefaultSweepAge
	}
	if maxGap <= 0 {
		maxGap = DefaultSweepMaxGap
	}
	now, last, retry, failed := clock(), s.last, s.retry, map[string]bool{}
	due := func(p *payment.Payment) bool {
		if last.IsZero() || retry[p.ID] {
			return true
		}
		return readPointPassed(last.Sub(p.CreatedAt), now.Sub(p.CreatedAt), age, maxGap)
	}
	f := store.PendingFilter{Provider: payment.ProviderStripe, CreatedBefore: now.Add(-age)}
	var r Report
	cursor := ""
	for {
		items, next, err := s.Store.ListPendingPayments(ctx, f, store.Page{Cursor: cursor})
		if err != nil {
			return r, fmt.Errorf("stripe sweep: listing pending payments: %w", err)
		}
		for i := range items {
			if !due(&items[i]) {
				continue
			}
			res, err := s.reconcile(ctx, &items[i])
			if errors.Is(err, errUnread) {
				continue
			}
			r.Checked++
			switch {
			case err != nil:
				r.Failed++
				failed[items[i].ID] = true
				s.log().Warn("stripe sweep: payment not reconciled; trying again at the next sweep", "payment", items[i].ID, "error", err.Error())
			case res == Applied:
				r.Applied++
				s.log().Info("stripe sweep: payment reconciled from Stripe", "payment", items[i].ID)
			}
		}
		if next == "" || ctx.Err() != nil {
			break
		}
		cursor = next
	}
	s.last, s.retry = now, failed // a listing that failed above keeps the previous ones, so nothing due is skipped
	if s.TopUps == nil || ctx.Err() != nil {
		return r, ctx.Err()
	}
	var err error
	r.TopUpsChecked, r.TopUpsFailed, err = s.TopUps.Once(ctx)
	return r, err
}

// errUnread is a payment the sweep has nothing to read for: a Stripe
// payment with neither a session nor an intent.
var errUnread = errors.New("nothing to read at Stripe")

// reconcile reads p's object at Stripe and applies its state.
func (s *Sweep) reconcile(ctx context.Context, p *payment.Payment) (Result, error) {
	if p.Checkout != nil {
		cs, err := s.Stripe.CheckoutSession(ctx, p.Checkout.SessionID)
		if err != nil {
			return Ignored, err
		}
		cs.Metadata = owned(cs.Metadata, p.ID)
		switch {
		case cs.Status == stripe.CheckoutSessionStatusExpired:
			return s.Applier.SessionFailed(ctx, cs, "expired", nil)
		case cs.Status == stripe.CheckoutSessionStatusComplete && cs.PaymentStatus != stripe.CheckoutSessionPaymentStatusUnpaid:
			return s.Applier.SessionCompleted(ctx, cs, nil)
		case cs.Status != stripe.CheckoutSessionStatusComplete || sessionIntent(cs) == "":
			return Ignored, nil // open: the payer has not paid yet
		}
		// Complete but unpaid: the delayed payment's intent says how it ends.
		if _, _, err := s.Applier.find(ctx, cs.Metadata, sessionIntent(cs)); err != nil {
			return Ignored, err
		}
		return s.intent(ctx, p.ID, sessionIntent(cs))
	}
	if p.ProviderIntentID == "" {
		return Ignored, errUnread
	}
	return s.intent(ctx, p.ID, p.ProviderIntentID)
}

// owned returns meta naming paymentID: an object read by the link its
// payment holds is that payment's, whatever its metadata says (an intent
// made by a billing integration has none).
func owned(meta map[string]string, paymentID string) map[string]string {
	m := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	m[payment.MetadataKey] = paymentID
	return m
}

// intent reads PaymentIntent id of payment paymentID and applies its end,
// if it has one.
func (s *Sweep) intent(ctx context.Context, paymentID, id string) (Result, error) {
	pi, err := s.Stripe.PaymentIntent(ctx, id)
	if err != nil {
		return Ignored, err
	}
	pi.Metadata = owned(pi.Metadata, paymentID)
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		return s.Applier.IntentSucceeded(ctx, pi, nil)
	case stripe.PaymentIntentStatusCanceled:
		return s.Applier.IntentCanceled(ctx, pi, nil)
	}
	return Ignored, nil // still in progress, or waiting for the payer
}

// SweepJob is the name the sweep claims its turns under (Sweep.Claims).
const SweepJob = "stripe-sweep"

// Run sweeps every interval until ctx is done; a failed sweep is logged and
// tried again at the next tick. With Claims, a tick sweeps only when this
// instance claims the turn (Sweep.Claims).
func (s *Sweep) Run(ctx context.Context, every time.Duration) {
	periodic.Run(ctx, every, func(ctx context.Context) {
		if !s.myTurn(ctx, every) {
			return
		}
		r, err := s.Once(ctx)
		if err != nil && ctx.Err() == nil {
			s.log().Warn("stripe sweep failed; retrying at the next tick", "error", err.Error())
		} else if r.Applied > 0 || r.Failed > 0 {
			s.log().Info("stripe sweep", "checked", r.Checked, "applied", r.Applied, "failed", r.Failed)
		}
	})
}

func (s *Sweep) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// myTurn reports whether this instance sweeps at this tick: always without
// Claims; with Claims, when it claims SweepJob until just before the next
// tick (so the turn is free again then, for whichever instance asks first).
// A failed claim is logged and sweeps anyway: reading Stripe twice is safe,
// not reading it at all is not.
func (s *Sweep) myTurn(ctx context.Context, every time.Duration) bool {
	if s.Claims == nil {
		return true
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	won, err := s.Claims.ClaimJob(ctx, SweepJob, s.Owner, now().Add(every*9/10))
	if err != nil {
		if ctx.Err() == nil {
			s.log().Warn("stripe sweep: claiming the turn failed; sweeping anyway", "error", err.Error())
		}
		return true
	}
	return won
}
