package main

import (
	"context"
	"fmt"
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
// the Firestore store (same database and client), memory beside the memory
// store.
func (m *Main) openLedger(ctx context.Context) (idempotency.Ledger, error) {
	c := m.Config
	collection := idempotency.CollectionName(LedgerNamespace(c.CollectionPrefix))
	if c.Store == StoreMemory {
		m.Logger.Warn("idempotency ledger in memory: development only, not durable, not horizontally safe")
		return memledger.New(collection), nil
	}
	client := m.firestore
	if client == nil { // the store was not opened by Run
		var err error
		if client, err = m.ledgerClient(ctx); err != nil {
			return nil, err
		}
		m.closers = append(m.closers, client.Close)
	}
	m.Logger.Info("idempotency ledger on firestore", "collection", collection, "database", c.FirestoreDatabase)
	return fsledger.New(client, collection), nil
}

// ledgerClient opens a Firestore client on the configured database.
func (m *Main) ledgerClient(ctx context.Context) (*firestore.Client, error) {
	c := m.Config
	project := c.FirestoreProject
	if project == "" {
		project = firestore.DetectProjectID
	}
	client, err := firestore.NewClientWithDatabase(ctx, project, c.FirestoreDatabase)
	if err != nil {
		return nil, fmt.Errorf("firestore client for the ledger (project %q, database %q): %w", c.FirestoreProject, c.FirestoreDatabase, err)
	}
	return client, nil
}

// useLedger opens the ledger and puts it in front of the key-requiring
// routes of srv (api.LedgerRoutes).
func (m *Main) useLedger(ctx context.Context, srv *api.Server) error {
	ledger, err := m.openLedger(ctx)
	if err != nil {
		return err
	}
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
	return nil
}
