package escrow_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/firestore/internal/escrow"
)

// A lane being released arms no idle check (issue 29, item 12: the check
// re-armed itself after a release and fired on a dropped lane).
func TestLane_NoIdleCheckOnceClosing(t *testing.T) {
	var lanes escrow.Lanes
	ll, _ := lanes.Ensure(&entitlement.Entitlement{ID: "e1"})
	fired := make(chan struct{}, 1)
	ll.ArmIdle(time.Hour, func() {}) // armed while open: Close stops it
	ll.Close()
	ll.ArmIdle(time.Millisecond, func() { fired <- struct{}{} })
	select {
	case <-fired:
		t.Fatal("an idle check armed after Close fired")
	case <-time.After(50 * time.Millisecond):
	}
	if lanes.Lane("e1") != nil || !lanes.Releasing("e1") {
		t.Error("a closing lane is still handed out for charges")
	}
}

// A lane being released starts no refill, and a refill that started before
// is told so by Closing (lease_refill.go checks it once it holds the lane's
// transactions).
func TestLane_NoRefillOnceClosing(t *testing.T) {
	var lanes escrow.Lanes
	ll, _ := lanes.Ensure(&entitlement.Entitlement{ID: "e1"})
	ll.AfterBatch(&entitlement.Entitlement{ID: "e1"}, false, &entitlement.Lease{ID: "l1", Limit: 100})
	ll.Charged("l1", 60, 1, 40, 100) // more than half spent: a refill is due
	if !ll.StartRefill() {
		t.Fatal("StartRefill on an open lane past half its lease = false, want true")
	}
	ll.EndRefill()
	ll.Close()
	if ll.StartRefill() || !ll.Closing() {
		t.Error("a closing lane starts a refill")
	}
}
