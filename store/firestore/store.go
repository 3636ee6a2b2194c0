// Package firestore is the production store, on Google Cloud Firestore in
// Native mode. Every instance of Stipend may share one database: all
// invariants are enforced by Firestore transactions, not by process memory.
package firestore

import (
	"time"

	"cloud.google.com/go/firestore"
)

// Store is the Firestore adapter.
type Store struct {
	client *firestore.Client
	prefix string
	now    func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithCollectionPrefix prepends prefix to every collection name, for running
// several deployments (or test runs) in one database.
func WithCollectionPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithClock makes the store read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns a store on client. The caller owns the client (and chooses
// the project and named database when creating it).
func New(client *firestore.Client, opts ...Option) *Store {
	s := &Store{client: client, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// col returns the collection name with the configured prefix.
func (s *Store) col(name string) *firestore.CollectionRef {
	return s.client.Collection(s.prefix + name)
}
