package firestore

import "runtime"

// PauseLane holds back the calls queued on the lane of entitlementID: a
// test queues several and then calls resume, which applies them as one
// batch (up to the batch limits). waitQueued blocks until n calls are
// queued. A busy lane is waited for first. Only tests compile this file.
func PauseLane(s *Store, entitlementID string) (waitQueued func(n int), resume func()) {
	s.lanes.mu.Lock()
	if s.lanes.m == nil {
		s.lanes.m = make(map[string]*lane)
	}
	for s.lanes.m[entitlementID] != nil {
		// The drainer of the calls before is on its way out: its next
		// take finds the lane empty and closes it.
		s.lanes.mu.Unlock()
		runtime.Gosched()
		s.lanes.mu.Lock()
	}
	ln := &lane{arrived: make(chan struct{}, 1)}
	s.lanes.m[entitlementID] = ln // a present lane: add starts no drainer
	s.lanes.mu.Unlock()
	waitQueued = func(n int) {
		for {
			s.lanes.mu.Lock()
			k := len(ln.q)
			s.lanes.mu.Unlock()
			if k >= n {
				return
			}
			<-ln.arrived // no drainer runs, so every add signals the test
		}
	}
	return waitQueued, func() { go s.drain(entitlementID) }
}
