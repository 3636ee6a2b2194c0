// The REST client: its generated types are current with what stipend serve
// serves, and its retries are the Go client's (against a real HTTP server on
// loopback that answers as told).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { OUTPUT, generate } from '#generate';
import { MAX_RETRY_AFTER_MS, createStipendClient, problemKind, retryAfter } from '@stipend-mcp/stipend';

import { type Stipend, startStipend } from './support/stipend.js';

describe('generated types', () => {
  let stipend: Stipend;
  before(async () => {
    stipend = await startStipend();
  });
  after(() => stipend?.stop());

  test('src/generated/openapi.ts is what openapi-typescript makes of the served /openapi.json', async () => {
    const want = await generate(new URL('/openapi.json', stipend.url));
    const got = await readFile(OUTPUT, 'utf8');
    assert.ok(got === want, 'src/generated/openapi.ts is stale: run `npm run generate`');
  });

  test('a typed call answers data, and an error answer its problem document', async () => {
    const ok = await stipend.billing.GET('/v1/accounts/{agentId}/entitlements', { params: { path: { agentId: 'nobody' } } });
    assert.deepEqual(ok.data?.items, []);
    const host = createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host });
    const denied = await host.GET('/v1/holds/{id}', { params: { path: { id: 'no-such-hold' } } });
    assert.equal(denied.response.status, 404);
    assert.equal(problemKind(denied.error), 'not-found');
  });
});

/** One request the scripted server got. */
interface Seen {
  readonly method: string;
  readonly path: string;
  readonly body: string;
  readonly at: number;
}

/** A loopback server that answers each request with the next of its script. */
class Scripted {
  readonly seen: Seen[] = [];
  script: ((res: ServerResponse, req: IncomingMessage) => void)[] = [];
  readonly server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      this.seen.push({ method: req.method ?? '', path: req.url ?? '', body, at: Date.now() });
      const next = this.script.shift() ?? ((r: ServerResponse) => answer(r, 200, { result: 'consumed' }));
      next(res, req);
    });
  });
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
}

function answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': status < 300 ? 'application/json' : 'application/problem+json', ...headers });
  res.end(JSON.stringify(body));
}

const unavailable = (retryAfterSeconds?: number) => (res: ServerResponse) =>
  answer(res, 503, { type: 'about:blank', title: 'Service Unavailable', status: 503 }, retryAfterSeconds === undefined ? {} : { 'Retry-After': String(retryAfterSeconds) });
const tooMany = (retryAfterSeconds: number) => (res: ServerResponse) =>
  answer(res, 429, { type: 'about:blank', title: 'Too Many Requests', status: 429 }, { 'Retry-After': String(retryAfterSeconds) });
const hangUp = (res: ServerResponse) => res.socket?.destroy();

const consume = {
  agentId: 'a',
  service: 'weather',
  tool: 'forecast',
  idempotencyKey: 'key-1',
  cost: { cents: 5, currency: 'USD' },
};

