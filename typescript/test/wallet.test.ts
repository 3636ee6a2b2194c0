// The wallet as an MCP App (Gate.addWallet), on a real Stipend (stipend
// serve, memory store), as the official Clients of SDK 1.x and 2.x see it:
// the free wallet tool mints the calling agent's portal session, the
// ui://stipend/wallet resource is the app's HTML, and a payment_required
// refusal links the app. The Go gate's mcpgate/wallet_test.go.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { Client as ClientV2, InMemoryTransport as InMemoryV2 } from '@modelcontextprotocol/client';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Gate, META, WALLET, type WalletSession, createStipendClient, credits, free } from '@stipend-mcp/stipend';

import { type Session, call, connect, refused } from './support/mcp.js';
import { type Stipend, fund, startStipend } from './support/stipend.js';

const APP = readFileSync(new URL('../../../portal/dist/wallet.html', import.meta.url), 'utf8');

describe('wallet', () => {
  let stipend: Stipend;
  before(async () => {
    stipend = await startStipend();
  });
  after(async () => {
    await stipend?.stop();
  });

  const gate = (): Gate =>
    new Gate({
      stipend: createStipendClient({ baseUrl: stipend.url, apiKey: stipend.keys.host }),
      service: 'weather',
      prices: { echo: free(), plain: credits(5, 'USD') },
      trustClientAgentId: true,
      timeoutMs: 60_000,
    });
  const walletConfig = () => ({ minter: stipend.billing, stipendUrl: stipend.url + '/ignored/path' });

  /** A 1.x McpServer with the gate, a paid tool and the wallet. */
  function server(): McpServer {
    const g = gate();
    const s = g.attach(new McpServer({ name: 'wallet-test', version: '1.0.0' }));
    s.registerTool('plain', {}, async () => ({ content: [{ type: 'text', text: 'ran' }] }));
    g.addWallet(s, walletConfig());
    return s;
  }

  /** GET path on Stipend with the session's token; the status. */
  async function get(ps: WalletSession, path: string): Promise<number> {
    const r = await fetch(ps.api + path, { headers: { Authorization: `Bearer ${ps.token}` } });
    await r.body?.cancel();
    return r.status;
  }

  /** Checks a wallet tool result: agent's session, usable for its balance only, hidden from the model. */
  async function checkSession(res: Awaited<ReturnType<typeof call>>, agent: string): Promise<void> {
    assert.notEqual(res.isError, true, JSON.stringify(res));
    const ps = res._meta?.[WALLET.metaPortalSession] as WalletSession;
    assert.equal(ps.agentId, agent);
    assert.equal(ps.api, stipend.url);
    assert.match(ps.token, /^stp_portal_/);
    const ttl = Date.parse(ps.expiresAt) - Date.now();
    assert.ok(ttl > 14 * 60_000 && ttl <= 15 * 60_000 + 1000, `expiresAt ${ps.expiresAt}: want the default 15 minutes from now`);
    assert.deepEqual(res.structuredContent, { agentId: agent, expiresAt: ps.expiresAt });
    const text = res.content[0]?.type === 'text' ? res.content[0].text : '';
    assert.ok(text.includes(agent) && !text.includes(ps.token), `text ${JSON.stringify(text)}`);
    assert.equal(await get(ps, `/v1/accounts/${agent}/balance`), 200, "the session reading its agent's balance");
    assert.equal(await get(ps, '/v1/accounts/agent-2/balance'), 401, "the session reading another agent's balance");
  }

  describe('SDK 1.x', () => {
    let s: Session;
    before(async () => {
      await fund(stipend, 'agent-1', 500);
      s = await connect(server());
    });
    after(async () => {
      await s?.close();
    });

    test('tools/list shows the free wallet tool and its app', () => {
      const tool = s.tools.get(WALLET.toolName);
      assert.ok(tool, 'tools/list has no wallet tool');
      assert.deepEqual(tool._meta?.ui, { resourceUri: WALLET.uri });
      assert.equal(tool._meta?.['ui/resourceUri'], WALLET.uri);
      assert.deepEqual(tool._meta?.[META.price], { free: true });
    });

    test("the wallet tool mints the calling agent's portal session", async () => {
      await checkSession(await call(s, WALLET.toolName, undefined, { agent: 'agent-1' }), 'agent-1');
    });

    test('the wallet tool without an agent is an error', async () => {
      const res = await call(s, WALLET.toolName, undefined);
      assert.equal(res.isError, true);
      assert.equal(res._meta?.[WALLET.metaPortalSession], undefined);
    });

    test('resources/read answers the app', async () => {
      const rr = await s.client.readResource({ uri: WALLET.uri });
      const c = rr.contents[0] as { uri: string; mimeType?: string; text?: string; _meta?: Record<string, unknown> };
      assert.equal(c.mimeType, 'text/html;profile=mcp-app');
      assert.equal(c.text, APP, 'the resource is not portal/dist/wallet.html');
      assert.deepEqual(c._meta, { ui: { csp: { connectDomains: [stipend.url] }, prefersBorder: true } });
    });

    test('a payment_required refusal links the app; other refusals do not', async () => {
      const res = await call(s, 'plain', undefined, { agent: 'agent-broke' });
      assert.equal(refused(s, res, 'plain').error, 'payment_required');
      assert.deepEqual(res._meta?.ui, { resourceUri: WALLET.uri });
      const unknown = await call(s, 'plain', undefined);
      assert.equal(refused(s, unknown, 'plain').error, 'agent_unknown');
      assert.equal(unknown._meta?.ui, undefined);
    });
  });

  test('SDK 2.x: the wallet tool, the resource and the link', async () => {
    await fund(stipend, 'agent-3', 500);
    const g = gate();
    const server = g.attach(new McpServerV2({ name: 'wallet-test-v2', version: '1.0.0' }));
    server.registerTool('plain', {}, async () => ({ content: [{ type: 'text', text: 'ran' }] }));
    g.addWallet(server, walletConfig());
    const [clientSide, serverSide] = InMemoryV2.createLinkedPair();
    await server.connect(serverSide);
    const client = new ClientV2({ name: 'wallet-test-v2', version: '1.0.0' });
    await client.connect(clientSide);
    try {
      const { tools } = await client.listTools();
      const tool = tools.find((t) => t.name === WALLET.toolName);
      assert.deepEqual(tool?._meta?.ui, { resourceUri: WALLET.uri });
      const s = { client: client as unknown as Session['client'], tools: new Map(tools.map((t) => [t.name, t as never])), logs: () => '', close: async () => {} };
      await checkSession(await call(s, WALLET.toolName, undefined, { agent: 'agent-3' }), 'agent-3');
      const rr = await client.readResource({ uri: WALLET.uri });
      const c = rr.contents[0] as { mimeType?: string; text?: string };
      assert.equal(c.mimeType, WALLET.mimeType);
      assert.equal(c.text, APP);
      const res = await call(s, 'plain', undefined, { agent: 'agent-broke' });
      assert.equal(refused(s, res, 'plain').error, 'payment_required');
      assert.deepEqual(res._meta?.ui, { resourceUri: WALLET.uri });
    } finally {
      await client.close();
      await server.close();
    }
  });

  test('addWallet checks its configuration and the tool name', () => {
    const g = gate();
    const s = g.attach(new McpServer({ name: 'wallet-check', version: '1.0.0' }));
    assert.throws(() => g.addWallet(new McpServer({ name: 'other', version: '1.0.0' }), walletConfig()), /attached/);
    assert.throws(() => g.addWallet(s, { ...walletConfig(), minter: undefined as never }), /minter/);
    assert.throws(() => g.addWallet(s, { ...walletConfig(), stipendUrl: 'ftp://x' }), /stipendUrl/);
    assert.throws(() => g.addWallet(s, { ...walletConfig(), ttlSeconds: 1 }), /ttlSeconds/);
    assert.throws(() => g.addWallet(s, { ...walletConfig(), toolName: 'echo' }), /already has a tool "echo"/);
    g.addWallet(s, walletConfig());
    assert.throws(() => g.addWallet(s, walletConfig()), /already has the wallet/);
    // The same gate on a second server (one per HTTP session) adds it there too.
    g.addWallet(g.attach(new McpServer({ name: 'wallet-check-2', version: '1.0.0' })), walletConfig());
  });
});
