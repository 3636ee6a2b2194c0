// Command httpbench measures POST /v1/consume over real HTTP on 127.0.0.1:
// Stipend's API on the memory store against a bare echo handler that
// returns the same JSON, in the same process and the same run, over the
// same number of keep-alive connections. Rounds alternate between the two
// so machine load hits both alike. It prints a table and exits.
//
//	go run ./api/internal/httpbench -conns 50 -rounds 3 -round 5s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/jsonlog"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store/memory"
)

func main() {
	conns := flag.Int("conns", 50, "concurrent keep-alive connections")
	rounds := flag.Int("rounds", 3, "rounds per target (alternating)")
	round := flag.Duration("round", 5*time.Second, "length of one round")
	warmup := flag.Duration("warmup", time.Second, "warm-up per target before measuring")
	only := flag.String("only", "", `run one target only ("bare" or "stipend"), for profiling`)
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "httpbench:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*conns, *rounds, *round, *warmup, *only); err != nil {
		fmt.Fprintln(os.Stderr, "httpbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// result is what one target did over all its rounds.
type result struct {
	name      string
	ok, fails int64
	elapsed   time.Duration
	cpu       time.Duration // process CPU time (user+system) while it ran
	latencies []time.Duration
}

// cpuTime returns the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(conns, rounds int, round, warmup time.Duration, only string) error {
	stipendURL, hostKey, st, stopStipend, err := startStipend()
	if err != nil {
		return err
	}
	defer stopStipend()
	bareURL, stopBare, err := startBare()
	if err != nil {
		return err
	}
	defer stopBare()

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute,
	}}
	var keyN atomic.Int64
	targets := []*result{{name: "bare echo handler"}, {name: "stipend POST /v1/consume"}}
	urls := []string{bareURL, stipendURL}
	skip := func(i int) bool { return only == "bare" && i == 1 || only == "stipend" && i == 0 }
	var warm [2]result
	for i, u := range urls {
		if !skip(i) {
			drive(client, u, hostKey, conns, warmup, &keyN, &warm[i])
		}
	}
	for r := 0; r < rounds; r++ {
		for i, u := range urls {
			if !skip(i) {
				drive(client, u, hostKey, conns, round, &keyN, targets[i])
			}
		}
	}
	fmt.Printf("POST /v1/consume over HTTP on 127.0.0.1, %d keep-alive connections, %d rounds × %s per target (alternating), GOMAXPROCS=%d, NumCPU=%d\n\n",
		conns, rounds, round, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Printf("| target | requests | errors | req/s | p50 | p99 | CPU µs/request (client+server) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	var rps, cpu [2]float64
	for i, t := range targets {
		slices.Sort(t.latencies)
		if t.elapsed == 0 {
			continue
		}
		rps[i] = float64(t.ok) / t.elapsed.Seconds()
		cpu[i] = float64(t.cpu.Microseconds()) / float64(t.ok+t.fails)
		fmt.Printf("| %s | %d | %d | %.0f | %s | %s | %.1f |\n", t.name, t.ok, t.fails, rps[i],
			pct(t.latencies, 0.50), pct(t.latencies, 0.99), cpu[i])
	}
	if rps[0] > 0 && rps[1] > 0 {
		fmt.Printf("\nthroughput ratio stipend / bare: %.1f%% (wall clock)\n", 100*rps[1]/rps[0])
		fmt.Printf("CPU-bound throughput ratio (bare CPU per request / stipend CPU per request): %.1f%%\n", 100*cpu[0]/cpu[1])
	}
	if !skip(1) {
		if err := checkExact(st, warm[1].ok+targets[1].ok, warm[1].fails+targets[1].fails); err != nil {
			return err
		}
	}
	if rps[1] > 0 {
		fmt.Printf("stipend server-side latency (its own histogram, warm-up included): p50 %s, p99 %s\n", serverQuantile(0.5), serverQuantile(0.99))
	}
	return nil
}

func pct(d []time.Duration, p float64) string {
	if len(d) == 0 {
		return "-"
	}
	v := d[int(float64(len(d)-1)*p)]
	return fmt.Sprintf("%.2f ms", float64(v.Microseconds())/1000)
}

// drive runs conns workers against url for d, each sending consumes with
// fresh idempotency keys, and adds what they did to res.
func drive(client *http.Client, url, key string, conns int, d time.Duration, keyN *atomic.Int64, res *result) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	deadline := time.Now().Add(d)
	start, cpu0 := time.Now(), cpuTime()
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			var ok, fails int64
			body := make([]byte, 0, 256)
			for time.Now().Before(deadline) {
				body = append(body[:0], `{"agentId":"bench-agent","service":"search","tool":"web","idempotencyKey":"k-`...)
				body = strconv.AppendInt(body, keyN.Add(1), 10)
				body = append(body, `","cost":{"cents":1,"currency":"USD"}}`...)
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					fails++
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					fails++
					continue
				}
				lat = append(lat, time.Since(t0))
				ok++
			}
			mu.Lock()
			res.ok += ok
			res.fails += fails
			res.latencies = append(res.latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed += time.Since(start)
	res.cpu += cpuTime() - cpu0
}

