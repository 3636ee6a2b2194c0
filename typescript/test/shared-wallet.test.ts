// Shared wallets through the typed client, against the real stipend serve:
// a wallet funded once, members with daily caps, a cap's refusal naming the
// member (memberLimit), the members and an agent's wallets listed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { createStipendClient, memberLimit, type Membership, type StipendClient, type WalletMembership } from '@stipend-mcp/stipend';

import { type Stipend, fund, startStipend } from './support/stipend.js';

describe('shared wallets', () => {
  let stipend: Stipend;
  let admin: StipendClient;
  let host: StipendClient;
  before(async () => {
    stipend = await startStipend();
    admin = createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.admin });
    host = createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host });
  });
  after(() => stipend?.stop());

  const consume = (agentId: string, idempotencyKey: string, cents: number) =>
    host.POST('/v1/consume', { body: { agentId, service: 'weather', tool: 'forecast', idempotencyKey, cost: { cents, currency: 'USD' } } });

  test('members spend the wallet within their caps', async () => {
    const team = 'team-ts';
    const made = await stipend.billing.PUT('/v1/accounts/{agentId}', { params: { path: { agentId: team } }, body: { kind: 'wallet' } });
    assert.equal(made.data?.kind, 'wallet');
    const entitlementId = await fund(stipend, team, 500);
    const daily = { spendLimit: { period: 'day' as const, max: { cents: 20, currency: 'USD' } } };
    for (const [memberId, key] of [['alice-ts', 'add-alice-ts'], ['bob-ts', 'add-bob-ts']] as const) {
      const added = await admin.POST('/v1/wallets/{walletId}/members', {
        params: { path: { walletId: team }, header: { 'Idempotency-Key': key } },
        body: { memberId, caps: daily },
      });
      assert.equal(added.response.status, 201, JSON.stringify(added.error));
      const m: Membership | undefined = added.data;
      assert.equal(m?.memberId, memberId);
      assert.equal(m?.order, 'own_first');
    }
    const bad = await admin.POST('/v1/wallets/{walletId}/members', {
      params: { path: { walletId: team }, header: { 'Idempotency-Key': 'add-self-ts' } },
      body: { memberId: team },
    });
    assert.equal(bad.response.status, 400);
    assert.equal(bad.error?.errors?.[0]?.field, 'memberId');

    const first = await consume('alice-ts', 'ts-a1', 15);
    assert.equal(first.data?.consumption?.walletId, team);
    assert.equal(first.data?.consumption?.entitlementId, entitlementId);
    const over = await consume('alice-ts', 'ts-a2', 6);
    assert.equal(over.response.status, 402);
    const denial = memberLimit(over.error);
    assert.equal(denial?.memberId, 'alice-ts');
    assert.equal(denial?.limit, 'spendLimit');
    assert.equal((await consume('bob-ts', 'ts-b1', 20)).response.status, 200);

    const members = await stipend.billing.GET('/v1/wallets/{walletId}/members', { params: { path: { walletId: team } } });
    assert.deepEqual(members.data?.items.map((m) => m.memberId), ['alice-ts', 'bob-ts']);
    const wallets = await stipend.billing.GET('/v1/accounts/{agentId}/wallets', { params: { path: { agentId: 'alice-ts' } } });
    const w: WalletMembership | undefined = wallets.data?.items[0];
    assert.equal(w?.walletId, team);
    assert.equal(w?.balance.credits[0]?.available.cents, 500 - 35);
    assert.equal(w?.capRoom?.amount?.cents, 5);

    const changed = await admin.PATCH('/v1/wallets/{walletId}/members/{memberId}', {
      params: { path: { walletId: team, memberId: 'alice-ts' } },
      body: { caps: null },
    });
    assert.equal(changed.data?.caps, undefined);
    assert.equal((await consume('alice-ts', 'ts-a2', 6)).response.status, 200);
    const removed = await admin.DELETE('/v1/wallets/{walletId}/members/{memberId}', { params: { path: { walletId: team, memberId: 'bob-ts' } } });
    assert.equal(removed.response.status, 200);
    assert.equal((await consume('bob-ts', 'ts-b2', 1)).response.status, 402);
  });
});
