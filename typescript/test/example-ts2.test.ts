// examples/paidtools-ts2 (the example on SDK 2.x, built) over stdio and
// stateless streamable HTTP, driven by the 2.x Client, charging a real
// stipend serve: a paid call charged once and replayed under its key, the
// variable cost, and refusals returned as results with the purchase link in
// their text.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { type Charge, META, type Refusal } from '@stipend-mcp/stipend';

import { type Stipend, credits, fund, startStipend } from './support/stipend.js';

const MAIN = fileURLToPath(new URL('../../../examples/paidtools-ts2/dist/main.js', import.meta.url));
const PURCHASE_URL = 'https://example.com/buy';

interface Result {
  readonly isError?: boolean;
  readonly content: readonly { type: string; text?: string }[];
  readonly _meta?: Record<string, unknown>;
}

for (const transport of ['stdio', 'http'] as const) {
  describe(`examples/paidtools-ts2 over ${transport}`, () => {
    let stipend: Stipend;
    let client: Client;
    let stop = async (): Promise<void> => {};
    before(async () => {
      stipend = await startStipend();
      const env = { PATH: process.env.PATH ?? '', STIPEND_URL: stipend.url, STIPEND_HOST_KEY: stipend.keys.host, PAIDTOOLS_PURCHASE_URL: PURCHASE_URL };
      client = new Client({ name: 'paidtools-ts2-test', version: '1.0.0' });
      if (transport === 'stdio') {
        await client.connect(new StdioClientTransport({ command: process.execPath, args: [MAIN], env }));
        return;
      }
      const child = spawn(process.execPath, [MAIN], { env: { ...env, PAIDTOOLS_ADDR: '127.0.0.1:0' }, stdio: ['ignore', 'ignore', 'pipe'] });
      stop = async () => {
        child.kill();
      };
      const url = await new Promise<string>((resolve, reject) => {
        let log = '';
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          log += chunk;
          const m = /url=(\S+)/.exec(log);
          if (m?.[1]) {
            resolve(m[1]);
          }
        });
        child.once('exit', () => reject(new Error(`paidtools-ts2 exited before listening:\n${log}`)));
      });
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    });
    after(async () => {
      await client?.close();
      await stop();
      await stipend?.stop();
    });
    const call = async (tool: string, args: Record<string, unknown>, meta: Record<string, unknown> = {}): Promise<Result> =>
      (await client.callTool({ name: tool, arguments: args, _meta: meta })) as unknown as Result;

    test('tools/list shows the prices', async () => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.find((t) => t.name === 'forecast')?._meta?.[META.price], { cost: { cents: 5, currency: 'USD' }, units: 1, policy: 'on_success' });
    });

    test('a paid call is charged once, its retry under the key replayed, the variable cost charged', async () => {
      const agent = `ts2-${transport}`;
      const ent = await fund(stipend, agent, 50);
      const meta = { [META.agentId]: agent, [META.idempotencyKey]: 'k-1' };
      const first = (await call('forecast', { city: 'Oslo' }, meta))._meta?.[META.consumption] as Charge;
      const again = (await call('forecast', { city: 'Oslo' }, meta))._meta?.[META.consumption] as Charge;
      assert.equal(first.result, 'consumed');
      assert.equal(again.result, 'replay');
      assert.equal(again.consumptionId, first.consumptionId);
      const hourly = (await call('hourly', { city: 'Oslo', hours: 3 }, { [META.agentId]: agent }))._meta?.[META.consumption] as Charge;
      assert.deepEqual(hourly.cost, { cents: 3, currency: 'USD' });
      const failed = await call('hourly', { city: 'Oslo', hours: 0 }, { [META.agentId]: agent });
      assert.equal(failed.isError, true);
      assert.deepEqual(await credits(stipend, ent), { balance: 42, held: 0 });
    });

    test('refusals are results, the purchase link in their text', async () => {
      const anonymous = await call('forecast', { city: 'Oslo' });
      assert.equal((anonymous._meta?.[META.refusal] as Refusal).error, 'agent_unknown');
      const broke = await call('forecast', { city: 'Oslo' }, { [META.agentId]: `ts2-broke-${transport}` });
      assert.equal(broke.isError, true);
      assert.equal((broke._meta?.[META.refusal] as Refusal).error, 'payment_required');
      assert.ok(broke.content[0]?.text?.includes(PURCHASE_URL), broke.content[0]?.text);
    });
  });
}
