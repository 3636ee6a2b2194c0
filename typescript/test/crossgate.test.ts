// One logical call retried through the Go gate (examples/paidtools) and the
// TypeScript gate (examples/paidtools-ts), both charging one stipend serve,
// is charged once: the gates derive the same idempotency key and send the
// same hold.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { type Session, call, charged, spawnSession } from './support/mcp.js';
import { PAIDTOOLS_BIN, type Stipend, consumptions, credits, fund, startStipend } from './support/stipend.js';
import { example } from './support/example.js';

describe('the Go gate and the TypeScript gate charge one call once', () => {
  let stipend: Stipend;
  let goGate: Session;
  let tsGate: Session;
  before(async () => {
    stipend = await startStipend();
    goGate = await spawnSession('http', PAIDTOOLS_BIN, [], { STIPEND_URL: stipend.url, STIPEND_HOST_KEY: stipend.keys.host });
    tsGate = await example('stdio', stipend);
  });
  after(async () => {
    await goGate?.close();
    await tsGate?.close();
    await stipend?.stop();
  });

  const cases: [string, string, Record<string, unknown>, number][] = [
    ['forecast', 'plain arguments', { city: 'Oslo' }, 5],
    ['forecast', 'arguments Go escapes (<, >, &, U+2028)', { city: 'Tom & Jerry <3>\u2028é 🌍' }, 5],
    ['hourly', 'a variable cost', { city: 'Oslo', hours: 7 }, 7],
    ['history', 'keys out of alphabetical order', { year: 1990, city: 'Oslo' }, 20],
  ];
  for (const [tool, what, args, cost] of cases) {
    for (const [first, second] of [
      ['Go', 'TypeScript'],
      ['TypeScript', 'Go'],
    ] as const) {
      test(`${tool}, ${what}: through the ${first} gate, retried through the ${second} gate`, async () => {
        const agent = `cross-${tool}-${first}-${cost}-${Object.keys(args).length}-${what.length}`;
        const ent = await fund(stipend, agent, 100);
        const gate = (name: 'Go' | 'TypeScript'): Session => (name === 'Go' ? goGate : tsGate);
        const key = `logical-call-${agent}`;
        const a = await call(gate(first), tool, args, { agent, key });
        const b = await call(gate(second), tool, args, { agent, key });
        assert.equal(charged(a).result, 'consumed');
        assert.equal(charged(b).result, 'replay', `the ${second} gate charged the retry again: ${JSON.stringify(b._meta)}`);
        assert.equal(charged(b).consumptionId, charged(a).consumptionId);
        assert.deepEqual(b.structuredContent, a.structuredContent, 'both examples answer alike');
        assert.deepEqual(await credits(stipend, ent), { balance: 100 - cost, held: 0 });
        assert.equal((await consumptions(stipend, agent)).length, 1);
      });
    }
  }

  test('the same call sent through both gates at once is charged once', async () => {
    const agent = 'cross-concurrent';
    const ent = await fund(stipend, agent, 100);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => call(i % 2 === 0 ? goGate : tsGate, 'forecast', { city: 'Rome' }, { agent, key: 'both-at-once' })),
    );
    const ids = new Set(results.map((r) => charged(r).consumptionId));
    assert.equal(ids.size, 1);
    assert.equal(results.filter((r) => charged(r).result === 'consumed').length, 1);
    assert.deepEqual(await credits(stipend, ent), { balance: 95, held: 0 });
  });
});
