// The idempotency key derivation against the keys the Go gate derives
// (testdata/idempotency-keys.json, written by the Go test
// TestIdempotencyKeyVectors from mcpgate itself).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { argumentsJSON, idempotencyKey, requestStamp } from '@stipend-mcp/stipend';

import { VECTORS } from './support/vectors.js';

test('the vectors cover both kinds of key material and the known disagreements', () => {
  assert.ok(VECTORS.some((v) => v.clientKey && v.agrees));
  assert.ok(VECTORS.some((v) => !v.clientKey && v.agrees));
  assert.ok(VECTORS.some((v) => !v.agrees));
});

for (const v of VECTORS) {
  test(`key: ${v.name}`, () => {
    // What the SDK delivers: the request's JSON text, parsed.
    const args: unknown = v.arguments === undefined ? undefined : JSON.parse(v.arguments);
    const material = v.clientKey
      ? { clientKey: v.clientKey }
      : { session: v.sessionId, request: requestStamp('http:' + v.sessionId, v.requestId) };
    const got = idempotencyKey(v.service, v.tool, args, material, v.requestState);
    if (v.agrees) {
      assert.equal(got, v.key, `the Go gate charged ${v.arguments ?? '(no arguments)'} under ${v.key}`);
    } else {
      assert.notEqual(got, v.key, `${v.name}: the gates now agree; mark the vector agrees: true`);
    }
  });
}

test('argumentsJSON is the RFC 8785 canonical form', () => {
  assert.equal(argumentsJSON(undefined), '');
  assert.equal(argumentsJSON({}), '{}');
  assert.equal(argumentsJSON({ b: [1.0, 1e21, 1e-7, -0], a: { y: null, x: true } }), '{"a":{"x":true,"y":null},"b":[1,1e+21,1e-7,0]}');
  assert.equal(argumentsJSON({ t: '<a href="x">&</a>\u2028é\n\u0001' }), '{"t":"<a href=\\"x\\">&</a>\u2028é\\n\\u0001"}');
  // Names sort by UTF-16 code units, as RFC 8785 says (not as JSON.stringify orders integer-like names).
  assert.equal(argumentsJSON({ '10': 1, '9': 2, b: 3, é: 4, '\u{1F600}': 5, '\uFB01': 6 }), '{"10":1,"9":2,"b":3,"é":4,"\u{1F600}":5,"\uFB01":6}');
  // No canonical form: hashed as JSON.stringify writes it.
  assert.equal(argumentsJSON({ t: '\ud800' }), '{"t":"\\ud800"}');
});

test('requestStamp renders string and numeric ids as mcpgate does', () => {
  assert.equal(requestStamp('http:s', 'abc'), 'http:s/s:abc');
  assert.equal(requestStamp('n0', 7), 'n0/n:7');
  assert.equal(requestStamp('n0', 0), 'n0/n:0');
});
