// The gate on an McpServer of the 2.x SDK (@modelcontextprotocol/server),
// called by the 2.x Client (@modelcontextprotocol/client), charging a real
// Stipend (stipend serve, memory store): in process, and over stateless
// streamable HTTP (createMcpHandler, protocol 2026-07-28) with two server
// instances behind one address, where a call retried on the other instance
// with the client's idempotency key is charged once.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { after, before, describe, test } from 'node:test';

import { Client, InMemoryTransport, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer, createMcpHandler, inputRequired } from '@modelcontextprotocol/server';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Gate, type GateConfig, META, SUPPORTED_SDKS, cents, createStipendClient, credits, free, reportCost } from '@stipend-mcp/stipend';
import { z } from 'zod';

import { type Session, call, charged, refused } from './support/mcp.js';
import { nodeListener } from './support/example-ts2.js';
import { type Stipend, consumptions, credits as creditsOf, fund, startStipend } from './support/stipend.js';

const PURCHASE_URL = 'https://example.com/buy';

/** A 2.x McpServer behind gate, with a free, a paid, an output-schema, a failing and a metered tool. */
function newServer(gate: Gate): McpServer {
  const server = gate.attach(new McpServer({ name: 'gate-test-v2', version: '1.0.0' }));
  server.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerTool('plain', { inputSchema: z.object({ city: z.string() }) }, async ({ city }) => ({ content: [{ type: 'text', text: city }] }));
  server.registerTool(
    'forecast',
    { inputSchema: z.object({ city: z.string() }), outputSchema: z.object({ city: z.string(), summary: z.string() }) },
    async ({ city }) => ({ content: [{ type: 'text', text: city }], structuredContent: { city, summary: 'sunny' } }),
  );
  server.registerTool('fails', {}, async () => ({ content: [{ type: 'text', text: 'no such city' }], isError: true }));
  // Multi-round-trip (2026-07-28): the first round asks for more (requestState), the second finishes.
  server.registerTool('confirm', {}, async (ctx) =>
    ctx.mcpReq.requestState() === undefined ? inputRequired({ requestState: 'round-2' }) : { content: [{ type: 'text', text: 'confirmed' }] },
  );
  server.registerTool('metered', { inputSchema: z.object({ cost: z.number() }) }, async ({ cost }, ctx) => {
    assert.equal(reportCost(ctx, cents(cost, 'USD')), true);
    return { content: [{ type: 'text', text: `cost ${cost}` }] };
  });
  return server;
}

const PRICES = { echo: free(), confirm: credits(5, 'USD'), plain: credits(5, 'USD'), forecast: credits(5, 'USD'), fails: credits(5, 'USD'), metered: credits(10, 'USD') };

/** A session of the 2.x Client, in the shape the shared helpers take. */
async function session(client: Client, close: () => Promise<void>): Promise<Session> {
  const { tools } = await client.listTools();
  return { client: client as unknown as Session['client'], tools: new Map(tools.map((t) => [t.name, t as never])), logs: () => '', close };
}

