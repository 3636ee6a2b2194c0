// The gate's overhead per tool call, measured as the Go gate's is
// (examples/paidtools BenchmarkGateOverhead): one tools/call of the example's
// forecast tool through the SDK's Client on in-memory transports, in these
// setups, interleaved in one run:
//
//   nogate             the example server without the gate
//   nogate-echo        the same, calling the free echo tool
//   free               the gated server, calling echo (compared with nogate-echo)
//   instant-*          the gate charging an in-process stand-in for Stipend
//                      that answers at once: the gate's own cost
//   stipend-*          the gate charging the real stipend serve (memory
//                      store) over loopback HTTP; every call has its own key,
//                      so every call is a charge
//
// for both policies (on_success: authorize then capture; before: one
// consume). Each round calls every setup once, in rotating order, so that
// load from other processes falls on all of them alike. It prints each
// setup's median and p90 latency and the medians' differences from its
// ungated baseline (nogate; nogate-echo for free).
//
//   npm run bench -- [rounds]     (default 2000, after 200 rounds of warm-up)
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Gate, META, type Policy, type Price, createStipendClient, creditsOrUnits, free } from '@stipend-mcp/stipend';

import { fund, startStipend } from '../test/support/stipend.js';

const example = fileURLToPath(new URL('../../../examples/paidtools-ts/dist/server.js', import.meta.url));
const { newServer } = (await import(example)) as { newServer: (gate?: Gate) => McpServer };

const rounds = Number(process.argv[2] ?? 2000);
const warmup = 200;
const agent = 'bench';

/** The example's prices, every priced tool under policy. */
const prices = (policy: Policy): Record<string, Price> => ({
  echo: free(),
  forecast: { ...creditsOrUnits(5, 'USD', 1), policy },
  history: { ...creditsOrUnits(20, 'USD', 2), policy },
  hourly: { ...creditsOrUnits(24, 'USD', 4), policy },
});

/** A stand-in Stipend answering every charge at once, in process. */
function instantFetch(): (request: Request) => Promise<Response> {
  // What a consumption and a hold both say about the call.
  const call = { agentId: agent, entitlementId: 'e1', entitlementType: 'credits', service: 'weather', tool: 'forecast', idempotencyKey: 'k' };
  const consumption = {
    id: 'c1',
    ...call,
    cost: { cents: 5, currency: 'USD' },
    units: 1,
    occurredAt: '2026-01-01T00:00:00Z',
    balanceAfter: { cents: 1, currency: 'USD' },
  };
  const hold = {
    id: 'h1',
    ...call,
    status: 'held',
    maxCost: { cents: 5, currency: 'USD' },
    maxUnits: 1,
    createdAt: '2026-01-01T00:00:00Z',
    expiresAt: '2026-01-01T00:05:00Z',
  };
  const answers: Record<string, unknown> = {
    '/v1/consume': { result: 'consumed', consumption },
    '/v1/authorize': { result: 'held', hold },
    '/v1/holds/h1/capture': { result: 'captured', hold: { ...hold, status: 'captured' }, consumption: { ...consumption, holdId: 'h1' } },
  };
  return async (request) => {
    await request.arrayBuffer();
    const body = answers[new URL(request.url).pathname];
    return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });
  };
}

async function connect(server: McpServer): Promise<Client> {
  const [c, s] = InMemoryTransport.createLinkedPair();
  await server.connect(s);
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(c);
  await client.listTools();
  return client;
}

const stipend = await startStipend();
try {
  await fund(stipend, agent, Number.MAX_SAFE_INTEGER);
  const quiet = { info: () => {}, warn: () => {}, error: () => {} };
  const gate = (policy: Policy, real: boolean): Gate =>
    new Gate({
      stipend: real
        ? createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host })
        : createStipendClient({ baseUrl: 'http://stipend.invalid', apiKey: 'k', fetch: instantFetch() }),
      service: 'weather',
      prices: prices(policy),
      trustClientAgentId: true,
      logger: quiet,
    });
  const meta = { [META.agentId]: agent };
  const forecast = { name: 'forecast', arguments: { city: 'Oslo' }, _meta: meta };
  const echo = { name: 'echo', arguments: { text: 'hi' }, _meta: meta };
  const setups = [
    { name: 'nogate', client: await connect(newServer()), call: forecast },
    { name: 'nogate-echo', client: await connect(newServer()), call: echo },
    { name: 'free', client: await connect(newServer(gate('on_success', false))), call: echo },
    { name: 'instant-on_success', client: await connect(newServer(gate('on_success', false))), call: forecast },
    { name: 'instant-before', client: await connect(newServer(gate('before', false))), call: forecast },
    { name: 'stipend-on_success', client: await connect(newServer(gate('on_success', true))), call: forecast },
    { name: 'stipend-before', client: await connect(newServer(gate('before', true))), call: forecast },
  ].map((s) => ({ ...s, lat: [] as number[] }));

  for (let i = 0; i < warmup + rounds; i++) {
    for (let j = 0; j < setups.length; j++) {
      const s = setups[(i + j) % setups.length]!;
      const start = process.hrtime.bigint();
      const res = await s.client.callTool(s.call);
      const us = Number(process.hrtime.bigint() - start) / 1000;
      if (res.isError) {
        throw new Error(`${s.name}: ${JSON.stringify(res)}`);
      }
      if (i >= warmup) {
        s.lat.push(us);
      }
    }
  }

  const at = (xs: number[], q: number): number => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;
  const median: Record<string, number> = {};
  console.log(`node ${process.version}, ${rounds} rounds (+${warmup} warm-up), load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log('| setup | p50 µs | p90 µs | p50 − its baseline µs |');
  console.log('|---|---:|---:|---:|');
  for (const s of setups) {
    s.lat.sort((a, b) => a - b);
    median[s.name] = at(s.lat, 0.5);
  }
  for (const s of setups) {
    const baseline = s.name === 'free' ? 'nogate-echo' : 'nogate';
    const d = median[s.name]! - median[baseline]!;
    const diff = s.name.startsWith('nogate') ? '' : `${d >= 0 ? '+' : '−'}${Math.abs(d).toFixed(0)}`;
    console.log(`| ${s.name} | ${at(s.lat, 0.5).toFixed(0)} | ${at(s.lat, 0.9).toFixed(0)} | ${diff} |`);
  }
  for (const s of setups) {
    await s.client.close();
  }
} finally {
  await stipend.stop();
}
