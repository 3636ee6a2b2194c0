package main

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/store/memory"
	pgstore "github.com/stipend-mcp/stipend/store/postgres"
)

// backend is what every store is: the entitlement store and the webhook
// delivery store, on one database.
type backend interface {
	store.EntitlementStore
	store.DeliveryStore
}

// database is the connection the store and the ledger share: a Firestore
// client, a PostgreSQL pool, or neither (the memory store).
type database struct {
	firestore *firestore.Client
	postgres  *pgxpool.Pool
}

// openDatabase opens the configured store's connection and registers its
// closing with Close. On PostgreSQL it also brings the schema up to date
// (or checks it, with --postgres-migrate=false).
func (m *Main) openDatabase(ctx context.Context) (database, error) {
	c := m.Config
	switch c.Store {
	case StoreFirestore:
		client, err := openFirestore(ctx, c)
		if err != nil {
			return database{}, err
		}
		m.closers = append(m.closers, client.Close)
		return database{firestore: client}, nil
	case StorePostgres:
		pool, err := openPostgres(ctx, c)
		if err != nil {
			return database{}, err
		}
		m.closers = append(m.closers, func() error { pool.Close(); return nil })
		if err := prepareSchema(ctx, c, pool, m.Logger); err != nil {
			return database{}, err
		}
		return database{postgres: pool}, nil
	}
	return database{}, nil
}

// openStore returns the configured store on db.
func (m *Main) openStore(ctx context.Context, db database) backend {
	c := m.Config
	var st backend
	// Closed before the database (closers run last first), once the loops
	// and requests that use it are done.
	defer func() { m.closers = append(m.closers, st.Close) }()
	switch c.Store {
	case StoreMemory:
		st = memory.New()
		return st
	case StorePostgres:
		st = pgstore.New(db.postgres)
		m.Logger.Info("postgres store", postgresAttrs(db.postgres)...)
	default:
		fs := fsstore.New(db.firestore, fsstore.WithCollectionPrefix(c.CollectionPrefix), fsstore.WithLogger(m.Logger))
		st = fs
		m.storeStats = fs.Stats
		m.Logger.Info("firestore store",
			"database", c.FirestoreDatabase, "collectionPrefix", c.CollectionPrefix, "emulator", c.FirestoreEmulatorHost)
		if c.FirestoreEmulatorHost != "" && !c.Development() {
			m.Logger.Warn("production mode on the Firestore emulator (FIRESTORE_EMULATOR_HOST is set): the emulator keeps nothing durable")
		}
	}

	// A failed probe is logged, not fatal: /readyz keeps reporting it, and
	// the platform decides whether to route traffic.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.Ping(pctx); err != nil {
		m.Logger.Warn("the store is not answering yet", "store", c.Store, "err", err)
	}
	return st
}
