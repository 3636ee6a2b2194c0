package stripepay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// TopUpStore is the part of store.EntitlementStore auto top-up reads and
// changes.
type TopUpStore interface {
	Payments
	GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error)
	BeginTopUp(ctx context.Context, agentID string, expectSeq int64) (payment.Payment, error)
	ListTopUps(ctx context.Context, p store.Page) ([]topup.TopUp, string, error)
	ListEntitlements(ctx context.Context, agentID string, f store.EntitlementFilter, p store.Page) ([]entitlement.Entitlement, string, error)
}

// TopUps makes auto top-ups: Check looks at one account and, when its
// available credits are below its threshold, begins one top-up
// (store.TopUps.BeginTopUp, a compare-and-set on the account's sequence, so
// one crossing makes one top-up whatever the instance count) and makes its
// off-session PaymentIntent. Its success grants through Applier, as any
// Stripe payment's; its refusal fails the payment and counts a failure
// (topup.failed). A top-up whose PaymentIntent was never made (a crash
// after BeginTopUp), or whose end was never applied, is finished by the
// next Check of the account: Once checks every account with top-up on.
// Charged and Run (queue.go) bring the check right after a charge.
type TopUps struct {
	Store   TopUpStore
	Stripe  *Client
	Applier *Applier
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives a line per top-up begun, refused or failed (default
	// slog.Default()).
	Logger *slog.Logger
	// ResumeAfter is how old a pending top-up without a PaymentIntent must
	// be before a check makes its intent (default DefaultSweepAge): a
	// younger one is most likely being made by the instance that began it.
	ResumeAfter time.Duration

	queue queue
}

func (t *TopUps) now() time.Time {
	if t.Now != nil {
		return t.Now().UTC()
	}
	return time.Now().UTC()
}

func (t *TopUps) resumeAfter() time.Duration {
	if t.ResumeAfter > 0 {
		return t.ResumeAfter
	}
	return DefaultSweepAge
}

func (t *TopUps) log() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

// Available is what agentID can spend in currency now: balance less holds
// of its active, unexpired credits entitlements in that currency.
func (t *TopUps) Available(ctx context.Context, agentID, currency string) (int64, error) {
	now := t.now()
	var sum int64
	cursor := ""
	for {
		items, next, err := t.Store.ListEntitlements(ctx, agentID,
			store.EntitlementFilter{Status: entitlement.StatusActive, Type: entitlement.TypeCredits}, store.Page{Cursor: cursor})
		if err != nil {
			return 0, err
		}
		for i := range items {
			if e := &items[i]; !e.Expired(now) && e.Credits.Balance.Currency == currency {
				sum += available(e)
			}
		}
		if next == "" {
			return sum, nil
		}
		cursor = next
	}
}

// available is what credits entitlement e can spend.
func available(e *entitlement.Entitlement) int64 {
	return e.Credits.Balance.Cents - e.Credits.Held.Cents
}

// Check looks at the top-up of agentID: it finishes a pending one (makes
// its PaymentIntent if none was made, applies its end if it has one), and
// otherwise, if top-up is on and the account's available credits are below
// the threshold, begins one and makes its PaymentIntent. An account
// without top-up, or one whose top-up another caller began, is not an
// error.
func (t *TopUps) Check(ctx context.Context, agentID string) error {
	for range 2 { // a pending top-up that ended is settled, then looked at again
		tu, err := t.Store.GetTopUp(ctx, agentID)
		if errors.Is(err, store.ErrNotFound) {
			t.queue.remember(topup.TopUp{AgentID: agentID}, t.now())
			return nil
		}
		if err != nil {
			return err
		}
		t.queue.remember(tu, t.now())
		if tu.PendingPaymentID != "" {
			ended, err := t.finish(ctx, &tu)
			if err != nil || !ended {
				return err
			}
			continue
		}
		if !tu.Enabled || tu.Settings == nil || tu.Method == nil {
			return nil
		}
		if resume := tu.ResumeAt(); t.now().Before(resume) {
			return nil // paused after a failed top-up (topup.FailurePause); BeginTopUp would refuse too
		}
		avail, err := t.Available(ctx, agentID, tu.Settings.Amount.Currency)
		if err != nil || avail >= tu.Settings.Threshold.Cents {
			return err
		}
		p, err := t.Store.BeginTopUp(ctx, agentID, tu.Seq)
		switch {
		case errors.Is(err, topup.ErrDailyCap):
			t.log().Warn("top-up not begun: the daily cap is reached", "agent", agentID, "available", avail, "dailyCap", tu.Settings.DailyCap.String())
			return nil
		case store.CodeOf(err) == store.CodeConflict:
			return nil // another caller began it, or top-up was turned off meanwhile
		case err != nil:
			return err
		}
		t.log().Info("top-up begun", "agent", agentID, "payment", p.ID, "available", avail, "amount", p.Amount.String())
		_, err = t.charge(ctx, &p, *tu.Method)
		return err
	}
	return nil
}

// finish moves the pending top-up of tu along; ended is true when its
// payment has ended (and the top-up was settled).
func (t *TopUps) finish(ctx context.Context, tu *topup.TopUp) (ended bool, err error) {
	p, err := t.Store.GetPayment(ctx, tu.PendingPaymentID)
	if errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("top-up of %s: its payment %s is missing", tu.AgentID, tu.PendingPaymentID)
	}
	if err != nil {
		return false, err
	}
	switch {
	case p.Status != payment.StatusPending:
		_, err = t.Store.SettleTopUp(ctx, tu.AgentID)
		return err == nil, err
	case p.ProviderIntentID == "" && p.CreatedAt.After(t.now().Add(-t.resumeAfter())):
		return false, nil // its PaymentIntent is being made
	case p.ProviderIntentID == "":
		// Begun, but its PaymentIntent was not made (a crash) or its answer
		// was lost: made now, with the same idempotency key, so never twice.
		if tu.Method == nil {
			_, err := t.Applier.fail(ctx, &p, "top-up: no payment method is saved", nil)
			return err == nil, err
		}
		t.log().Info("top-up resumed: making its PaymentIntent", "agent", tu.AgentID, "payment", p.ID)
		return t.charge(ctx, &p, *tu.Method)
	}
	pi, err := t.Stripe.PaymentIntent(ctx, p.ProviderIntentID)
	if err != nil {
		return false, err
	}
	return t.apply(ctx, &p, pi)
}

