//go:build failpoint

package main

import (
	"os"
	"syscall"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
)

// This file is compiled only into the crash test's build of stipend
// (go build -tags failpoint, see ledger_crash_test.go); the shipped binary
// has no failpoint (failpoint_off.go).

// failpointEnv names the failpoint's environment variable. With the value
// failpointLedgerAfterHandler, a development server kills itself (SIGKILL)
// after the first key-requiring write has answered and before the ledger
// records it.
const (
	failpointEnv                = "STIPEND_TEST_FAILPOINT"
	failpointLedgerAfterHandler = "ledger-after-handler"
)

// failpoints are the failpoints the environment armed.
type failpoints struct{ ledgerAfterHandler bool }

// readFailpoints reads the failpoints from the environment env.
func readFailpoints(env map[string]string) failpoints {
	return failpoints{ledgerAfterHandler: env[failpointEnv] == failpointLedgerAfterHandler}
}

// arm puts the armed failpoints into the ledger's options, in development
// only.
func (f failpoints) arm(m *Main, opts *idempotency.Options) {
	if !f.ledgerAfterHandler || !m.Config.Development() {
		return
	}
	m.Logger.Warn("test failpoint armed: the process kills itself after the first key-requiring write", "failpoint", failpointLedgerAfterHandler)
	opts.AfterHandler = func(echo.Context) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never complete the ledger
	}
}
