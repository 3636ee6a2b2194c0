// The refusal text against the texts the Go gate writes
// (mcpgate/testdata/vectors/refusals.json, written by TestRefusalVectors).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { refusalText } from '@stipend-mcp/stipend';

import { REFUSAL_VECTORS } from './support/vectors.js';

test('the refusal vectors are there', () => {
  assert.ok(REFUSAL_VECTORS.length >= 5);
});

for (const v of REFUSAL_VECTORS) {
  test(`refusal text: ${v.name}`, () => {
    assert.equal(refusalText(v.refusal), v.text);
  });
}
