package firestore

import (
	"sync"

	"github.com/stipend-mcp/stipend/entitlement"
)

// A capture or release names only the hold, so it first reads the hold's
// document: to find the lane of its entitlement, and to give the batch the
// hold, whose fields but its status never change (holds.go, batch.go). The
// instance that authorized a hold already knows all that, and that is the
// usual case (the gate that authorized a call captures or releases it): it
// remembers the holds it authorized and skips that read for them. What it
// remembers is a copy of the hold as authorized, never its state: the
// batch's transaction still decides, from the registry it reads, whether
// the hold is open.

// maxRemembered bounds the holds remembered; past it, an arbitrary one is
// forgotten for each new one.
const maxRemembered = 1 << 14

// remembered holds the open holds this instance authorized, by document ID.
type remembered struct {
	mu sync.Mutex
	m  map[string]entitlement.Hold
}

func (r *remembered) put(h *entitlement.Hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]entitlement.Hold)
	}
	if _, ok := r.m[h.ID]; !ok && len(r.m) >= maxRemembered {
		for id := range r.m {
			delete(r.m, id)
			break
		}
	}
	r.m[h.ID] = *h
}

// get returns the hold id as authorized, if remembered.
func (r *remembered) get(id string) (keyDoc, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m[id]
	if !ok {
		return keyDoc{}, false
	}
	return keyDoc{Hold: &h}, true
}

func (r *remembered) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}