describe('retries', () => {
  const s = new Scripted();
  before(async () => {
    s.server.listen(0, '127.0.0.1');
    await new Promise((resolve) => s.server.once('listening', resolve));
  });
  after(() => new Promise((resolve) => s.server.close(resolve)));
  const client = (timeoutMs?: number) =>
    createStipendClient({ baseUrl: s.url, apiKey: 'k', retry: { minBackoffMs: 1, maxBackoffMs: 5 }, ...(timeoutMs ? { timeoutMs } : {}) });
  const reset = (...script: Scripted['script']): void => {
    s.seen.length = 0;
    s.script = script;
  };

  test('503s and network errors are retried with the same body, so the same key', async () => {
    reset(unavailable(), hangUp, unavailable());
    const { data } = await client().POST('/v1/consume', { body: consume });
    assert.equal(data?.result, 'consumed');
    assert.equal(s.seen.length, 4);
    assert.ok(s.seen.every((r) => r.body === s.seen[0]?.body && JSON.parse(r.body).idempotencyKey === 'key-1'));
  });

  test('a 429 is retried no sooner than its Retry-After', async () => {
    reset(tooMany(1));
    const { data } = await client().POST('/v1/consume', { body: consume });
    assert.equal(data?.result, 'consumed');
    assert.equal(s.seen.length, 2);
    const [first, second] = s.seen;
    assert.ok(second!.at - first!.at >= 1000, `retried after ${second!.at - first!.at} ms, want at least the Retry-After of 1 s`);
  });

  test('a Retry-After longer than MAX_RETRY_AFTER_MS ends the retries', async () => {
    reset(unavailable(MAX_RETRY_AFTER_MS / 1000 + 1));
    const { error, response } = await client().POST('/v1/consume', { body: consume });
    assert.equal(response.status, 503);
    assert.equal(error?.status, 503);
    assert.equal(s.seen.length, 1);
  });

  test('after the last attempt the last answer is returned', async () => {
    reset(unavailable(), unavailable(), unavailable(), unavailable());
    const { response } = await client().POST('/v1/consume', { body: consume });
    assert.equal(response.status, 503);
    assert.equal(s.seen.length, 4);
  });

  test('the deadline ends the retries: the last answer is returned', async () => {
    // The call's signal ends once the first answer is in, during the backoff
    // its Retry-After asks for.
    const deadline = new AbortController();
    const send = async (request: Request): Promise<Response> => {
      const res = await fetch(request);
      const body = await res.arrayBuffer();
      deadline.abort();
      return new Response(body, { status: res.status, headers: res.headers });
    };
    reset(unavailable(1), unavailable(1));
    const c = createStipendClient({ baseUrl: s.url, apiKey: 'k', fetch: send });
    const { response } = await c.POST('/v1/consume', { body: consume, signal: deadline.signal });
    assert.equal(response.status, 503);
    assert.equal(s.seen.length, 1, 'the deadline ended during the backoff: no second attempt');
  });

  test('a network error on the last attempt is thrown', async () => {
    reset(hangUp, hangUp, hangUp, hangUp);
    await assert.rejects(client().POST('/v1/consume', { body: consume }), TypeError);
    assert.equal(s.seen.length, 4);
  });

  test('a POST that is not safe to repeat is sent once; with an Idempotency-Key it is retried', async () => {
    reset(unavailable());
    // The one POST without an Idempotency-Key that is not safe to repeat.
    const once = await client().POST('/v1/webhooks/stripe', { params: { header: { 'Stripe-Signature': 't=1,v1=x' } }, body: {} });
    assert.equal(once.response.status, 503);
    assert.equal(s.seen.length, 1);
    reset(unavailable());
    const grant = { type: 'credits' as const, scope: { service: 'weather' }, amount: { cents: 5, currency: 'USD' } };
    await client().POST('/v1/accounts/{agentId}/entitlements', {
      params: { path: { agentId: 'a' }, header: { 'Idempotency-Key': 'g-1' } },
      body: grant,
    });
    assert.equal(s.seen.length, 2);
  });

  test('reads and the hold routes are retried', async () => {
    reset(unavailable());
    await client().GET('/v1/holds/{id}', { params: { path: { id: 'h1' } } });
    reset(unavailable());
    await client().POST('/v1/holds/{id}/capture', { params: { path: { id: 'h1' } }, body: { agentId: 'a' } });
    reset(unavailable());
    await client().POST('/v1/holds/{id}/release', { params: { path: { id: 'h1' } }, body: { agentId: 'a' } });
    assert.equal(s.seen.length, 2);
  });

  test('Retry-After is read in seconds only', () => {
    assert.equal(retryAfter('3'), 3000);
    assert.equal(retryAfter(' 0 '), 0);
    assert.equal(retryAfter('Wed, 21 Oct 2015 07:28:00 GMT'), 0);
    assert.equal(retryAfter(null), 0);
  });

  test('a base URL that is not absolute http(s) is refused', () => {
    for (const bad of ['', 'localhost:8080', 'ftp://x', '/v1']) {
      assert.throws(() => createStipendClient({ baseUrl: bad, apiKey: 'k' }), /absolute http\(s\) URL/);
    }
  });
});