// registry is the stipend server's metrics registry.
var registry *prometheus.Registry

// serverQuantile reads quantile q of POST /v1/consume 200 answers from the
// service's own latency histogram (time inside the handler chain, without
// the network and the client): the upper bound of the bucket holding it.
func serverQuantile(q float64) string {
	mfs, err := registry.Gather()
	if err != nil {
		return "?"
	}
	for _, mf := range mfs {
		if mf.GetName() != "stipend_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] != "/v1/consume" || labels["status"] != "200" {
				continue
			}
			h := m.GetHistogram()
			want := q * float64(h.GetSampleCount())
			for _, b := range h.GetBucket() {
				if float64(b.GetCumulativeCount()) >= want {
					return fmt.Sprintf("≤ %g ms", b.GetUpperBound()*1000)
				}
			}
			return "> 5 s"
		}
	}
	return "?"
}

// benchBalance is the balance of the one entitlement the bench charges.
var benchBalance = money.Money{Cents: 1 << 40, Currency: "USD"}

// checkExact checks that the store charged exactly the consumes answered
// 200 (a cent each) and prints so; a run with failed requests cannot tell,
// and says that instead.
func checkExact(st *memory.Store, charged, failed int64) error {
	e, err := st.GetEntitlement(context.Background(), "bench-credits")
	if err != nil {
		return err
	}
	if failed > 0 {
		fmt.Printf("exactness not checked: %d requests failed\n", failed)
		return nil
	}
	if spent := benchBalance.Cents - e.Credits.Balance.Cents; spent != charged {
		return fmt.Errorf("not exact: %d consumes answered 200, the balance went down by %d cents", charged, spent)
	}
	fmt.Printf("exact: %d consumes answered 200 (warm-up included), the balance went down by as many cents\n", charged)
	return nil
}

// startStipend serves the real API, with its JSON access log (to
// io.Discard) and metrics, on a memory store holding one credits
// entitlement big enough for the whole run.
func startStipend() (url, hostKey string, st *memory.Store, stop func(), err error) {
	registry = prometheus.NewRegistry()
	raw, k, err := apikey.Generate("host", apikey.RoleHost, nil)
	if err != nil {
		return "", "", nil, nil, err
	}
	keys, err := apikey.NewSet([]apikey.Key{k})
	if err != nil {
		return "", "", nil, nil, err
	}
	signer, err := receipt.NewEphemeralKeyring()
	if err != nil {
		return "", "", nil, nil, err
	}
	st = memory.New()
	now := time.Now().UTC()
	if _, err := st.CreateEntitlement(context.Background(), entitlement.Entitlement{
		ID: "bench-credits", AgentID: "bench-agent", Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "search"}, Status: entitlement.StatusActive, CreatedAt: now,
		Credits: entitlement.Credits{Balance: benchBalance, Granted: benchBalance},
	}); err != nil {
		return "", "", nil, nil, err
	}
	srv, err := api.New(api.Config{
		Store: st, Keys: keys, Signer: signer,
		Logger:   slog.New(jsonlog.New(io.Discard, jsonlog.CloudLogging(slog.LevelInfo))), // cmd/stipend's
		Registry: registry,
	})
	if err != nil {
		return "", "", nil, nil, err
	}
	u, stop, err := serve(srv.Handler())
	return u, raw, st, stop, err
}

// startBare serves an echo handler that answers every POST /v1/consume
// with the JSON of a real consume answer, doing nothing else.
func startBare() (string, func(), error) {
	cents := int64(1)
	answer, err := json.Marshal(map[string]any{"result": "consumed", "consumption": entitlement.Consumption{
		ID: "3f0c7d8e-8d0a-4b8a-9d0c-2b7e5f6a1c3d", AgentID: "bench-agent", EntitlementID: "bench-credits",
		EntitlementType: entitlement.TypeCredits, Service: "search", Tool: "web", IdempotencyKey: "k-123456",
		Cost: money.Money{Cents: cents, Currency: "USD"}, Units: 1, OccurredAt: time.Now().UTC(),
		BalanceAfter: money.Money{Cents: 1 << 40, Currency: "USD"},
	}})
	if err != nil {
		return "", nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/consume", func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, answer)
	})
	return serve(e)
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String() + "/v1/consume", stop, nil
}
