package coalesce

import "runtime"

// Pause holds back key's lane so that a test can queue chosen calls and
// have them applied as one batch: waitQueued blocks until n calls are
// queued, resume starts the drainer. A busy lane is waited for first.
// Nothing in the service calls it (the linker leaves it out of the binary).
func (l *Lanes[Op, Res]) Pause(key string) (waitQueued func(n int), resume func()) {
	l.mu.Lock()
	for l.m[key] != nil {
		// The drainer of the calls before is on its way out: its next
		// take finds the lane empty and closes it.
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
	}
	ln := &lane[Op, Res]{arrived: make(chan struct{}, 1)}
	l.m[key] = ln // a present lane: add starts no drainer
	l.wg.Add(1)
	l.mu.Unlock()
	waitQueued = func(n int) {
		for {
			l.mu.Lock()
			k := len(ln.q)
			l.mu.Unlock()
			if k >= n {
				return
			}
			<-ln.arrived // no drainer runs, so every add signals the caller
		}
	}
	return waitQueued, func() { go l.drain(key) }
}
