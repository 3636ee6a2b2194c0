package stripepay

import (
	"context"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/topup"
)

// SettingsTTL is how long Charged trusts what it last read of an account's
// top-up (its threshold, or that it has none) before asking for a check.
const SettingsTTL = 30 * time.Second

// queueSize bounds the accounts waiting for a check; beyond it Charged
// drops the request and the sweep finds the account.
const queueSize = 1024

// queue is the per-instance work of TopUps: the accounts to check, each at
// most once in the queue, and what was last read of each one's threshold.
type queue struct {
	once   sync.Once
	mu     sync.Mutex
	work   chan string
	queued map[string]bool
	known  map[string]threshold
}

// threshold is what Charged needs of an account's top-up.
type threshold struct {
	on    bool
	at    money.Money
	until time.Time
}

func (q *queue) init() {
	q.once.Do(func() {
		q.work = make(chan string, queueSize)
		q.queued = make(map[string]bool)
		q.known = make(map[string]threshold)
	})
}

// remember records what a check read of tu.
func (q *queue) remember(tu topup.TopUp, now time.Time) {
	q.init()
	th := threshold{until: now.Add(SettingsTTL)}
	if tu.Enabled && tu.Settings != nil {
		th.on, th.at = true, tu.Settings.Threshold
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.known) >= 16*queueSize {
		clear(q.known) // bounded memory: forgotten accounts are read again
	}
	q.known[tu.AgentID] = th
}

// Charged is told the entitlement a charge (a consume, a capture, a hold)
// left: when it is credits and what it has available is below the
// account's threshold (or the account's threshold is not known), the
// account is queued for a check. The account's available credits are
// below its threshold only if the charged entitlement's are, so no
// crossing is missed; most calls are answered from memory.
func (t *TopUps) Charged(e *entitlement.Entitlement) {
	if e.Type != entitlement.TypeCredits {
		return
	}
	q := &t.queue
	q.init()
	q.mu.Lock()
	th, known := q.known[e.AgentID]
	if known && t.now().Before(th.until) &&
		(!th.on || th.at.Currency != e.Credits.Balance.Currency || available(e) >= th.at.Cents) {
		q.mu.Unlock()
		return
	}
	if q.queued[e.AgentID] {
		q.mu.Unlock()
		return
	}
	q.queued[e.AgentID] = true
	q.mu.Unlock()
	select {
	case q.work <- e.AgentID:
	default:
		q.mu.Lock()
		delete(q.queued, e.AgentID)
		q.mu.Unlock()
	}
}

// Run checks the queued accounts, one at a time, until ctx is done; each
// check is bounded by timeout. A failed check is logged; the sweep tries
// the account again.
func (t *TopUps) Run(ctx context.Context, timeout time.Duration) {
	q := &t.queue
	q.init()
	for {
		select {
		case <-ctx.Done():
			return
		case agent := <-q.work:
			q.mu.Lock()
			delete(q.queued, agent)
			q.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			if err := t.Check(cctx, agent); err != nil && ctx.Err() == nil {
				t.log().Warn("top-up check failed; the sweep tries again", "agent", agent, "error", err.Error())
			}
			cancel()
		}
	}
}

// Forget drops what this instance remembers of agentID's top-up, after a
// change of its settings here; nil-safe. Other instances trust theirs for
// up to SettingsTTL.
func (t *TopUps) Forget(agentID string) {
	if t == nil {
		return
	}
	q := &t.queue
	q.init()
	q.mu.Lock()
	delete(q.known, agentID)
	q.mu.Unlock()
}
