// The gate's overhead per tool call on SDK 2.x (@modelcontextprotocol/server),
// measured as bench/overhead.ts measures 1.x's: one tools/call of a forecast
// tool through the 2.x Client on in-memory transports, with and without the
// gate, every setup called once per round in rotating order, in one run; the
// gated setup charges the real stipend serve (memory store) over loopback,
// policy on_success, every call under its own key.
//
//   npm run pretest && node build/bench/overhead-v2.js [rounds]   (default 1000, after 100 of warm-up)
import { loadavg } from 'node:os';

import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { Gate, META, createStipendClient, creditsOrUnits } from '@stipend-mcp/stipend';
import { z } from 'zod';

import { fund, startStipend } from '../test/support/stipend.js';

const rounds = Number(process.argv[2] ?? 1000);
const warmup = 100;

function server(gate?: Gate): McpServer {
  const s = new McpServer({ name: 'bench-v2', version: '1.0.0' });
  gate?.attach(s);
  s.registerTool('forecast', { inputSchema: z.object({ city: z.string() }) }, async ({ city }) => ({ content: [{ type: 'text', text: `sunny in ${city}` }] }));
  return s;
}

async function connect(s: McpServer): Promise<Client> {
  const [c, t] = InMemoryTransport.createLinkedPair();
  await s.connect(t);
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(c);
  return client;
}

const stipend = await startStipend();
try {
  await fund(stipend, 'bench', 1e12);
  const gate = new Gate({
    stipend: createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host }),
    service: 'weather',
    prices: { forecast: creditsOrUnits(5, 'USD', 1) },
    trustClientAgentId: true,
  });
  const setups: [string, Client][] = [
    ['nogate', await connect(server())],
    ['stipend-on_success', await connect(server(gate))],
  ];
  const times = new Map<string, number[]>(setups.map(([n]) => [n, []]));
  let n = 0;
  for (let r = 0; r < rounds + warmup; r++) {
    for (let i = 0; i < setups.length; i++) {
      const [name, client] = setups[(r + i) % setups.length] as [string, Client];
      const t0 = process.hrtime.bigint();
      const res = await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' }, _meta: { [META.agentId]: 'bench', [META.idempotencyKey]: `b-${n++}` } });
      const us = Number(process.hrtime.bigint() - t0) / 1000;
      if (res.isError) {
        throw new Error(`${name}: ${JSON.stringify(res)}`);
      }
      if (r >= warmup) {
        times.get(name)?.push(us);
      }
    }
  }
  const q = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)] ?? 0;
  const base = q(times.get('nogate') ?? [], 0.5);
  console.log(`node ${process.version}, SDK 2.x, ${rounds} rounds (+${warmup} warm-up), load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log('| setup | p50 µs | p90 µs | p50 − ungated µs |\n|---|---:|---:|---:|');
  for (const [name, xs] of times) {
    const p50 = q(xs, 0.5);
    console.log(`| ${name} | ${p50.toFixed(0)} | ${q(xs, 0.9).toFixed(0)} | ${name === 'nogate' ? '' : `+${(p50 - base).toFixed(0)}`} |`);
  }
  await Promise.all(setups.map(([, c]) => c.close()));
} finally {
  await stipend.stop();
}
