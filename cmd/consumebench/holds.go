package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// holdMax is the most a hold reserves; its capture charges cost, so every
// capture also returns a remainder.
const holdMax = 2 * cost

// runHolds is the -mode holds run: on one entitlement each, c.callers
// callers make plain consumes, and c.callers callers make authorize+capture
// pairs, c.rounds times, the order alternating from round to round; each
// round sets the pairs' rate against its consumes'. A short round of each
// first warms the connections and the emulator, and is not shown.
func runHolds(ctx context.Context, c config, host string, out io.Writer) error {
	client, err := firestore.NewClient(ctx, projectID)
	if err != nil {
		return err
	}
	defer client.Close()
	fmt.Fprintf(out, "consumebench -mode holds on the Firestore emulator at %s, %s\n\n", host, time.Now().UTC().Format(time.RFC3339))
	type path struct {
		name string
		mk   pathFunc
	}
	paths := []path{{"consume", stipendPath}, {"hold+capture", holdPath}}
	name := fmt.Sprintf("%d callers, 1 entitlement", c.callers)
	for _, p := range paths {
		if _, err := scenario(ctx, client, c, "warm-up", p.name, c.callers, 1, max(c.calls/4, 1), p.mk); err != nil {
			return err
		}
	}
	var results []result
	ratios := make([]float64, c.rounds)
	for round := range c.rounds {
		byPath := map[string]result{}
		for i := range paths {
			p := paths[(i+round)%len(paths)]
			r, err := scenario(ctx, client, c, name, p.name, c.callers, 1, c.calls, p.mk)
			if err != nil {
				return err
			}
			r.name = fmt.Sprintf("round %d: %s", round+1, name)
			results = append(results, r)
			byPath[p.name] = r
		}
		ratios[round] = rate(byPath["hold+capture"]) / rate(byPath["consume"])
	}
	printTable(out, results)
	printRoundRatios(out, "authorize+capture pairs/s against the consumes/s of the same round:", ratios)
	return nil
}

// printRoundRatios prints a ratio per round, then their median and range.
func printRoundRatios(out io.Writer, title string, ratios []float64) {
	fmt.Fprintln(out, "\n"+title)
	for i, r := range ratios {
		fmt.Fprintf(out, "  round %d: %.2fx\n", i+1, r)
	}
	sorted := slices.Clone(ratios)
	slices.Sort(sorted)
	fmt.Fprintf(out, "  median %.2fx (range %.2fx – %.2fx)\n", sorted[len(sorted)/2], sorted[0], sorted[len(sorted)-1])
}

func rate(r result) float64 { return float64(r.ok) / r.wall.Seconds() }

// holdPath is one two-step charge: Store.Authorize of holdMax, then
// Store.CaptureHold of cost.
func holdPath(_ *firestore.Client, s *fsstore.Store, _ string) consumeFunc {
	return func(ctx context.Context, ent, key string) error {
		max := money.Money{Cents: holdMax, Currency: "USD"}
		req := entitlement.HoldRequest{ConsumeRequest: request(ent, key)}
		req.Cost = &max
		res, err := s.Authorize(ctx, req)
		if err != nil {
			return fmt.Errorf("authorize: %w", err)
		}
		if res.Outcome != store.Held {
			return fmt.Errorf("authorize: outcome %s %v", res.Outcome, res.Denials)
		}
		charged := money.Money{Cents: cost, Currency: "USD"}
		captured, err := s.CaptureHold(ctx, res.Hold.ID, agentID, entitlement.Amount{Cost: &charged})
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if captured.Outcome != store.Captured {
			return fmt.Errorf("capture: outcome %s", captured.Outcome)
		}
		return nil
	}
}
