package firestore

import (
	"context"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/store/internal/coalesce"
)

// The consume path makes a point read per call before its transaction (the
// consumption key, in charge.Consume). Under load, those reads, not the
// transactions, are most of the requests. So point reads on that path share
// requests: a read issued while maxReaders GetAlls are in flight waits for
// one of them to return and then goes out in the next GetAll with every
// read that queued meanwhile. A lone read is one request; no timer delays
// anything. Every read still starts after its caller asked, so it sees
// every write committed before the call. Several readers, not one: a
// stalled GetAll holds up only the reads it carries, not every read of the
// instance.

// maxReadBatch bounds the documents of one GetAll; maxReaders the GetAlls
// in flight at once.
const (
	maxReadBatch = 300
	maxReaders   = 4
)

type readReq struct {
	ctx  context.Context // the reader's
	ref  *firestore.DocumentRef
	done chan readResult // buffered
}

type readResult struct {
	snap *firestore.DocumentSnapshot
	err  error
}

// reader queues point reads; running drainer goroutines take from the queue.
type reader struct {
	mu      sync.Mutex
	q       []*readReq
	running int
}

// get reads one document through the shared queue. A missing document is
// a snapshot whose Exists() is false, not an error.
func (s *Store) get(ctx context.Context, ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
	snaps, err := s.getAll(ctx, []*firestore.DocumentRef{ref})
	if err != nil {
		return nil, err
	}
	return snaps[0], nil
}

// getAll reads documents through the shared queue, in the order of refs.
func (s *Store) getAll(ctx context.Context, refs []*firestore.DocumentRef) ([]*firestore.DocumentSnapshot, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	rs := make([]*readReq, len(refs))
	for i, ref := range refs {
		rs[i] = &readReq{ctx: ctx, ref: ref, done: make(chan readResult, 1)}
	}
	s.reads.mu.Lock()
	s.reads.q = append(s.reads.q, rs...)
	start := s.reads.running < maxReaders
	if start {
		s.reads.running++
	}
	s.reads.mu.Unlock()
	if start && !s.bg.goFn(s.drainReads) {
		// The store is closed: no goroutine may start, so this caller
		// drains the queue itself, serving its own reads and every read
		// queued behind a drainer that will never run. (Going alone and
		// leaving the count raised stranded reads that queued meanwhile:
		// with no deadline they waited for ever.)
		s.drainReads()
	}
	snaps := make([]*firestore.DocumentSnapshot, len(rs))
	for i, r := range rs {
		select {
		case res := <-r.done:
			if res.err != nil {
				return nil, res.err
			}
			snaps[i] = res.snap
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return snaps, nil
}

func (s *Store) drainReads() {
	for {
		s.reads.mu.Lock()
		n := min(len(s.reads.q), maxReadBatch)
		if n == 0 {
			s.reads.running--
			s.reads.mu.Unlock()
			return
		}
		batch := s.reads.q[:n:n]
		s.reads.q = s.reads.q[n:]
		if len(s.reads.q) == 0 {
			s.reads.q = nil
		}
		s.reads.mu.Unlock()

		refs := make([]*firestore.DocumentRef, len(batch))
		ctxs := make([]context.Context, len(batch))
		for i, r := range batch {
			refs[i], ctxs[i] = r.ref, r.ctx
		}
		// Bounded by its readers' deadlines, so a stalled read holds up
		// the reads it carries no longer than its readers wait.
		ctx, stop := coalesce.Shared(ctxs, readTimeout)
		snaps, err := s.client.GetAll(ctx, refs)
		stop()
		for i, r := range batch {
			if err != nil {
				r.done <- readResult{err: err}
				continue
			}
			r.done <- readResult{snap: snaps[i]}
		}
	}
}

// readTimeout bounds one shared GetAll for readers without a deadline.
const readTimeout = 30 * time.Second
