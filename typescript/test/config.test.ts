// Start-up errors: a gate refuses a configuration Stipend would refuse, and
// says which tool and field; attaching and registering tools refuse what
// would leave a tool ungated or unpriced.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Gate, type GateConfig, type Price, createStipendClient, credits, creditsOrUnits, describeTerms, free, termsOf, units } from '@stipend-mcp/stipend';

const stipend = createStipendClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k' });
const config = (more: Partial<GateConfig>): GateConfig => ({ stipend, service: 'weather', prices: { echo: free() }, ...more });
const priced = (price: unknown): GateConfig => config({ prices: { forecast: price as Price } });

test('the gate says what is wrong with a configuration', () => {
  const cases: [string, GateConfig, RegExp][] = [
    ['no client', { ...config({}), stipend: undefined as unknown as GateConfig['stipend'] }, /config\.stipend must be a Stipend client/],
    ['empty service', config({ service: '' }), /config\.service "" must be 1–200 printable ASCII/],
    ['any service', config({ service: '*' }), /and not "\*"/],
    ['lower-case currency', priced(credits(5, 'usd')), /price of tool "forecast" cost\.currency must be a three-letter upper-case ISO 4217 code such as "USD"; got "usd"/],
    ['negative cents', priced(credits(-1, 'USD')), /price of tool "forecast" cost\.cents must be a whole, non-negative number/],
    ['fractional cents', priced(credits(0.5, 'USD')), /cost\.cents must be a whole/],
    ['cents as a string', priced({ cost: { cents: '5', currency: 'USD' } }), /cost\.cents must be a whole/],
    ['zero units', priced(units(0)), /units must be a whole number from 1 to 1000000 \(leave it out for 1\); got 0/],
    ['too many units', priced(units(1_000_001)), /units must be a whole number from 1 to 1000000/],
    ['free with a cost', priced({ free: true, cost: { cents: 1, currency: 'USD' } }), /is free, so it can have no cost, units or policy/],
    ['unknown field', priced({ cents: 5 }), /has an unknown field "cents"/],
    ['not an object', priced(5), /must be an object such as free\(\)/],
    ['unknown policy', priced({ ...credits(5, 'USD'), policy: 'after' }), /policy must be "on_success" or "before"; got "after"/],
    ['unknown gate policy', config({ policy: 'later' as 'before' }), /config\.policy must be "on_success" or "before"/],
    ['tool name too long', config({ prices: { ['t'.repeat(201)]: free() } }), /tool name "t+" in prices must be 1–200 printable ASCII/],
    ['non-ASCII tool name', config({ prices: { 'prévision': free() } }), /tool name "prévision"/],
    ['hold TTL of 0', config({ holdTtlSeconds: 0 }), /holdTtlSeconds must be whole seconds from 1 to 86400; got 0/],
    ['hold TTL over a day', config({ holdTtlSeconds: 86_401 }), /holdTtlSeconds/],
    ['fractional hold TTL', config({ holdTtlSeconds: 1.5 }), /holdTtlSeconds/],
    ['negative timeout', config({ timeoutMs: -1 }), /timeoutMs must be positive/],
  ];
  for (const [name, c, want] of cases) {
    assert.throws(() => new Gate(c), want, name);
  }
  assert.doesNotThrow(() => new Gate(priced(creditsOrUnits(0, 'USD', 1_000_000))));
  assert.doesNotThrow(() => new Gate(priced({ ...units(3), policy: 'before' })));
});

test('registering a tool without a price throws, naming it', () => {
  const server = new Gate(config({})).attach(new McpServer({ name: 't', version: '1' }));
  assert.doesNotThrow(() => server.registerTool('echo', {}, async () => ({ content: [] })));
  assert.throws(() => server.registerTool('history', {}, async () => ({ content: [] })), /tool "history" has no price: add it to the gate's prices \(free\(\) if calls are not charged\)/);
  assert.throws(() => server.tool('history', async () => ({ content: [] })), /tool "history" has no price/);
});

test('attach refuses a server that already handles tools, or has a gate', () => {
  const gate = new Gate(config({}));
  const registered = new McpServer({ name: 't', version: '1' });
  registered.registerTool('echo', {}, async () => ({ content: [] }));
  assert.throws(() => gate.attach(registered), /attach the gate before the first registerTool: this McpServer already handles tools\/call/);
  assert.throws(() => gate.attach(new McpServer({ name: 't', version: '1' }, { capabilities: { tools: {} } })), /capabilities\.tools/);
  const twice = gate.attach(new McpServer({ name: 't', version: '1' }));
  assert.throws(() => gate.attach(twice), /already has a gate/);
});

test('terms spell out units and the policy', () => {
  assert.deepEqual(termsOf(free()), { free: true });
  assert.deepEqual(termsOf(credits(5, 'USD')), { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' });
  assert.deepEqual(termsOf(units(3), 'before'), { units: 3, policy: 'before' });
  assert.deepEqual(termsOf({ ...credits(5, 'USD'), policy: 'before' }), { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'before' });
  assert.equal(describeTerms(termsOf(creditsOrUnits(20, 'USD', 2))), '20 cents USD or 2 units');
  assert.equal(describeTerms(termsOf(units(1))), '1 unit');
  assert.deepEqual(new Gate(config({ policy: 'before', prices: { f: credits(1, 'EUR') } })).terms('f'), { cost: { cents: 1, currency: 'EUR' }, units: 1, policy: 'before' });
});
