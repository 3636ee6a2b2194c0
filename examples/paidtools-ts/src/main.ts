#!/usr/bin/env node
// paidtools-ts is an example MCP server whose tools are paid through
// Stipend, the TypeScript twin of examples/paidtools: echo is free,
// forecast, history and hourly are priced (server.ts). Every tools/call
// passes the Stipend gate, which holds the price before the tool runs and
// charges the calling agent only when the tool succeeds (hourly: what it
// reports it cost).
//
// Configuration (environment):
//
//   STIPEND_URL             Stipend's base URL (default http://127.0.0.1:8080)
//   STIPEND_HOST_KEY        an API key with the host role (required)
//   PAIDTOOLS_SERVICE       the Stipend service name of these tools (default "weather")
//   PAIDTOOLS_AGENT_ID      charge every call to this agent (one agent per process,
//                           as with stdio); otherwise the request's _meta
//                           "io.stipend/agent-id"
//   PAIDTOOLS_ADDR          serve streamable HTTP on this address (such as
//                           127.0.0.1:8090, path /mcp); otherwise serve stdio
//   PAIDTOOLS_FAIL_OPEN     "true" runs calls uncharged while Stipend is down
//   PAIDTOOLS_PURCHASE_URL  where agents' owners buy credits, shown on refusals
//   PAIDTOOLS_TIMEOUT_MS    bounds each call to Stipend, retries included (default 5000)
//   PAIDTOOLS_PRICES        a JSON price table replacing the built-in one, such as
//                           {"echo":{"free":true},"forecast":{"cost":{"cents":7,"currency":"USD"},"policy":"before"}};
//                           every tool must have a price ("policy": "on_success",
//                           the default, or "before")
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';

import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Gate } from '@stipend-mcp/stipend';

import { loadConfig, newGate } from './config.js';
import { newServer } from './server.js';

function log(message: string): void {
  // stderr: with stdio, stdout carries the protocol.
  process.stderr.write(`paidtools-ts: ${message}\n`);
}

async function main(): Promise<void> {
  const c = loadConfig(process.env);
  const gate = newGate(c);
  const server = newServer(gate); // throws now for a tool without a price
  if (c.addr === undefined) {
    log(`serving MCP on stdio stipend=${c.stipendUrl} service=${c.service}`);
    await server.connect(new StdioServerTransport());
    const stop = (): void => void server.close().then(() => process.exit(0));
    process.once('SIGINT', stop).once('SIGTERM', stop);
    return;
  }
  await serveHTTP(c.addr, gate);
}

/** Serves streamable HTTP at /mcp on addr: one McpServer, gated, per session. */
async function serveHTTP(addr: string, gate: Gate): Promise<void> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer((req, res) => {
    handle(req, res, sessions, gate).catch((err: unknown) => {
      log(`request failed: ${String(err)}`);
      if (!res.headersSent) {
        res.writeHead(500).end();
      }
    });
  });
  const at = addr.lastIndexOf(':');
  const host = addr.slice(0, at) || '127.0.0.1';
  http.listen(Number(addr.slice(at + 1)), host);
  await new Promise<void>((resolve, reject) => http.once('listening', resolve).once('error', reject));
  const bound = http.address();
  const port = typeof bound === 'object' && bound !== null ? bound.port : 0;
  log(`serving MCP over streamable HTTP url=http://${host}:${port}/mcp`);
  const stop = (): void => {
    for (const t of sessions.values()) {
      void t.close();
    }
    http.close(() => process.exit(0));
    http.closeAllConnections();
  };
  process.once('SIGINT', stop).once('SIGTERM', stop);
}

async function handle(req: IncomingMessage, res: ServerResponse, sessions: Map<string, StreamableHTTPServerTransport>, gate: Gate): Promise<void> {
  if (new URL(req.url ?? '/', 'http://localhost').pathname !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  const id = req.headers['mcp-session-id'];
  const known = typeof id === 'string' ? sessions.get(id) : undefined;
  if (known) {
    await known.handleRequest(req, res);
    return;
  }
  const body = req.method === 'POST' ? await readJSON(req) : undefined;
  if (id !== undefined || !isInitializeRequest(body)) {
    res.writeHead(id === undefined ? 400 : 404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: id === undefined ? 'no session: initialize first' : 'unknown session' } }));
    return;
  }
  const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
    sessionIdGenerator: randomUUID,
    onsessioninitialized: (sid) => void sessions.set(sid, transport),
  });
  transport.onclose = () => {
    if (transport.sessionId) {
      sessions.delete(transport.sessionId);
    }
  };
  await newServer(gate).connect(transport);
  await transport.handleRequest(req, res, body);
}

async function readJSON(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

main().catch((err: unknown) => {
  log(String(err instanceof Error ? err.message : err));
  process.exit(1);
});
