// Package emulator connects tests to the Firestore emulator that scripts/test
// starts. Without FIRESTORE_EMULATOR_HOST the Firestore suites skip with a
// message, except under CI=true, where a missing emulator fails the test.
package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/testenv"
)

// ProjectID is the project the tests use on the emulator (any ID works there).
const ProjectID = "stipend-test"

var (
	once   sync.Once
	client *firestore.Client
	err    error
)

// Host returns the emulator's host:port, or skips (fails under CI=true) tb
// when no emulator is configured.
func Host(tb testing.TB) string {
	tb.Helper()
	return testenv.Service(tb, "FIRESTORE_EMULATOR_HOST", "the Firestore suites")
}

// Client returns a client for the emulator, shared by the whole test binary.
// Tests isolate their data with Prefix rather than by clearing the emulator,
// so they can run in parallel.
func Client(tb testing.TB) *firestore.Client {
	tb.Helper()
	Host(tb)
	once.Do(func() {
		client, err = firestore.NewClient(context.Background(), ProjectID)
	})
	if err != nil {
		tb.Fatalf("firestore.NewClient on the emulator: %v", err)
	}
	return client
}

// Prefix returns a collection prefix unique to this test, so each test (and
// each subtest that asks) sees an empty store.
func Prefix(tb testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "t" + hex.EncodeToString(b[:]) + "_" + name + "_"
}
