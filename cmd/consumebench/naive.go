package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/entitlement"
)

var errInsufficient = errors.New("insufficient balance")

// naiveConsume charges one call in its own transaction, with the Firestore
// client's default retry policy. It writes the same documents as the store
// (the entitlement's credits.balance.cents and a consumption), so the
// balance check applies to it unchanged.
func naiveConsume(ctx context.Context, client *firestore.Client, prefix, agent, ent, key string) error {
	entRef := client.Collection(prefix + "entitlements").Doc(ent)
	consRef := client.Collection(prefix + "consumptions").Doc(entitlement.ConsumptionKey(agent, key))
	return client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(consRef); err == nil {
			return nil // replay: already charged
		} else if status.Code(err) != codes.NotFound {
			return err
		}
		snap, err := tx.Get(entRef)
		if err != nil {
			return err
		}
		v, err := snap.DataAt("credits.balance.cents")
		if err != nil {
			return err
		}
		balance, ok := v.(int64)
		if !ok {
			return fmt.Errorf("balance is %T", v)
		}
		if balance < cost {
			return errInsufficient
		}
		now := time.Now().UTC()
		if err := tx.Update(entRef, []firestore.Update{{Path: "credits.balance.cents", Value: balance - cost}}); err != nil {
			return err
		}
		return tx.Create(consRef, map[string]any{
			"id": consRef.ID, "agentId": agent, "entitlementId": ent, "entitlementType": "credits",
			"service": "bench", "tool": "call", "idempotencyKey": key, "units": int64(1), "occurredAt": now,
			"fingerprint": "naive", "cost": map[string]any{"cents": int64(cost), "currency": "USD"},
			"balanceAfter": map[string]any{"cents": balance - cost, "currency": "USD"},
		})
	})
}
