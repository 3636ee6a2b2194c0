// Package topup holds auto top-up: an account's settings (when its
// available credits fall below a threshold, buy an amount of credits with
// the payment method its payer saved at Stripe, at most a daily cap a UTC
// day), its state (a sequence that numbers the top-ups, the pending one,
// the failures in a row, today's total) and the pure rules the stores apply
// to them, so the memory, Firestore and PostgreSQL stores decide alike.
package topup

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// MaxFailures is how many top-ups in a row may fail before top-up is
// disabled.
const MaxFailures = 3

// FailurePause is how long top-up waits after a failed top-up before it
// begins another, doubled for each further failure in a row (15 min after
// the first, 30 after the second), so that MaxFailures declines take the
// better part of an hour to disable top-up, not the seconds of three
// charges in a row. A success, or new settings, end the pause.
const FailurePause = 15 * time.Minute

// Settings is when an account tops up, by how much, and what it buys.
type Settings struct {
	// Threshold: a top-up begins when the account's available credits in
	// Amount's currency fall below it.
	Threshold money.Money `json:"threshold"`
	// Amount is what one top-up charges; its grant is a credits
	// entitlement of Amount.
	Amount money.Money `json:"amount"`
	// Scope is the scope of that entitlement.
	Scope entitlement.Scope `json:"scope"`
	// DailyCap is the most top-ups may charge in one UTC day (those begun
	// that day and not failed); a top-up that would pass it does not begin.
	DailyCap money.Money `json:"dailyCap"`
}

// Method is the Stripe customer and payment method an off-session
// PaymentIntent charges, saved by a Checkout Session made for top-up.
type Method struct {
	Customer      string `json:"customer"`
	PaymentMethod string `json:"paymentMethod"`
}

// TopUp is an account's top-up: its settings, saved method and state. The
// stores keep it with the account, apart from the entitlements, so a
// charge never reads or writes it.
type TopUp struct {
	AgentID string `json:"agentId"`
	// Settings is nil until first set.
	Settings *Settings `json:"settings,omitempty"`
	Enabled  bool      `json:"enabled"`
	// DisabledReason says why top-up was disabled (by DELETE, or after
	// MaxFailures failures in a row).
	DisabledReason string  `json:"disabledReason,omitempty"`
	Method         *Method `json:"method,omitempty"`
	// Seq counts the top-ups begun; the n-th top-up's payment is keyed by
	// PaymentKey(agent, n).
	Seq int64 `json:"sequence"`
	// PendingPaymentID is the payment of the top-up begun and not settled
	// yet (see Settle), or "".
	PendingPaymentID string `json:"pendingPaymentId,omitempty"`
	// Failures is how many top-ups in a row failed.
	Failures int `json:"consecutiveFailures"`
	// Day (YYYY-MM-DD, UTC) and DayTotal: what top-ups begun that day
	// and not failed charge.
	Day       string      `json:"day,omitempty"`
	DayTotal  money.Money `json:"dayTotal,omitzero"`
	UpdatedAt time.Time   `json:"updatedAt,omitzero"`
}

// ResumeAt is when t may begin a top-up again after failures in a row: the
// last change of t (Settle stamps UpdatedAt when it counts a failure) plus
// FailurePause, doubled for each failure after the first. The zero time
// when the last top-up did not fail.
func (t *TopUp) ResumeAt() time.Time {
	if t.Failures <= 0 || t.UpdatedAt.IsZero() {
		return time.Time{}
	}
	return t.UpdatedAt.Add(FailurePause << min(t.Failures-1, 8))
}

// Watched reports whether a sweep must look at t: top-up is enabled, or a
// top-up is pending.
func (t *TopUp) Watched() bool { return t.Enabled || t.PendingPaymentID != "" }

// Why a top-up did not begin, or could not be enabled. The stores wrap them
// in a Conflict.
var (
	ErrDisabled = errors.New("top-up is not enabled")
	ErrPending  = errors.New("a top-up is pending")
	ErrDailyCap = errors.New("the top-up would pass the daily cap")
	ErrPaused   = errors.New("top-up is paused after a failed top-up")
	ErrMoved    = errors.New("the top-up sequence moved since it was read")
	ErrNoMethod = errors.New("no payment method is saved for top-up: pay once through a Checkout Session made with saveForTopUp")
)

// PaymentKey is the idempotency key of the payment of top-up seq of agent:
// one per crossing, whatever the instance count.
func PaymentKey(agentID string, seq int64) string {
	return keyPrefix + agentID + ":" + strconv.FormatInt(seq, 10)
}

const keyPrefix = "topup:"

// PaymentID is the ID of the payment keyed by PaymentKey.
func PaymentID(agentID string, seq int64) string {
	return uuid.NewSHA1(namespace, []byte(PaymentKey(agentID, seq))).String()
}

var namespace = uuid.MustParse("8b6e3c1e-3f6a-4c2e-9a55-6d2f1b7c9e40")

// IsTopUp reports whether p is the payment of a top-up (its idempotency key
// is a PaymentKey).
func IsTopUp(p *payment.Payment) bool {
	return strings.HasPrefix(p.IdempotencyKey, keyPrefix)
}

// Clone returns a deep copy of t.
func (t *TopUp) Clone() TopUp {
	c := *t
	if t.Settings != nil {
		s := *t.Settings
		s.Scope.Tools = append([]string(nil), s.Scope.Tools...)
		c.Settings = &s
	}
	if t.Method != nil {
		m := *t.Method
		c.Method = &m
	}
	return c
}

// Clone returns a deep copy of s.
func (s Settings) Clone() Settings {
	s.Scope.Tools = append([]string(nil), s.Scope.Tools...)
	return s
}
