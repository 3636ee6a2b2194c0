// examples/paidtools-ts over stdio, end to end (support/example-suite.ts),
// and the start-up errors of a mispriced tool.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';

import { EXAMPLE } from './support/example.js';
import { exampleSuite } from './support/example-suite.js';

exampleSuite('stdio');

  test('start-up errors name the mispriced tool', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ echo: { free: true }, forecast: { cost: { cents: 5, currency: 'USD' } } }, /tool "history" has no price: add it to the gate's prices/],
      [{ echo: { free: true }, forecast: { cost: { cents: 5, currency: 'usd' } } }, /price of tool "forecast" cost\.currency must be a three-letter upper-case ISO 4217 code/],
      [{ echo: { free: true }, forecast: { units: 0 } }, /price of tool "forecast" units must be a whole number from 1 to 1000000/],
    ];
    for (const [prices, want] of cases) {
      const child = spawn(process.execPath, [EXAMPLE], {
        env: { PATH: process.env.PATH ?? '', STIPEND_HOST_KEY: 'k', PAIDTOOLS_PRICES: JSON.stringify(prices) },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let logs = '';
      child.stderr.setEncoding('utf8').on('data', (c: string) => (logs += c));
      const [code] = await once(child, 'exit');
      assert.equal(code, 1, `exit code with ${JSON.stringify(prices)}; log:\n${logs}`);
      assert.match(logs, want);
    }
  });
