package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
)

// SeedConsumptions writes cs as consumption documents through a
// BulkWriter, straight into the collection and past the charge path, for
// benchmarks that need many of them (BenchmarkUsage). Only tests compile
// this file.
func SeedConsumptions(ctx context.Context, s *Store, cs []entitlement.Consumption) error {
	bw := s.client.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(cs))
	for i := range cs {
		job, err := bw.Create(s.col(colConsumptions).Doc(cs[i].ID), consumptionDoc(&cs[i]))
		if err != nil {
			return err
		}
		jobs = append(jobs, job)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return err
		}
	}
	return nil
}
