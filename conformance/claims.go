package conformance

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// jobClaimTests are the contract of store.Claimer.
var jobClaimTests = []subtest{
	{"ClaimJobTurns", testClaimJobTurns},
	{"ClaimJobOneWinner", testClaimJobOneWinner},
}

func claimer(t *testing.T, s store.EntitlementStore) store.Claimer {
	t.Helper()
	c, ok := s.(store.Claimer)
	if !ok {
		t.Fatalf("%T does not implement store.Claimer", s)
	}
	return c
}

func claimJob(t *testing.T, c store.Claimer, name, owner string, until time.Time) bool {
	t.Helper()
	return must(c.ClaimJob(t.Context(), name, owner, until))(t, "ClaimJob(%s, %s)", name, owner)
}

// testClaimJobTurns: a free job goes to the first claimant; another owner
// is refused until the claim ends, by the store's clock; the holder may
// renew; jobs are independent.
func testClaimJobTurns(t *testing.T, s store.EntitlementStore, clock *Clock) {
	c := claimer(t, s)
	job := "job-" + newAgent()
	if !claimJob(t, c, job, "a", clock.Now().Add(time.Minute)) {
		t.Fatal("the first claim of a free job was refused")
	}
	if claimJob(t, c, job, "b", clock.Now().Add(time.Minute)) {
		t.Error("another owner won a job claimed for another minute")
	}
	if !claimJob(t, c, "other-"+job, "b", clock.Now().Add(time.Minute)) {
		t.Error("a claim of another job was refused")
	}
	if !claimJob(t, c, job, "a", clock.Now().Add(2*time.Minute)) {
		t.Error("the holder's renewal was refused")
	}
	clock.Advance(90 * time.Second)
	if claimJob(t, c, job, "b", clock.Now().Add(time.Minute)) {
		t.Error("another owner won before the renewed claim ended")
	}
	clock.Advance(time.Minute)
	if !claimJob(t, c, job, "b", clock.Now().Add(time.Minute)) {
		t.Error("a claim after the last one ended was refused")
	}
	if claimJob(t, c, job, "a", clock.Now().Add(time.Minute)) {
		t.Error("the old holder won back a job another owner holds")
	}
	if _, err := c.ClaimJob(t.Context(), "", "a", clock.Now()); store.CodeOf(err) != store.CodeInvalid {
		t.Errorf("ClaimJob without a name: %v, want Invalid", err)
	}
}

// testClaimJobOneWinner: of 16 concurrent claims of one free job, exactly
// one wins.
func testClaimJobOneWinner(t *testing.T, s store.EntitlementStore, clock *Clock) {
	c := claimer(t, s)
	job := "race-" + newAgent()
	var won atomic.Int64
	together(16, func(i int) {
		ok, err := c.ClaimJob(t.Context(), job, fmt.Sprint("owner-", i), clock.Now().Add(time.Minute))
		for try := 0; try < 3 && store.CodeOf(err) == store.CodeUnavailable; try++ {
			ok, err = c.ClaimJob(t.Context(), job, fmt.Sprint("owner-", i), clock.Now().Add(time.Minute))
		}
		if err != nil {
			t.Errorf("ClaimJob: %v", err)
		}
		if ok {
			won.Add(1)
		}
	})
	if n := won.Load(); n != 1 {
		t.Errorf("%d of 16 concurrent claims of a free job won, want 1", n)
	}
}
