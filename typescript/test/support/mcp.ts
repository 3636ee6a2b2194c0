// MCP plumbing for the tests: the SDK's own Client connected to a server in
// process (in-memory transports), or to a server process over stdio or
// streamable HTTP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { type Charge, META, type Refusal } from '@stipend-mcp/stipend';
import assert from 'node:assert/strict';

import { spawnLogged } from './stipend.js';

/** A Client connected to a server, with the tools it listed. */
export interface Session {
  readonly client: Client;
  readonly tools: ReadonlyMap<string, Tool>;
  /** What the server process logged so far ("" in process). */
  logs(): string;
  close(): Promise<void>;
}

/**
 * Connects a Client to server in process and lists the tools, as hosts do
 * before calling them (the SDK then checks every result against its tool's
 * output schema).
 */
export async function connect(server: McpServer): Promise<Session> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'stipend-ts-test', version: '1.0.0' });
  await client.connect(clientSide);
  return listed(client, () => '', async () => {
    await client.close();
    await server.close();
  });
}

async function listed(client: Client, logs: () => string, close: () => Promise<void>): Promise<Session> {
  try {
    const { tools } = await client.listTools();
    return { client, tools: new Map(tools.map((t) => [t.name, t])), logs, close };
  } catch (err) {
    await close();
    throw new Error(`listing the tools: ${String(err)}; the server's log:\n${logs()}`);
  }
}

/** The transports the example servers serve. */
export const TRANSPORTS = ['stdio', 'http'] as const;
export type TransportName = (typeof TRANSPORTS)[number];

/**
 * Starts a server program (command and args) over transport with env on top
 * of PATH and HOME, connects a Client and lists the tools. Over HTTP the
 * program gets PAIDTOOLS_ADDR=127.0.0.1:0 and its log must say
 * "url=http://…".
 */
export async function spawnSession(transport: TransportName, command: string, args: readonly string[], env: Record<string, string>): Promise<Session> {
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env };
  const client = new Client({ name: 'stipend-ts-test', version: '1.0.0' });
  if (transport === 'stdio') {
    const t = new StdioClientTransport({ command, args: [...args], env: base, stderr: 'pipe' });
    let text = '';
    t.stderr?.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
    });
    try {
      await client.connect(t);
    } catch (err) {
      throw new Error(`connecting over stdio to ${command}: ${String(err)}; its log:\n${text}`);
    }
    return listed(client, () => text, () => client.close());
  }
  const server = await startHTTP(command, args, { ...base, PAIDTOOLS_ADDR: '127.0.0.1:0' });
  const close = async (): Promise<void> => {
    await client.close();
    await server.stop();
  };
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
  } catch (err) {
    await server.stop();
    throw new Error(`connecting over HTTP to ${command}: ${String(err)}; its log:\n${server.logs()}`);
  }
  return listed(client, server.logs, close);
}

/** A server process serving streamable HTTP. */
export interface HTTPServer {
  readonly url: string;
  logs(): string;
  stop(): Promise<void>;
}

/** Starts command and waits for the log line that gives its URL. */
export async function startHTTP(command: string, args: readonly string[], env: Record<string, string>): Promise<HTTPServer> {
  const p = spawnLogged(command, args, env);
  const url = await p.awaitLog((text) => /url=(http:\/\/\S+)/.exec(text)?.[1], 'serving');
  return { url, logs: p.logs, stop: p.stop };
}

/** Options of one call. */
export interface CallOptions {
  /** The agent, in _meta["io.stipend/agent-id"]. */
  readonly agent?: string;
  /** The client's idempotency key, in _meta["io.stipend/idempotency-key"]. */
  readonly key?: string;
  readonly signal?: AbortSignal;
}

/** Calls tool as a host does (callTool throws on a result that does not fit the tool's output schema). */
export async function call(session: Session, tool: string, args: Record<string, unknown> | undefined, o: CallOptions = {}): Promise<CallToolResult> {
  const meta: Record<string, unknown> = {};
  if (o.agent) {
    meta[META.agentId] = o.agent;
  }
  if (o.key) {
    meta[META.idempotencyKey] = o.key;
  }
  const opts = o.signal ? { signal: o.signal } : undefined;
  return (await session.client.callTool({ name: tool, ...(args ? { arguments: args } : {}), _meta: meta }, undefined, opts)) as CallToolResult;
}

/** The charge of a successful result. */
export function charged(res: CallToolResult): Charge {
  assert.notEqual(res.isError, true, `result is an error: ${JSON.stringify(res)}`);
  const charge = res._meta?.[META.consumption] as Charge | undefined;
  assert.ok(charge?.consumptionId, `result has no ${META.consumption}: ${JSON.stringify(res)}`);
  return charge;
}

/**
 * The refusal of a refused call, after checking it is one every client can
 * read: isError, one text containing its message, the refusal in _meta, and
 * structuredContent only for a tool without an output schema.
 */
export function refused(session: Session, res: CallToolResult, tool: string): Refusal {
  assert.equal(res.isError, true, `result of ${tool} is not an error: ${JSON.stringify(res)}`);
  const refusal = res._meta?.[META.refusal] as Refusal | undefined;
  assert.ok(refusal, `result of ${tool} has no ${META.refusal}: ${JSON.stringify(res)}`);
  assert.equal(res.content.length, 1, `refusal of ${tool} has ${res.content.length} contents, want one text`);
  const text = res.content[0]?.type === 'text' ? res.content[0].text : '';
  assert.ok(text.includes(refusal.message), `text ${JSON.stringify(text)} does not include the message ${JSON.stringify(refusal.message)}`);
  assert.equal(refusal.tool, tool);
  if (session.tools.get(tool)?.outputSchema) {
    assert.equal(res.structuredContent, undefined, `refusal of ${tool}, a tool with an output schema, has structuredContent`);
  } else {
    assert.deepEqual(res.structuredContent, refusal, `refusal of ${tool}, a tool without an output schema: structuredContent is not the refusal`);
  }
  return refusal;
}
