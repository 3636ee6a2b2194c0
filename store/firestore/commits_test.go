package firestore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/emulator"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// commitLog records the documents each commit a client sent wrote, as the
// emulator received them: how a test sees what one transaction wrote.
type commitLog struct {
	mu      sync.Mutex
	commits [][]string // per commit, the written documents' paths within the database
}

func (l *commitLog) record(req *firestorepb.CommitRequest) {
	var docs []string
	for _, w := range req.GetWrites() {
		name := w.GetUpdate().GetName()
		if name == "" {
			name = w.GetDelete()
		}
		_, path, _ := strings.Cut(name, "/documents/")
		docs = append(docs, path)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = append(l.commits, docs)
}

// take returns the commits recorded since the last take.
func (l *commitLog) take() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.commits
	l.commits = nil
	return out
}

// checkCommits fails t if a commit wrote a document twice or wrote more
// than Firestore's 500 writes.
func checkCommits(t *testing.T, commits [][]string) {
	t.Helper()
	for i, docs := range commits {
		if len(docs) > 500 {
			t.Errorf("commit %d: %d writes, want at most 500", i, len(docs))
		}
		sorted := slices.Clone(docs)
		slices.Sort(sorted)
		for j := 1; j < len(sorted); j++ {
			if sorted[j] == sorted[j-1] {
				t.Errorf("commit %d writes %s more than once", i, sorted[j])
			}
		}
	}
}

// fixture is a store on the emulator whose commits are recorded, with a
// clock the test moves, and a plain client to read raw documents.
type fixture struct {
	s      *fsstore.Store
	raw    *firestore.Client
	prefix string
	clock  *conformance.Clock
	log    *commitLog
}

func newFixture(t *testing.T, opts ...fsstore.Option) *fixture {
	t.Helper()
	host := emulator.Host(t)
	log := &commitLog{}
	conn, err := grpc.NewClient(host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulator.OwnerCredentials{}),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, o...)
			if c, ok := req.(*firestorepb.CommitRequest); ok && err == nil {
				log.record(c)
			}
			return err
		}))
	if err != nil {
		t.Fatal(err)
	}
	client, err := firestore.NewClient(context.Background(), emulator.ProjectID, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	f := &fixture{raw: emulator.Client(t), prefix: emulator.Prefix(t), clock: conformance.NewClock(), log: log}
	f.s = fsstore.New(client, append([]fsstore.Option{fsstore.WithCollectionPrefix(f.prefix), fsstore.WithClock(f.clock.Now)}, opts...)...)
	return f
}

// doc reads a raw document of the fixture's store (nil if absent).
func (f *fixture) doc(t *testing.T, collection, id string) map[string]any {
	t.Helper()
	snap, err := f.raw.Collection(f.prefix + collection).Doc(id).Get(context.Background())
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		t.Fatalf("read %s/%s: %v", collection, id, err)
	}
	return snap.Data()
}

// path is a document's path as commitLog records it.
func (f *fixture) path(collection, id string) string { return f.prefix + collection + "/" + id }

// at reads a dotted field of a raw document (nil if absent).
func at(d map[string]any, field string) any {
	var cur any = d
	for _, part := range strings.Split(field, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

func timeAt(d map[string]any, field string) time.Time {
	t, _ := at(d, field).(time.Time)
	return t.UTC()
}
