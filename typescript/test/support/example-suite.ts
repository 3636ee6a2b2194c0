// The end-to-end suite of examples/paidtools-ts (built) over one transport,
// charging a real stipend serve (memory store), driven by the SDK's own
// Client: exact charges under concurrency, replays, the variable cost, a
// failing tool's hold released, every refusal kind returned (never thrown),
// and Stipend stopped mid-session.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { META } from '@stipend-mcp/stipend';

import { example } from './example.js';
import { type Session, type TransportName, call, charged, refused } from './mcp.js';
import { type Stipend, consumptions, credits, fund, startStipend } from './stipend.js';

/** A Stipend URL nothing listens on: a port taken and given back. */
async function unreachableURL(): Promise<string> {
  const srv = createServer().listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as { port: number };
  srv.close();
  await once(srv, 'close');
  return `http://127.0.0.1:${port}`;
}

const OSLO = { city: 'Oslo' };
const PURCHASE_URL = 'https://example.com/buy';

/**
 * The end-to-end suite of the example over transport. Its tests run at once
 * (each with agents of its own), as calls from many hosts would.
 */
export function exampleSuite(transport: TransportName): void {
  describe(`examples/paidtools-ts over ${transport}`, { concurrency: true }, () => {
    let stipend: Stipend;
    let s: Session;
    before(async () => {
      stipend = await startStipend();
      s = await example(transport, stipend, { PAIDTOOLS_PURCHASE_URL: PURCHASE_URL });
    });
    after(async () => {
      await s?.close();
      await stipend?.stop();
    });
    const agent = (name: string): string => `${transport}-${name}`;

    test('tools/list shows each price and when it is charged', () => {
      const prices = Object.fromEntries([...s.tools].map(([name, t]) => [name, t._meta?.[META.price]]));
      assert.deepEqual(prices, {
        echo: { free: true },
        forecast: { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' },
        history: { cost: { cents: 20, currency: 'USD' }, units: 2, policy: 'on_success' },
        hourly: { cost: { cents: 24, currency: 'USD' }, units: 4, policy: 'on_success' },
      });
    });

    test('20 concurrent calls on 100 cents: each charged exactly once, then payment_required', async () => {
      const a = agent('concurrent');
      const ent = await fund(stipend, a, 100);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => call(s, 'forecast', { city: `City ${i}` }, { agent: a })));
      const ids = new Set(results.map((r) => charged(r).consumptionId));
      assert.equal(ids.size, 20, 'every call has its own consumption');
      assert.ok(results.every((r) => charged(r).result === 'consumed'));
      assert.deepEqual(await credits(stipend, ent), { balance: 0, held: 0 });
      assert.equal((await consumptions(stipend, a)).length, 20);

      const r = refused(s, await call(s, 'forecast', OSLO, { agent: a }), 'forecast');
      assert.deepEqual(r, {
        error: 'payment_required',
        message: 'payment required: no entitlement of this agent covers tool forecast',
        service: 'weather',
        tool: 'forecast',
        price: { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' },
        reasons: [{ entitlementId: ent, reason: 'insufficient_balance' }],
        purchaseUrl: PURCHASE_URL,
      });
    });

    test('a call retried with its key is charged once, and answered again', async () => {
      const a = agent('replay');
      const ent = await fund(stipend, a, 50);
      const first = await call(s, 'forecast', OSLO, { agent: a, key: 'retry-1' });
      const again = await call(s, 'forecast', OSLO, { agent: a, key: 'retry-1' });
      assert.equal(charged(again).result, 'replay');
      assert.equal(charged(again).consumptionId, charged(first).consumptionId);
      assert.deepEqual(again.structuredContent, first.structuredContent);
      assert.deepEqual(await credits(stipend, ent), { balance: 45, held: 0 });
    });

    test('hourly is charged what it reports: a cent an hour', async () => {
      const a = agent('hourly');
      const ent = await fund(stipend, a, 50);
      assert.deepEqual(charged(await call(s, 'hourly', { city: 'Oslo', hours: 3 }, { agent: a })).cost, { cents: 3, currency: 'USD' });
      assert.deepEqual(await credits(stipend, ent), { balance: 47, held: 0 });
    });

    test('a failing tool is not charged: its hold is released; its key is then spent', async () => {
      const a = agent('failing');
      const ent = await fund(stipend, a, 50);
      const res = await call(s, 'history', { city: 'Oslo', year: 1900 }, { agent: a, key: 'fail-1' });
      assert.equal(res.isError, true);
      assert.match(JSON.stringify(res.content), /year must be 1950 to 2025/);
      assert.deepEqual(await credits(stipend, ent), { balance: 50, held: 0 });
      assert.deepEqual(await consumptions(stipend, a), []);
      const spent = refused(s, await call(s, 'history', { city: 'Oslo', year: 1900 }, { agent: a, key: 'fail-1' }), 'history');
      assert.equal(spent.error, 'idempotency_key_spent');
    });

    test('agent_unknown and tool_not_priced', async () => {
      assert.equal(refused(s, await call(s, 'forecast', OSLO), 'forecast').error, 'agent_unknown');
      assert.equal(refused(s, await call(s, 'nowcast', OSLO, { agent: agent('x') }), 'nowcast').error, 'tool_not_priced');
      assert.equal((await call(s, 'echo', { text: 'free' })).isError, undefined, 'a free tool needs no agent');
    });

    test('idempotency_key_conflict: a key reused after the price changed', async () => {
      const a = agent('conflict');
      await fund(stipend, a, 100);
      charged(await call(s, 'forecast', OSLO, { agent: a, key: 'conflict-1' }));
      const prices = { echo: { free: true }, forecast: { cost: { cents: 7, currency: 'USD' } }, history: { free: true }, hourly: { free: true } };
      const repriced = await example(transport, stipend, { PAIDTOOLS_PRICES: JSON.stringify(prices) });
      try {
        assert.deepEqual(repriced.tools.get('forecast')?._meta?.[META.price], { cost: { cents: 7, currency: 'USD' }, units: 1, policy: 'on_success' });
        assert.equal(refused(repriced, await call(repriced, 'forecast', OSLO, { agent: a, key: 'conflict-1' }), 'forecast').error, 'idempotency_key_conflict');
      } finally {
        await repriced.close();
      }
    });

    test('billing_error: a wrong host key', async () => {
      const wrong = await example(transport, { url: stipend.url, keys: { host: 'not-a-key' } });
      try {
        assert.equal(refused(wrong, await call(wrong, 'forecast', OSLO, { agent: agent('x') }), 'forecast').error, 'billing_error');
      } finally {
        await wrong.close();
      }
    });

    test('Stipend unreachable: billing_unavailable, retryable; with PAIDTOOLS_FAIL_OPEN the call runs unbilled', async () => {
      const url = await unreachableURL();
      const down = await example(transport, { url, keys: { host: stipend.keys.host } });
      try {
        const r = refused(down, await call(down, 'forecast', OSLO, { agent: agent('x') }), 'forecast');
        assert.deepEqual([r.error, r.retryable], ['billing_unavailable', true]);
      } finally {
        await down.close();
      }
      const open = await example(transport, { url, keys: { host: stipend.keys.host } }, { PAIDTOOLS_FAIL_OPEN: 'true' });
      try {
        const res = await call(open, 'forecast', OSLO, { agent: agent('x') });
        assert.equal(res.isError, undefined);
        assert.equal(res._meta?.[META.unbilled], true);
      } finally {
        await open.close();
      }
    });

    test('Stipend stopped mid-session: calls are refused, retryable; the session and free tools go on', async () => {
      const own = await startStipend();
      const session = await example(transport, own);
      try {
        const a = agent('stopped');
        const ent = await fund(own, a, 50);
        charged(await call(session, 'forecast', OSLO, { agent: a }));
        assert.deepEqual(await credits(own, ent), { balance: 45, held: 0 });
        await own.stop();
        const r = refused(session, await call(session, 'forecast', OSLO, { agent: a }), 'forecast');
        assert.deepEqual([r.error, r.retryable], ['billing_unavailable', true]);
        assert.equal((await call(session, 'echo', { text: 'still here' })).structuredContent?.text, 'still here');
      } finally {
        await session.close();
        await own.stop();
      }
    });
  });
}
