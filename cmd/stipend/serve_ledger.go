package main

import (
	"os"
	"syscall"

	"cloud.google.com/go/firestore"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
)

// FailpointEnv names the environment variable of the test failpoint: with
// the value FailpointLedgerAfterHandler, a development server kills itself
// (SIGKILL) after the first key-requiring write has answered and before the
// ledger records it, to test crash recovery. Production ignores it.
const FailpointEnv = "STIPEND_TEST_FAILPOINT"

// FailpointLedgerAfterHandler is the failpoint's one value.
const FailpointLedgerAfterHandler = "ledger-after-handler"

// LedgerNamespace returns the deployment namespace of the idempotency
// ledger. Deployments that share a database already differ by collection
// prefix, so the prefix identifies the deployment.
func LedgerNamespace(collectionPrefix string) string {
	return "stipend/" + collectionPrefix
}

// openLedger returns the ledger for the configured store: Firestore beside
// the Firestore store (on its client), memory beside the memory store.
func (m *Main) openLedger(client *firestore.Client) idempotency.Ledger {
	c := m.Config
	collection := idempotency.CollectionName(LedgerNamespace(c.CollectionPrefix))
	if c.Store == StoreMemory {
		m.Logger.Warn("idempotency ledger in memory: development only, not durable, not horizontally safe")
		return memledger.New(collection)
	}
	m.Logger.Info("idempotency ledger on firestore", "collection", collection, "database", c.FirestoreDatabase)
	return fsledger.New(client, collection)
}

// useLedger opens the ledger (on client, nil on the memory store) and puts
// it in front of the key-requiring routes of srv (api.LedgerRoutes).
func (m *Main) useLedger(srv *api.Server, client *firestore.Client) {
	ledger := m.openLedger(client)
	opts := idempotency.Options{
		Namespace:   LedgerNamespace(m.Config.CollectionPrefix),
		Retention:   m.Config.LedgerRetention,
		Development: m.Config.Development(),
		Logger:      m.Logger,
	}
	if m.Config.Development() && os.Getenv(FailpointEnv) == FailpointLedgerAfterHandler {
		m.Logger.Warn("test failpoint armed: the process kills itself after the first key-requiring write", "failpoint", FailpointLedgerAfterHandler)
		opts.AfterHandler = func(echo.Context) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never complete the ledger
		}
	}
	srv.UseLedger(ledger, opts)
}
