package main

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/idempotency/pgledger"
	"github.com/stipend-mcp/stipend/periodic"
)

// LedgerNamespace returns the deployment namespace of the idempotency
// ledger. Deployments that share a database already differ by collection
// prefix, so the prefix identifies the deployment.
func LedgerNamespace(collectionPrefix string) string {
	return "stipend/" + collectionPrefix
}

// openLedger returns the ledger for the configured store, on the store's
// database: Firestore or PostgreSQL beside those stores, memory beside the
// memory store.
func (m *Main) openLedger(db database) idempotency.Ledger {
	c := m.Config
	collection := idempotency.CollectionName(LedgerNamespace(c.CollectionPrefix))
	switch c.Store {
	case StoreMemory:
		m.Logger.Warn("idempotency ledger in memory: development only, not durable, not horizontally safe")
		return memledger.New(collection)
	case StorePostgres:
		// Rows of the table idempotency_ledger, under the deployment's namespace
		// (its column "collection"): PostgreSQL has no collections.
		m.Logger.Info("idempotency ledger on postgres", "table", "idempotency_ledger", "namespace", collection)
		l := pgledger.New(db.postgres, collection)
		m.startLedgerPurge(l)
		return l
	}
	m.Logger.Info("idempotency ledger on firestore", "collection", collection, "database", c.FirestoreDatabase)
	return fsledger.New(db.firestore, collection)
}

// useLedger opens the ledger on db and puts it in front of the
// key-requiring routes of srv (api.LedgerRoutes).
func (m *Main) useLedger(srv *api.Server, db database) {
	ledger := m.openLedger(db)
	opts := idempotency.Options{
		Namespace:   LedgerNamespace(m.Config.CollectionPrefix),
		Retention:   m.Config.LedgerRetention,
		Development: m.Config.Development(),
		Logger:      m.Logger,
		// The ledger shares the store's database (Firestore: its client;
		// PostgreSQL: its pool; memory: its process), so the store checks
		// its fences, and an in-progress key whose change never committed
		// heals itself.
		Fenced: true,
	}
	m.failpoints.arm(m, &opts) // nothing outside the crash test's build
	srv.UseLedger(ledger, opts)
}

// How the PostgreSQL ledger's expired results are deleted: every
// purgeInterval, in rounds of purgeBatch rows. (Firestore deletes them by
// its TTL policy.) Every instance may purge; deleting a row twice is a no-op.
const (
	purgeInterval = time.Hour
	purgeBatch    = 1000
)

// startLedgerPurge deletes l's expired results in the background until
// Close.
func (m *Main) startLedgerPurge(l *pgledger.Ledger) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Run(ctx, purgeInterval, func(ctx context.Context) {
			for {
				n, err := l.Purge(ctx, time.Now(), purgeBatch)
				if err != nil {
					m.Logger.Warn("idempotency ledger purge", "err", err)
				}
				if err != nil || n < purgeBatch {
					return
				}
			}
		})
	}()
	m.closers = append(m.closers, func() error { cancel(); <-done; return nil })
}
