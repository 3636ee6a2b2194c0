//go:build failpoint

package main

import (
	"os"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
)

// This file is compiled only into the crash test's build of stipend
// (go build -tags failpoint, see ledger_crash_test.go); the shipped binary
// has no failpoint (failpoint_off.go).

// failpointEnv names the failpoint's environment variable. With the value
// failpointLedgerAfterHandler, a development server kills itself (SIGKILL)
// after the first key-requiring write has answered and before the ledger
// records it; with failpointLedgerBeforeHandler, once the first key is
// reserved and before its handler runs. reclaimAfterEnv, a duration, sets
// how soon the ledger reclaims an unwritten fenced key (instead of the
// handler's bound), so a crash test need not wait for it.
const (
	failpointEnv                 = "STIPEND_TEST_FAILPOINT"
	failpointLedgerAfterHandler  = "ledger-after-handler"
	failpointLedgerBeforeHandler = "ledger-before-handler"
	reclaimAfterEnv              = "STIPEND_TEST_LEDGER_RECLAIM_AFTER"
)

// failpoints are the failpoints the environment armed.
type failpoints struct {
	point        string
	reclaimAfter time.Duration
}

// readFailpoints reads the failpoints from the environment env.
func readFailpoints(env map[string]string) failpoints {
	d, _ := time.ParseDuration(env[reclaimAfterEnv])
	return failpoints{point: env[failpointEnv], reclaimAfter: d}
}

// arm puts the armed failpoints into the ledger's options, in development
// only.
func (f failpoints) arm(m *Main, opts *idempotency.Options) {
	if !m.Config.Development() {
		return
	}
	if f.reclaimAfter > 0 {
		m.Logger.Warn("test setting: unwritten fenced keys are reclaimed early", "after", f.reclaimAfter.String())
		opts.ReclaimAfter = f.reclaimAfter
	}
	kill := func(echo.Context) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never go on
	}
	switch f.point {
	case failpointLedgerAfterHandler:
		m.Logger.Warn("test failpoint armed: the process kills itself after the first key-requiring write", "failpoint", f.point)
		opts.AfterHandler = kill
	case failpointLedgerBeforeHandler:
		m.Logger.Warn("test failpoint armed: the process kills itself once the first key is reserved, before its write", "failpoint", f.point)
		opts.BeforeHandler = kill
	}
}
