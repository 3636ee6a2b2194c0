// Package testenv decides what a test does when a service or tool that
// scripts/test provides is missing: under CI=true it fails, because CI
// must run every suite (a missing service is a failure there, never a
// skip); otherwise it skips with a message saying what is missing. Only
// tests and their helpers (internal/emulator, internal/pgtest,
// internal/stripemock, internal/nodetest) import it.
package testenv

import (
	"os"
	"testing"
)

// Missing skips tb, or fails it under CI=true, because of what (a
// sentence saying what is missing and who provides it).
func Missing(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s; CI=true, so this fails instead of skipping", what)
	}
	tb.Skip(what + "; skipping")
}

// Service returns the value of the environment variable env, through which
// scripts/test names a service it started for the suites named by suites
// ("the Firestore suites"). When env is not set it calls Missing.
func Service(tb testing.TB, env, suites string) string {
	tb.Helper()
	v := os.Getenv(env)
	if v == "" {
		Missing(tb, env+" is not set: "+suites+" need the service scripts/test starts (run the tests with scripts/test)")
	}
	return v
}
