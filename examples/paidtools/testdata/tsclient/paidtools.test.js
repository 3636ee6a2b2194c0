// examples/paidtools seen by the official MCP TypeScript SDK's Client, over
// stdio and streamable HTTP: prices and charging policies in tools/list,
// calls charged only when their tool succeeds (and a variable-cost tool
// charged what it reports), and every refusal kind of the gate returned as an
// isError result (never thrown by callTool).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { META, TRANSPORTS, call, entitlement, fund, open, unreachableURL } from './harness.js';

const PURCHASE_URL = 'https://example.com/buy';
const OSLO = { city: 'Oslo' };

/** The refusal of result, after checking it is one every client can read. */
function refusalOf(result, tools, tool) {
  assert.equal(result.isError, true, `result of ${tool} is not an error: ${JSON.stringify(result)}`);
  const text = result.content.find((c) => c.type === 'text')?.text;
  assert.ok(text, `refusal of ${tool} has no text content: ${JSON.stringify(result)}`);
  const refusal = result._meta?.[META.refusal];
  assert.ok(refusal, `refusal of ${tool} has no _meta["${META.refusal}"]: ${JSON.stringify(result)}`);
  if (tools.get(tool)?.outputSchema) {
    assert.equal(result.structuredContent, undefined, `refusal of ${tool}, a tool with an output schema, has structuredContent`);
  }
  assert.equal(refusal.tool, tool);
  assert.equal(refusal.service, 'weather');
  assert.ok(text.includes(refusal.message), `text ${JSON.stringify(text)} does not include the message ${JSON.stringify(refusal.message)}`);
  return { refusal, text };
}

