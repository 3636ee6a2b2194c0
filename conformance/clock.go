package conformance

import (
	"sync"
	"time"
)

// Start is where every suite clock starts: a whole second in UTC, so stored
// instants survive backends with microsecond precision unchanged.
var Start = time.Date(2026, time.March, 14, 9, 26, 53, 0, time.UTC)

// Clock is a controllable clock, safe for concurrent use. It moves only when
// a test calls Advance or Set.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at Start.
func NewClock() *Clock { return &Clock{now: Start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
}