// charge makes the off-session PaymentIntent of top-up payment p and
// applies what Stripe answered.
func (t *TopUps) charge(ctx context.Context, p *payment.Payment, m topup.Method) (ended bool, err error) {
	pi, err := t.Stripe.CreateTopUpIntent(ctx, p, m)
	var se *stripe.Error
	if errors.As(err, &se) && (se.Type == stripe.ErrorTypeCard || se.Type == stripe.ErrorTypeInvalidRequest) {
		// Refused: a declined card, a method that needs its payer, a
		// customer or method gone.
		if se.PaymentIntent != nil && se.PaymentIntent.ID != "" {
			if _, err := t.Store.LinkProviderIntent(ctx, p.ID, se.PaymentIntent.ID); err != nil {
				return false, err
			}
		}
		t.log().Warn("top-up refused by Stripe", "agent", p.AgentID, "payment", p.ID, "code", string(se.Code), "request", se.RequestID)
		_, err := t.Applier.fail(ctx, p, attemptFailure(se), nil)
		return err == nil, err
	}
	if err != nil {
		return false, err // Stripe unreachable or failing: the next check retries with the same key
	}
	if _, err := t.Store.LinkProviderIntent(ctx, p.ID, pi.ID); err != nil {
		return false, err
	}
	return t.apply(ctx, p, pi)
}

// apply applies the state of top-up p's PaymentIntent pi, as the events
// would: a success completes the payment (the grant and its receipt), a
// refusal or cancellation fails it; an intent still processing waits.
func (t *TopUps) apply(ctx context.Context, p *payment.Payment, pi *stripe.PaymentIntent) (ended bool, err error) {
	pi.Metadata = owned(pi.Metadata, p.ID)
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		_, err = t.Applier.IntentSucceeded(ctx, pi, nil)
	case stripe.PaymentIntentStatusCanceled:
		_, err = t.Applier.IntentCanceled(ctx, pi, nil)
	case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusRequiresAction, stripe.PaymentIntentStatusRequiresConfirmation:
		// Off session nobody can act: the top-up failed.
		_, err = t.Applier.fail(ctx, p, attemptFailure(pi.LastPaymentError), nil)
	default:
		return false, nil // processing
	}
	return err == nil, err
}

// Once checks every account whose top-up is on or pending, and returns how
// many it checked and how many checks failed (logged; the next sweep
// tries again).
func (t *TopUps) Once(ctx context.Context) (checked, failed int, err error) {
	cursor := ""
	for {
		items, next, err := t.Store.ListTopUps(ctx, store.Page{Cursor: cursor})
		if err != nil {
			return checked, failed, fmt.Errorf("top-up sweep: listing top-ups: %w", err)
		}
		for i := range items {
			checked++
			if err := t.Check(ctx, items[i].AgentID); err != nil {
				failed++
				t.log().Warn("top-up sweep: account not checked; trying again at the next sweep", "agent", items[i].AgentID, "error", err.Error())
			}
		}
		if next == "" || ctx.Err() != nil {
			return checked, failed, ctx.Err()
		}
		cursor = next
	}
}
