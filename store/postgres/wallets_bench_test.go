package postgres_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// BenchmarkWalletConsume measures CheckAndConsume on PostgreSQL for wallet
// members beside agents on their own entitlements, in one run: one caller
// (own: an agent with no membership, which runs alone; member: a member
// charging a wallet, which takes the lanes), and 64 callers (own-64: 64
// agents each on its own entitlement; hot-64: 64 callers of one agent on
// its one entitlement, coalesced; wallet-64: 64 members with daily caps on
// one wallet's entitlement, coalesced too). It logs each scenario's ratio
// to its baseline. Without STIPEND_BENCH_WALLETS it skips.
//
//	STIPEND_BENCH_WALLETS=1 scripts/test -run '^$' -bench BenchmarkWalletConsume -benchtime 2000x ./store/postgres/
func BenchmarkWalletConsume(b *testing.B) {
	if on, _ := strconv.ParseBool(os.Getenv("STIPEND_BENCH_WALLETS")); !on {
		b.Skip("set STIPEND_BENCH_WALLETS=1 to measure members' consumes on PostgreSQL")
	}
	const callers = 64
	cfg := migrated(b)
	s := open(b, cfg, 1, func() time.Time { return time.Now() })[0]
	ctx := b.Context()
	now := time.Now()
	grant := func(owner string) {
		e := entitlement.Entitlement{ID: uuid.NewString(), AgentID: owner, Type: entitlement.TypeCredits,
			Scope: entitlement.Scope{Service: "svc"}, CreatedAt: now,
			Credits: entitlement.Credits{Balance: money.Money{Cents: 1 << 40, Currency: "USD"}}}
		if _, err := s.CreateEntitlement(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	wallet := "bench-wallet"
	if _, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: wallet, Kind: entitlement.KindWallet}); err != nil {
		b.Fatal(err)
	}
	grant(wallet)
	grant("hot")
	own, members := make([]string, callers), make([]string, callers)
	for i := range callers {
		own[i], members[i] = fmt.Sprintf("own-%d", i), fmt.Sprintf("member-%d", i)
		grant(own[i])
		caps := entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: money.Money{Cents: 1 << 40, Currency: "USD"}}}
		if _, err := s.AddMember(ctx, entitlement.Membership{WalletID: wallet, MemberID: members[i], Caps: caps}); err != nil {
			b.Fatal(err)
		}
	}
	var key atomic.Int64
	consume := func(b *testing.B, agent string) {
		req := entitlement.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t",
			IdempotencyKey: strconv.FormatInt(key.Add(1), 10), Cost: &money.Money{Cents: 1, Currency: "USD"}}
		res, err := s.CheckAndConsume(b.Context(), req)
		if err != nil || res.Outcome != store.Consumed {
			b.Fatalf("CheckAndConsume(%s) = %s %+v, %v", agent, res.Outcome, res.Denials, err)
		}
	}
	perCall := map[string]float64{}
	run := func(name string, agents []string, parallel bool) {
		b.Run(name, func(b *testing.B) {
			var next atomic.Int64
			start := time.Now()
			if parallel {
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					agent := agents[int(next.Add(1)-1)%len(agents)]
					for pb.Next() {
						consume(b, agent)
					}
				})
			} else {
				for b.Loop() {
					consume(b, agents[0])
				}
			}
			perCall[name] = float64(time.Since(start)) / float64(b.N)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
	run("own", own, false)
	run("member", members, false)
	run("own-64", own, true)
	run("hot-64", []string{"hot"}, true)
	run("wallet-64", members, true)
	if perCall["own"] > 0 && perCall["own-64"] > 0 && perCall["hot-64"] > 0 {
		b.Logf("member / own, one caller: %.2f× the time per call; throughput of wallet-64 / own-64: %.2f×, of wallet-64 / hot-64: %.2f×",
			perCall["member"]/perCall["own"], perCall["own-64"]/perCall["wallet-64"], perCall["hot-64"]/perCall["wallet-64"])
	}
}
