// The gate behind the SDK's streamable HTTP transport, in process: the
// Go gate's key vectors posted byte for byte are charged under the Go gate's
// keys, and a verified token names the agent.
import assert from 'node:assert/strict';
import { type IncomingMessage, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';

import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { type Charge, Gate, type GateConfig, META, type Refusal, createStipendClient, credits } from '@stipend-mcp/stipend';

import { VECTORS } from './support/vectors.js';
import { type Stipend, consumptions, fund, startStipend } from './support/stipend.js';

const PROTOCOL = '2025-06-18';

/** A node:http server handing every request to the transport of the moment. */
class Host {
  transport: StreamableHTTPServerTransport | undefined;
  readonly server: Server = createServer((req, res) => {
    // What the SDK's requireBearerAuth does after verifying a token: here
    // the "token" is the agent itself ("none": a token without one).
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (bearer) {
      const auth: AuthInfo = { token: bearer, clientId: 'client-app', scopes: [], extra: bearer === 'none' ? {} : { agentId: bearer } };
      (req as IncomingMessage & { auth?: AuthInfo }).auth = auth;
    }
    void this.transport?.handleRequest(req, res);
  });
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/mcp`;
  }

  /** Serves a new session (id sessionId) of server. */
  async serve(server: McpServer, sessionId: string): Promise<void> {
    await this.transport?.close();
    this.transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => sessionId, enableJsonResponse: true });
    await server.connect(this.transport);
  }

  /** Posts body as it is and returns the JSON-RPC answer. */
  async post(body: string, session?: string, token?: string): Promise<{ result?: { _meta?: Record<string, unknown> }; error?: unknown }> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    if (session) {
      headers['Mcp-Session-Id'] = session;
      headers['Mcp-Protocol-Version'] = PROTOCOL;
    }
    if (token) {
      headers.Authorization = `Bearer ${token}`;
    }
    const res = await fetch(this.url, { method: 'POST', headers, body });
    const text = await res.text();
    assert.ok(res.ok, `POST ${body}: ${res.status} ${text}`);
    return text === '' ? {} : (JSON.parse(text) as { result?: { _meta?: Record<string, unknown> } });
  }

  /** Initializes a session. */
  async initialize(session: string): Promise<void> {
    await this.post(
      JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
    );
    await this.post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), session);
  }
}

describe('gate over streamable HTTP, in process', () => {
  let stipend: Stipend;
  const host = new Host();
  before(async () => {
    stipend = await startStipend();
    host.server.listen(0, '127.0.0.1');
    await new Promise((resolve) => host.server.once('listening', resolve));
  });
  after(async () => {
    await host.transport?.close();
    await new Promise((resolve) => host.server.close(resolve));
    await stipend?.stop();
  });
  const config = (service: string, more: Partial<GateConfig> = {}): GateConfig => ({
    stipend: createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host }),
    service,
    timeoutMs: 60_000, // a loaded test machine is slow
    prices: Object.fromEntries(['forecast', 'history', 'echo', 'calc'].map((t) => [t, { ...credits(1, 'USD'), policy: 'before' as const }])),
    ...more,
  });
  const serverOf = (gate: Gate): McpServer => {
    const server = gate.attach(new McpServer({ name: 'http-test', version: '1' }));
    for (const tool of ['forecast', 'history', 'echo', 'calc']) {
      server.registerTool(tool, {}, async () => ({ content: [{ type: 'text', text: 'ok' }] }));
    }
    return server;
  };

  test("the Go gate's key vectors, posted byte for byte, are charged under the Go gate's keys", async () => {
    const agent = 'vectors';
    await fund(stipend, agent, 1000, 'weather');
    await fund(stipend, agent, 1000, 'maps');
    // SDK 1.x drops a request's requestState (it has no input-required flow), so no such call reaches the gate.
    for (const v of VECTORS.filter((v) => v.requestState === undefined)) {
      await host.serve(serverOf(new Gate(config(v.service, { agentId: () => agent }))), v.sessionId);
      await host.initialize(v.sessionId);
      const meta = v.clientKey ? `,"_meta":{"${META.idempotencyKey}":${JSON.stringify(v.clientKey)}}` : '';
      const args = v.arguments === undefined ? '' : `,"arguments":${v.arguments}`;
      const body = `{"jsonrpc":"2.0","id":${JSON.stringify(v.requestId)},"method":"tools/call","params":{"name":${JSON.stringify(v.tool)}${args}${meta}}}`;
      const answer = await host.post(body, v.sessionId);
      const charge = answer.result?._meta?.[META.consumption] as Charge | undefined;
      assert.ok(charge, `${v.name}: not charged: ${JSON.stringify(answer)}`);
      const key = (await consumptions(stipend, agent)).find((c) => c.id === charge.consumptionId)?.idempotencyKey;
      if (v.agrees) {
        assert.equal(key, v.key, `${v.name}: charged under another key than the Go gate's`);
      } else {
        assert.notEqual(key, v.key, `${v.name}: the gates now agree; mark the vector agrees: true`);
      }
    }
  });

  test('a verified token names the agent, and then _meta does not', async () => {
    const gate = new Gate(config('weather', { trustClientAgentId: true }));
    await fund(stipend, 'token-agent', 10);
    await host.serve(serverOf(gate), 'auth-session');
    await host.initialize('auth-session');
    const callAs = (id: number, meta: string, token?: string) =>
      host.post(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"forecast","arguments":{},"_meta":${meta}}}`, 'auth-session', token);

    const byToken = await callAs(1, `{"${META.agentId}":"someone-else"}`, 'token-agent');
    const charge = byToken.result?._meta?.[META.consumption] as Charge | undefined;
    assert.ok(charge, JSON.stringify(byToken));
    assert.deepEqual(charge.balanceAfter, { cents: 9, currency: 'USD' }, 'the token agent paid');
    // A token whose verifier set no agentId names no agent, whatever _meta says.
    const noAgent = await callAs(2, `{"${META.agentId}":"token-agent"}`, 'none');
    assert.equal((noAgent.result?._meta?.[META.refusal] as Refusal | undefined)?.error, 'agent_unknown', JSON.stringify(noAgent));
  });
});
