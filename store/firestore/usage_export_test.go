package firestore

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/stipend-mcp/stipend/entitlement"
)

// SeedConsumptions writes cs as consumption documents in batched writes of
// 500 (Firestore's most per commit), four commits at a time, straight into
// the collection and past the charge path, for benchmarks that need many
// of them (BenchmarkUsage). Only tests compile this file.
func SeedConsumptions(ctx context.Context, s *Store, cs []entitlement.Consumption) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for start := 0; start < len(cs); start += 500 {
		chunk := cs[start:min(start+500, len(cs))]
		g.Go(func() error {
			//lint:ignore SA1019 a WriteBatch is one commit of many writes, which is what seeding wants
			batch := s.client.Batch()
			for i := range chunk {
				batch.Create(s.col(colConsumptions).Doc(chunk[i].ID), keyDocument(&keyDoc{Cons: &chunk[i]}))
			}
			_, err := batch.Commit(ctx)
			return err
		})
	}
	return g.Wait()
}
