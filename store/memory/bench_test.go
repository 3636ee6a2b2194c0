package memory_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

// benchStore returns a store with one credits entitlement large enough for
// any benchmark run, and the request to charge it (the key is set per call).
func benchStore(b *testing.B) (*memory.Store, entitlement.ConsumeRequest) {
	b.Helper()
	s := memory.New()
	now := time.Now().UTC()
	_, err := s.CreateEntitlement(context.Background(), entitlement.Entitlement{
		ID: "ent-1", AgentID: "agent-1", Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "search"}, Status: entitlement.StatusActive, CreatedAt: now,
		Credits: entitlement.Credits{
			Balance: money.Money{Cents: money.MaxCents, Currency: "USD"},
			Granted: money.Money{Cents: money.MaxCents, Currency: "USD"},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	req := entitlement.ConsumeRequest{
		AgentID: "agent-1", Service: "search", Tool: "query",
		Cost: &money.Money{Cents: 1, Currency: "USD"},
	}
	return s, req
}

// BenchmarkCheckAndConsume charges one credits entitlement with unique keys,
// from one goroutine, then from 8 (RunParallel starts parallelism ×
// GOMAXPROCS goroutines: 8 whenever GOMAXPROCS divides 8). The first
// sub-benchmark is the baseline the others are read against, in the same
// run: the least an exactly-once debit can do in Go (see bareDebit).
func BenchmarkCheckAndConsume(b *testing.B) {
	b.Run("baseline=bare-map", func(b *testing.B) {
		d := bareDebit{balance: money.MaxCents, seen: make(map[bareKey]*bareCharge)}
		b.ReportAllocs()
		heap := startHeap()
		cpu := startCPU()
		b.ResetTimer()
		for i := range b.N {
			if !d.charge("agent-1", "key-"+strconv.Itoa(i), 1) {
				b.Fatal("bare debit refused")
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "consumes/s")
		cpu.report(b)
		heap.report(b, &d)
	})
	b.Run("goroutines=1", func(b *testing.B) {
		s, req := benchStore(b)
		ctx := context.Background()
		b.ReportAllocs()
		heap := startHeap()
		cpu := startCPU()
		b.ResetTimer()
		for i := range b.N {
			req.IdempotencyKey = "key-" + strconv.Itoa(i)
			res, err := s.CheckAndConsume(ctx, req)
			if err != nil || res.Outcome != store.Consumed {
				b.Fatalf("CheckAndConsume = %s, %v", res.Outcome, err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "consumes/s")
		cpu.report(b)
		heap.report(b, s)
	})
	b.Run("goroutines=8", func(b *testing.B) {
		s, req := benchStore(b)
		ctx := context.Background()
		var next atomic.Int64
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		cpu := startCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			r := req
			for pb.Next() {
				r.IdempotencyKey = "key-" + strconv.FormatInt(next.Add(1), 10)
				res, err := s.CheckAndConsume(ctx, r)
				if err != nil || res.Outcome != store.Consumed {
					b.Errorf("CheckAndConsume = %s, %v", res.Outcome, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "consumes/s")
		cpu.report(b)
	})
}

// bareDebit is the baseline: under a mutex, look the (agent, key) pair up in
// a Go map, keep a record of the charge and debit a balance. No validation,
// no fingerprint, no scope or candidate selection, no list order, no copies.
type bareDebit struct {
	mu      sync.Mutex
	balance int64
	seen    map[bareKey]*bareCharge
}

type bareKey struct{ agent, key string }

type bareCharge struct {
	cents, balanceAfter int64
	at                  time.Time
}

func (d *bareDebit) charge(agent, key string, cents int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := bareKey{agent, key}
	if d.seen[k] != nil {
		return true
	}
	if d.balance < cents {
		return false
	}
	d.balance -= cents
	d.seen[k] = &bareCharge{cents: cents, balanceAfter: d.balance, at: time.Now()}
	return true
}

// heapGauge measures the live heap a benchmark leaves behind per call: what
// each stored consumption costs in memory (and in GC marking work).
type heapGauge struct{ start uint64 }

func startHeap() heapGauge { return heapGauge{liveHeap()} }

// report is called at the end of the timed loop; keep is what holds the
// stored state, kept alive until the heap is measured.
func (h heapGauge) report(b *testing.B, keep any) {
	b.StopTimer()
	if live := liveHeap(); live > h.start {
		b.ReportMetric(float64(live-h.start)/float64(b.N), "live-B/consume")
	}
	runtime.KeepAlive(keep)
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// cpuClock measures the CPU time the process spends (all threads, GC
// included), so a benchmark on a shared, loaded machine can also report
// throughput per CPU-second, which the other processes do not distort.
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) report(b *testing.B) {
	if used := processCPU() - c.start; used > 0 {
		b.ReportMetric(float64(b.N)/used.Seconds(), "consumes/cpu-s")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