describe('gate on SDK 2.x', () => {
  let stipend: Stipend;
  const config = (): GateConfig => ({
    stipend: createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host }),
    service: 'weather',
    prices: PRICES,
    trustClientAgentId: true,
    purchaseUrl: PURCHASE_URL,
    timeoutMs: 60_000,
  });
  before(async () => {
    stipend = await startStipend();
  });
  after(async () => {
    await stipend?.stop();
  });

  test('attach names the supported SDKs when handed something else', () => {
    const gate = new Gate(config());
    assert.throws(() => gate.attach({ server: {} } as never), (err: Error) => err instanceof TypeError && err.message.includes(SUPPORTED_SDKS));
    assert.throws(() => gate.attach(undefined as never), TypeError);
    // Both SDKs' McpServer are taken.
    gate.attach(new McpServerV1({ name: 'v1', version: '1.0.0' }));
    gate.attach(new McpServer({ name: 'v2', version: '1.0.0' }));
  });

  test('registering a tool without a price throws', () => {
    const server = new Gate(config()).attach(new McpServer({ name: 'v2', version: '1.0.0' }));
    assert.throws(() => server.registerTool('unpriced', {}, async () => ({ content: [] })), /has no price/);
  });

  describe('in process', () => {
    let s: Session;
    before(async () => {
      const server = newServer(new Gate(config()));
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await server.connect(serverSide);
      const client = new Client({ name: 'stipend-ts2-test', version: '1.0.0' });
      await client.connect(clientSide);
      s = await session(client, async () => {
        await client.close();
        await server.close();
      });
    });
    after(async () => {
      await s?.close();
    });

    test('tools/list shows the prices', () => {
      assert.deepEqual(s.tools.get('echo')?._meta?.[META.price], { free: true });
      assert.deepEqual(s.tools.get('plain')?._meta?.[META.price], { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' });
    });

    test('a paid call is charged once its tool succeeds; a retry with its key is not charged again', async () => {
      const agent = 'v2-paid';
      const ent = await fund(stipend, agent, 50);
      const first = charged(await call(s, 'plain', { city: 'Oslo' }, { agent, key: 'k1' }));
      assert.equal(first.result, 'consumed');
      const again = charged(await call(s, 'plain', { city: 'Oslo' }, { agent, key: 'k1' }));
      assert.equal(again.result, 'replay');
      assert.equal(again.consumptionId, first.consumptionId);
      assert.deepEqual(await creditsOf(stipend, ent), { balance: 45, held: 0 });
    });

    test('the variable cost reported through ctx is charged, a failing tool is not', async () => {
      const agent = 'v2-metered';
      const ent = await fund(stipend, agent, 50);
      assert.deepEqual(charged(await call(s, 'metered', { cost: 3 }, { agent })).cost, { cents: 3, currency: 'USD' });
      const failed = await call(s, 'fails', undefined, { agent });
      assert.equal(failed.isError, true);
      assert.equal(failed._meta?.[META.refusal], undefined);
      assert.deepEqual(await creditsOf(stipend, ent), { balance: 47, held: 0 });
    });

    test('refusals reach the client as results: no agent, payment required (with the purchase link in the text)', async () => {
      const r = refused(s, await call(s, 'plain', { city: 'Oslo' }), 'plain');
      assert.equal(r.error, 'agent_unknown');
      const res = await call(s, 'forecast', { city: 'Oslo' }, { agent: 'v2-broke' });
      const p = refused(s, res, 'forecast');
      assert.equal(p.error, 'payment_required');
      assert.equal(p.purchaseUrl, PURCHASE_URL);
      const text = res.content[0]?.type === 'text' ? res.content[0].text : '';
      assert.ok(text.includes(PURCHASE_URL), `the text ${JSON.stringify(text)} does not name the purchase URL`);
    });
  });

  describe('stateless streamable HTTP, two instances behind one address', () => {
    let url: string;
    let stopHTTP: () => Promise<void>;
    const served: number[] = [0, 0];
    before(async () => {
      // Two instances, each with its own gate and Stipend client, as two
      // processes behind a load balancer would be; a new McpServer per request.
      const instances = [0, 1].map(() => {
        const gate = new Gate(config());
        return createMcpHandler(() => newServer(gate));
      });
      let next = 0;
      const listeners = instances.map((h) => nodeListener(h));
      const server = createServer((req, res) => {
        const i = next++ % 2;
        served[i] = (served[i] ?? 0) + 1;
        listeners[i]?.(req, res);
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      url = `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
      stopHTTP = async () => {
        server.closeAllConnections();
        server.close();
        await Promise.all(instances.map((h) => h.close()));
      };
    });
    after(async () => {
      await stopHTTP?.();
    });

    for (const mode of ['2026-07-28', 'legacy'] as const) {
      test(`protocol ${mode}: a call retried on the other instance with its key is charged once; without a key, twice`, async () => {
        const client = new Client(
          { name: 'stipend-ts2-http', version: '1.0.0' },
          mode === 'legacy' ? {} : { versionNegotiation: { mode: { pin: '2026-07-28' } } },
        );
        await client.connect(new StreamableHTTPClientTransport(new URL(url)));
        const s = await session(client, () => client.close());
        try {
          const agent = `v2-http-${mode}`;
          const ent = await fund(stipend, agent, 100);
          const before = [...served];
          const first = charged(await call(s, 'plain', { city: 'Oslo' }, { agent, key: 'retry-1' }));
          const retry = charged(await call(s, 'plain', { city: 'Oslo' }, { agent, key: 'retry-1' }));
          assert.ok(served[0]! > before[0]! && served[1]! > before[1]!, `both instances served: ${served} (before ${before})`);
          assert.equal(first.result, 'consumed');
          assert.equal(retry.result, 'replay');
          assert.equal(retry.consumptionId, first.consumptionId);
          assert.deepEqual(await creditsOf(stipend, ent), { balance: 95, held: 0 });

          // The same call sent twice without a key is two calls: charged twice.
          charged(await call(s, 'plain', { city: 'Bergen' }, { agent }));
          charged(await call(s, 'plain', { city: 'Bergen' }, { agent }));
          assert.deepEqual(await creditsOf(stipend, ent), { balance: 85, held: 0 });
          assert.equal((await consumptions(stipend, agent)).length, 3);

          if (mode === '2026-07-28') {
            // A call that takes two rounds under one key: the round asking for input is not charged, the one
            // that finishes is, once (its requestState makes it a charge of its own).
            const confirmed = charged(await call(s, 'confirm', undefined, { agent, key: 'mrtr-1' }));
            assert.equal(confirmed.result, 'consumed');
            assert.deepEqual(await creditsOf(stipend, ent), { balance: 80, held: 0 });
          }
        } finally {
          await s.close();
        }
      });
    }
  });
});