for (const transport of TRANSPORTS) {
  describe(`paidtools over ${transport}`, () => {
    const agent = `ts-${transport}`;
    let main;
    before(async () => {
      main = await open(transport, { PAIDTOOLS_PURCHASE_URL: PURCHASE_URL });
    });
    after(() => main?.close());

    test('tools/list shows each price and when it is charged', () => {
      const prices = Object.fromEntries([...main.tools].map(([name, t]) => [name, t._meta?.[META.price]]));
      assert.deepEqual(prices, {
        echo: { free: true },
        forecast: { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' },
        history: { cost: { cents: 20, currency: 'USD' }, units: 2, policy: 'on_success' },
        hourly: { cost: { cents: 24, currency: 'USD' }, units: 4, policy: 'on_success' },
      });
    });

    test('a call whose tool fails is not charged (on_success)', async () => {
      const payer = `${agent}-fails`;
      const funded = await fund(payer, 50);
      for (const [tool, args] of [['history', { city: 'Oslo', year: 1900 }], ['hourly', { city: 'Oslo', hours: 30 }]]) {
        const res = await call(main.client, tool, args, { agent: payer });
        assert.equal(res.isError, true, `${tool} ${JSON.stringify(args)}: ${JSON.stringify(res)}`);
        assert.equal(res._meta?.[META.consumption], undefined, `${tool} failed and was charged: ${JSON.stringify(res._meta)}`);
        assert.equal(res._meta?.[META.refusal], undefined, `${tool} failed in the tool, not in the gate: ${JSON.stringify(res._meta)}`);
      }
      const { credits } = await entitlement(funded.entitlements[0].id);
      assert.deepEqual({ balance: credits.balance.cents, held: credits.held.cents }, { balance: 50, held: 0 });
    });

    test('a failed call retried under its key is refused: idempotency_key_spent', async () => {
      const payer = `${agent}-spent`;
      await fund(payer, 50);
      const key = `spent-${transport}`;
      const args = { city: 'Oslo', year: 1900 };
      const failed = await call(main.client, 'history', args, { agent: payer, key });
      assert.equal(failed.isError, true, JSON.stringify(failed));
      const { refusal, text } = refusalOf(await call(main.client, 'history', args, { agent: payer, key }), main.tools, 'history');
      assert.equal(refusal.error, 'idempotency_key_spent');
      assert.ok(text.includes('new idempotency key'), text);
    });

    test('a variable-cost tool is charged what it reports, not its price', async () => {
      const payer = `${agent}-hourly`;
      const funded = await fund(payer, 50);
      let left = 50;
      for (const hours of [6, 24]) {
        const res = await call(main.client, 'hourly', { city: 'Oslo', hours }, { agent: payer });
        assert.equal(res.isError, undefined, JSON.stringify(res));
        assert.equal(res.structuredContent.hours.length, hours);
        left -= hours;
        const charge = res._meta[META.consumption];
        assert.deepEqual({ result: charge.result, cost: charge.cost, balanceAfter: charge.balanceAfter.cents },
          { result: 'consumed', cost: { cents: hours, currency: 'USD' }, balanceAfter: left });
        assert.ok(charge.holdId, `no holdId in ${JSON.stringify(charge)}`);
      }
      const { credits } = await entitlement(funded.entitlements[0].id);
      assert.deepEqual({ balance: credits.balance.cents, held: credits.held.cents }, { balance: left, held: 0 });
    });

    test('a tool priced "before" says so, and is charged even when it fails', async () => {
      const payer = `${agent}-before`;
      const funded = await fund(payer, 50);
      const before = await open(transport, {
        PAIDTOOLS_PRICES: JSON.stringify({ forecast: { cost: { cents: 5, currency: 'USD' }, policy: 'before' } }),
      });
      try {
        assert.deepEqual(before.tools.get('forecast')._meta[META.price], { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'before' });
        const res = await call(before.client, 'forecast', { city: '' }, { agent: payer });
        assert.equal(res.isError, true, JSON.stringify(res));
        const { credits } = await entitlement(funded.entitlements[0].id);
        assert.equal(credits.balance.cents, 45);
      } finally {
        await before.close();
      }
    });

    test('the eleventh forecast on 50 cents is refused: payment_required', async () => {
      const funded = await fund(agent, 50);
      for (let i = 1; i <= 10; i++) {
        const res = await call(main.client, 'forecast', OSLO, { agent });
        assert.equal(res.isError, undefined, `call ${i}: ${JSON.stringify(res)}`);
        assert.equal(res.structuredContent.city, 'Oslo');
        assert.equal(res._meta[META.consumption].balanceAfter.cents, 50 - 5 * i);
      }
      const { refusal, text } = refusalOf(await call(main.client, 'forecast', OSLO, { agent }), main.tools, 'forecast');
      assert.deepEqual({ ...refusal, message: undefined }, {
        error: 'payment_required',
        message: undefined,
        service: 'weather',
        tool: 'forecast',
        price: { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' },
        reasons: [{ entitlementId: funded.entitlements[0].id, reason: 'insufficient_balance' }],
        purchaseUrl: PURCHASE_URL,
      });
      for (const want of ['5 cents USD', 'insufficient_balance', PURCHASE_URL]) {
        assert.ok(text.includes(want), `text ${JSON.stringify(text)} does not mention ${want}`);
      }
    });

    test('a call naming no agent is refused: agent_unknown', async () => {
      const { refusal } = refusalOf(await call(main.client, 'forecast', OSLO), main.tools, 'forecast');
      assert.equal(refusal.error, 'agent_unknown');
    });

    test('a key reused after the price changed is refused: idempotency_key_conflict', async () => {
      const payer = `${agent}-conflict`;
      await fund(payer, 100);
      const key = `conflict-${transport}`;
      const first = await call(main.client, 'forecast', OSLO, { agent: payer, key });
      assert.equal(first.isError, undefined, JSON.stringify(first));
      // The operator raises forecast's price and leaves history out of the table.
      const repriced = await open(transport, {
        PAIDTOOLS_PRICES: JSON.stringify({ echo: { free: true }, forecast: { cost: { cents: 7, currency: 'USD' } } }),
      });
      try {
        assert.deepEqual(repriced.tools.get('forecast')._meta[META.price], { cost: { cents: 7, currency: 'USD' }, units: 1, policy: 'on_success' });
        const { refusal } = refusalOf(await call(repriced.client, 'forecast', OSLO, { agent: payer, key }), repriced.tools, 'forecast');
        assert.equal(refusal.error, 'idempotency_key_conflict');

        assert.equal(repriced.tools.get('history')._meta?.[META.price], undefined);
        const unpriced = refusalOf(await call(repriced.client, 'history', { city: 'Oslo', year: 1990 }, { agent: payer }), repriced.tools, 'history');
        assert.equal(unpriced.refusal.error, 'tool_not_priced');
      } finally {
        await repriced.close();
      }
    });

    test('Stipend unreachable: billing_unavailable, retryable (fail closed)', async () => {
      const down = await open(transport, { STIPEND_URL: await unreachableURL() });
      try {
        const { refusal } = refusalOf(await call(down.client, 'forecast', OSLO, { agent }), down.tools, 'forecast');
        assert.equal(refusal.error, 'billing_unavailable');
        assert.equal(refusal.retryable, true);
      } finally {
        await down.close();
      }
    });

    test('a wrong host key: billing_error', async () => {
      const misconfigured = await open(transport, { STIPEND_HOST_KEY: 'not-a-key' });
      try {
        const { refusal } = refusalOf(await call(misconfigured.client, 'forecast', OSLO, { agent }), misconfigured.tools, 'forecast');
        assert.equal(refusal.error, 'billing_error');
      } finally {
        await misconfigured.close();
      }
    });
  });
}
