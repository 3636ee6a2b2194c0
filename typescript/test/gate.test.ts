// The gate in front of an McpServer in process, charging a real Stipend
// (stipend serve, memory store): each policy's decisions, the variable cost,
// replays and every refusal kind, as the SDK's own Client sees them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  Gate,
  type Charge,
  type GateConfig,
  type GateLogger,
  META,
  type Price,
  cents,
  createStipendClient,
  credits,
  creditsOrUnits,
  free,
  reportCost,
  units,
} from '@stipend-mcp/stipend';
import { z } from 'zod';

import { type Session, call, charged, connect, refused } from './support/mcp.js';
import { type Stipend, consumptions, credits as creditsOf, fund, startStipend } from './support/stipend.js';

const PRICES: Record<string, Price> = {
  echo: free(),
  forecast: creditsOrUnits(5, 'USD', 1),
  plain: credits(5, 'USD'),
  fails: credits(5, 'USD'),
  throws: credits(5, 'USD'),
  metered: credits(10, 'USD'),
  slow: credits(5, 'USD'),
  alert: { ...credits(5, 'USD'), policy: 'before' },
  quota: units(2),
};

/** Waits (up to 10 s) until cond holds. */
async function until(cond: () => Promise<boolean>, message: string): Promise<void> {
  for (let i = 0; !(await cond()); i++) {
    assert.ok(i < 500, message);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Log lines the gate wrote, for the assertions that the operator is told. */
class Lines implements GateLogger {
  readonly lines: string[] = [];
  info(m: string): void {
    this.lines.push('info: ' + m);
  }
  warn(m: string): void {
    this.lines.push('warn: ' + m);
  }
  error(m: string): void {
    this.lines.push('error: ' + m);
  }
}

/** The tests' server: a tool for each outcome. */
function newServer(gate: Gate, slow?: { started: () => void; finish: Promise<void> }): McpServer {
  const server = gate.attach(new McpServer({ name: 'gate-test', version: '1.0.0' }));
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerTool(
    'forecast',
    { inputSchema: { city: z.string() }, outputSchema: { city: z.string(), summary: z.string() } },
    async ({ city }) => ({ content: [{ type: 'text', text: city }], structuredContent: { city, summary: 'sunny' } }),
  );
  server.registerTool('plain', { inputSchema: { city: z.string() } }, async ({ city }) => ({ content: [{ type: 'text', text: city }] }));
  server.registerTool('fails', {}, async () => ({ content: [{ type: 'text', text: 'no such city' }], isError: true }));
  server.registerTool('throws', {}, async () => {
    throw new Error('the weather service is down');
  });
  server.registerTool('metered', { inputSchema: { cost: z.number(), currency: z.string().optional() } }, async ({ cost, currency }, extra) => {
    reportCost(extra, cents(cost, currency ?? 'USD'));
    return { content: [{ type: 'text', text: `cost ${cost}` }] };
  });
  server.registerTool('slow', {}, async (extra) => {
    slow?.started();
    await Promise.race([slow?.finish, new Promise((resolve) => extra.signal.addEventListener('abort', resolve))]);
    return { content: [{ type: 'text', text: 'done' }] };
  });
  server.registerTool('alert', { inputSchema: { fail: z.boolean() } }, async ({ fail }) => ({ content: [{ type: 'text', text: 'sent' }], isError: fail }));
  server.registerTool('quota', {}, async () => ({ content: [{ type: 'text', text: 'ok' }] }));
  return server;
}

describe('gate, in process, against stipend serve', () => {
  let stipend: Stipend;
  let log: Lines;
  let gate: Gate;
  let s: Session;
  const gateConfig = (more: Partial<GateConfig> = {}): GateConfig => ({
    stipend: createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host }),
    service: 'weather',
    prices: PRICES,
    trustClientAgentId: true,
    purchaseUrl: 'https://example.com/buy',
    logger: log,
    timeoutMs: 60_000, // a loaded test machine is slow
    ...more,
  });

  before(async () => {
    stipend = await startStipend();
    log = new Lines();
    gate = new Gate(gateConfig());
    s = await connect(newServer(gate));
  });
  after(async () => {
    await s?.close();
    await stipend?.stop();
  });

  test('tools/list shows each price and policy, and keeps the tools without one as they are', () => {
    const prices = Object.fromEntries([...s.tools].map(([name, t]) => [name, t._meta?.[META.price]]));
    assert.deepEqual(prices.echo, { free: true });
    assert.deepEqual(prices.forecast, { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' });
    assert.deepEqual(prices.alert, { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'before' });
    assert.deepEqual(prices.quota, { units: 2, policy: 'on_success' });
  });

  test('on success: a call is charged after its tool succeeds, with the hold in _meta', async () => {
    const agent = 'a-success';
    const ent = await fund(stipend, agent, 50);
    const c = charged(await call(s, 'forecast', { city: 'Oslo' }, { agent }));
    assert.equal(c.result, 'consumed');
    assert.equal(c.entitlementId, ent);
    assert.deepEqual(c.cost, { cents: 5, currency: 'USD' });
    assert.deepEqual(c.balanceAfter, { cents: 45, currency: 'USD' });
    assert.ok(c.holdId, 'no holdId');
    assert.deepEqual(await creditsOf(stipend, ent), { balance: 45, held: 0 });
  });

  test('a free tool runs without Stipend', async () => {
    const res = await call(s, 'echo', { text: 'hi' });
    assert.equal(res.isError, undefined);
    assert.equal(res._meta?.[META.consumption], undefined);
  });

  for (const tool of ['fails', 'throws']) {
    test(`on success: a tool that ${tool === 'fails' ? 'answers isError' : 'throws'} is not charged and its hold is released`, async () => {
      const agent = `a-${tool}`;
      const ent = await fund(stipend, agent, 50);
      const res = await call(s, tool, undefined, { agent });
      assert.equal(res.isError, true);
      assert.equal(res._meta?.[META.consumption], undefined);
      assert.deepEqual(await creditsOf(stipend, ent), { balance: 50, held: 0 });
      assert.deepEqual(await consumptions(stipend, agent), []);
    });
  }

  test('on success: a call cancelled while its tool runs is not charged and its hold is released', async () => {
    const agent = 'a-cancel';
    const ent = await fund(stipend, agent, 50);
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const cancelGate = new Gate(gateConfig());
    const c = await connect(newServer(cancelGate, { started, finish: new Promise(() => {}) }));
    try {
      const abort = new AbortController();
      const pending = call(c, 'slow', undefined, { agent, signal: abort.signal });
      await running;
      assert.equal((await creditsOf(stipend, ent)).held, 5, 'the running call holds its price');
      abort.abort();
      await assert.rejects(pending);
      // The release follows the tool's return; wait for it.
      await until(async () => (await creditsOf(stipend, ent)).held === 0, 'the hold of the cancelled call was never released');
      assert.deepEqual(await creditsOf(stipend, ent), { balance: 50, held: 0 });
    } finally {
      await c.close();
    }
  });

  test('variable cost: the reported cost is charged, capped at the price', async () => {
    const agent = 'a-metered';
    const ent = await fund(stipend, agent, 100);
    assert.deepEqual(charged(await call(s, 'metered', { cost: 3 }, { agent })).cost, { cents: 3, currency: 'USD' });
    const before = log.lines.length;
    assert.deepEqual(charged(await call(s, 'metered', { cost: 25 }, { agent })).cost, { cents: 10, currency: 'USD' });
    assert.ok(log.lines.slice(before).some((l) => l.startsWith('warn: the tool reported more than its price')), log.lines.join('\n'));
    assert.deepEqual(await creditsOf(stipend, ent), { balance: 87, held: 0 });
    // A cost the price cannot take throws in the tool: the call fails, uncharged.
    const res = await call(s, 'metered', { cost: 1, currency: 'EUR' }, { agent });
    assert.equal(res.isError, true);
    assert.match(JSON.stringify(res.content), /priced in USD/);
    assert.deepEqual(await creditsOf(stipend, ent), { balance: 87, held: 0 });
  });

  test('before: the charge stands when the tool fails', async () => {
    const agent = 'a-before';
    const ent = await fund(stipend, agent, 50);
    assert.equal(charged(await call(s, 'alert', { fail: false }, { agent })).holdId, undefined);
    const res = await call(s, 'alert', { fail: true }, { agent });
    assert.equal(res.isError, true);
    assert.equal((res._meta?.[META.consumption] as Charge | undefined)?.result, 'consumed', 'the failed call carries its charge');
    assert.deepEqual(await creditsOf(stipend, ent), { balance: 40, held: 0 });
    assert.ok(log.lines.some((l) => l.startsWith('warn: tool failed after it was charged')));
  });

  test('a retry with the same key is charged once; a key whose call failed is spent', async () => {
    const agent = 'a-replay';
    const ent = await fund(stipend, agent, 50);
    const first = charged(await call(s, 'forecast', { city: 'Oslo' }, { agent, key: 'k-1' }));
    const again = charged(await call(s, 'forecast', { city: 'Oslo' }, { agent, key: 'k-1' }));
    assert.equal(again.result, 'replay');
    assert.equal(again.consumptionId, first.consumptionId);
    assert.equal(again.holdId, first.holdId);
    const before = charged(await call(s, 'alert', { fail: false }, { agent, key: 'k-2' }));
    const beforeAgain = charged(await call(s, 'alert', { fail: false }, { agent, key: 'k-2' }));
    assert.deepEqual([beforeAgain.result, beforeAgain.consumptionId], ['replay', before.consumptionId]);
    assert.deepEqual(await creditsOf(stipend, ent), { balance: 40, held: 0 });

    assert.equal((await call(s, 'fails', undefined, { agent, key: 'k-3' })).isError, true);
    const spent = refused(s, await call(s, 'fails', undefined, { agent, key: 'k-3' }), 'fails');
    assert.equal(spent.error, 'idempotency_key_spent');
    assert.deepEqual(spent.price, { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' });
  });

  test('two concurrent copies of one call are charged once', async () => {
    const agent = 'a-copies';
    const ent = await fund(stipend, agent, 50);
    const [a, b] = await Promise.all([
      call(s, 'forecast', { city: 'Rome' }, { agent, key: 'twin' }),
      call(s, 'forecast', { city: 'Rome' }, { agent, key: 'twin' }),
    ]);
    assert.deepEqual([charged(a).result, charged(b).result].sort(), ['consumed', 'replay']);
    assert.equal(charged(a).consumptionId, charged(b).consumptionId);
    assert.deepEqual(await creditsOf(stipend, ent), { balance: 45, held: 0 });
  });

  test('payment_required: the price, the reasons and where to buy, as text and in _meta', async () => {
    const agent = 'a-broke';
    const ent = await fund(stipend, agent, 3);
    for (const tool of ['forecast', 'plain']) {
      const r = refused(s, await call(s, tool, { city: 'Oslo' }, { agent }), tool);
      assert.deepEqual(r, {
        error: 'payment_required',
        message: `payment required: no entitlement of this agent covers tool ${tool}`,
        service: 'weather',
        tool,
        price: { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' },
        reasons: [{ entitlementId: ent, reason: 'insufficient_balance' }],
        purchaseUrl: 'https://example.com/buy',
      });
    }
    const res = await call(s, 'forecast', { city: 'Oslo' }, { agent });
    const text = res.content[0]?.type === 'text' ? res.content[0].text : '';
    assert.equal(
      text,
      'payment required: no entitlement of this agent covers tool forecast. Price per call: at most 5 cents USD or 1 unit, ' +
        `charged only if the tool succeeds. Reasons: insufficient_balance (entitlement ${ent}). Buy credits at https://example.com/buy.`,
    );
  });

  test('agent_unknown: no agent, or one named by a client the server does not trust', async () => {
    assert.equal(refused(s, await call(s, 'forecast', { city: 'Oslo' }), 'forecast').error, 'agent_unknown');
    const untrusting = await connect(newServer(new Gate(gateConfig({ trustClientAgentId: false }))));
    try {
      await fund(stipend, 'a-untrusted', 50);
      const r = refused(untrusting, await call(untrusting, 'forecast', { city: 'Oslo' }, { agent: 'a-untrusted' }), 'forecast');
      assert.equal(r.error, 'agent_unknown');
    } finally {
      await untrusting.close();
    }
  });

  test('tool_not_priced: a call of a tool missing from the price table', async () => {
    const r = refused(s, await call(s, 'nosuch', {}, { agent: 'a-any' }), 'nosuch');
    assert.deepEqual(r, { error: 'tool_not_priced', message: 'tool nosuch has no price configured, so it is not available', service: 'weather', tool: 'nosuch' });
  });

  test('idempotency_key_conflict: a key reused after the price changed', async () => {
    const agent = 'a-conflict';
    await fund(stipend, agent, 50);
    charged(await call(s, 'forecast', { city: 'Oslo' }, { agent, key: 'c-1' }));
    const repriced = await connect(newServer(new Gate(gateConfig({ prices: { ...PRICES, forecast: credits(7, 'USD') } }))));
    try {
      assert.equal(refused(repriced, await call(repriced, 'forecast', { city: 'Oslo' }, { agent, key: 'c-1' }), 'forecast').error, 'idempotency_key_conflict');
    } finally {
      await repriced.close();
    }
  });

  test('billing_error: a key Stipend does not know', async () => {
    const wrong = await connect(newServer(new Gate(gateConfig({ stipend: createStipendClient({ baseUrl: stipend.url, apiKey: 'not-a-key' }) }))));
    try {
      assert.equal(refused(wrong, await call(wrong, 'forecast', { city: 'Oslo' }, { agent: 'a-any' }), 'forecast').error, 'billing_error');
    } finally {
      await wrong.close();
    }
  });

  test('hold_expired: a tool that outruns its hold is not charged, and its result is withheld', async () => {
    const agent = 'a-expired';
    const ent = await fund(stipend, agent, 50);
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let finish!: () => void;
    const c = await connect(newServer(new Gate(gateConfig({ holdTtlSeconds: 1 })), { started, finish: new Promise<void>((resolve) => (finish = resolve)) }));
    try {
      const pending = call(c, 'slow', undefined, { agent });
      await running;
      // The hold lasts one second: wait until Stipend no longer counts it, then let the tool answer.
      await until(async () => (await creditsOf(stipend, ent)).held === 0, 'the hold never expired');
      finish();
      assert.equal(refused(c, await pending, 'slow').error, 'hold_expired');
      assert.deepEqual(await creditsOf(stipend, ent), { balance: 50, held: 0 });
    } finally {
      await c.close();
    }
  });
});
