package main

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"
)

// openFirestore opens a Firestore client on c's project and database. It is
// the one way stipend opens Firestore: serve opens one client for its store
// and ledger, and `stipend ledger` one for the rows it reconciles.
func openFirestore(ctx context.Context, c Config) (*firestore.Client, error) {
	project := c.FirestoreProject
	if project == "" {
		project = firestore.DetectProjectID
	}
	client, err := firestore.NewClientWithDatabase(ctx, project, c.FirestoreDatabase)
	if err != nil {
		return nil, fmt.Errorf("firestore client (project %q, database %q): %w", c.FirestoreProject, c.FirestoreDatabase, err)
	}
	return client, nil
}
