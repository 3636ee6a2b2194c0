package api

import (
	"context"
	"sync"
	"time"
)

// DefaultStoreTimeout bounds a request's store calls when
// Config.StoreTimeout is 0. Healthy Firestore calls take milliseconds to a
// few hundred (a contended transaction); two seconds is ample for them and
// short enough that a stalled store answers 503 while the caller can still
// retry: the MCP gate gives each charge 5 s, retries included, which then
// holds two attempts and their backoff.
const DefaultStoreTimeout = 2 * time.Second

// deadlineCtx is its parent (a request's context) ending at deadline, as
// context.WithDeadline's would, but it starts the timer that ends it only
// when something first waits on it or asks for a value (Done, Value:
// context.WithCancel and the rest of the context package do both on a
// derived context). A store call that never waits on its context (the
// memory store's) costs no timer and no registration with the parent.
type deadlineCtx struct {
	context.Context // the parent
	deadline        time.Time

	mu       sync.Mutex
	armed    context.Context // context.WithDeadline(parent, deadline), once armed
	cancel   context.CancelFunc
	released bool // the request is done: d is cancelled, as a cancelled WithDeadline is
}

// arm returns the context.WithDeadline that d stands for, making it on the
// first call (cancelled at once after release).
func (d *deadlineCtx) arm() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed == nil {
		d.armed, d.cancel = context.WithDeadline(d.Context, d.deadline)
		if d.released {
			d.cancel()
		}
	}
	return d.armed
}

// release cancels d once the request is done (stopping its timer if it was
// armed), as the deferred cancel of a context.WithDeadline would.
func (d *deadlineCtx) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released = true
	if d.cancel != nil {
		d.cancel()
	}
}

// Deadline is the earlier of the parent's deadline and d's.
func (d *deadlineCtx) Deadline() (time.Time, bool) {
	if p, ok := d.Context.Deadline(); ok && p.Before(d.deadline) {
		return p, true
	}
	return d.deadline, true
}

// Done is the armed context's Done.
func (d *deadlineCtx) Done() <-chan struct{} { return d.arm().Done() }

// Err is the armed context's Err; before d is armed, what the armed
// context would say: the parent's error, context.Canceled after release,
// or context.DeadlineExceeded once the deadline has passed.
func (d *deadlineCtx) Err() error {
	d.mu.Lock()
	armed, released := d.armed, d.released
	d.mu.Unlock()
	if armed != nil {
		return armed.Err()
	}
	if err := d.Context.Err(); err != nil {
		return err
	}
	if released {
		return context.Canceled
	}
	if !time.Now().Before(d.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value is the armed context's Value: the context package finds a parent's
// cancellation through Value, so a context derived from d is cancelled with
// the armed context, without a goroutine of its own.
func (d *deadlineCtx) Value(key any) any { return d.arm().Value(key) }
