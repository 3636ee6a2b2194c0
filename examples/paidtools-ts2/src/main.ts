#!/usr/bin/env node
// paidtools-ts2 is the example paid MCP server on the TypeScript SDK 2.x
// (@modelcontextprotocol/server): echo is free, forecast costs 5 cents or a
// quota unit and is charged when it succeeds, hourly costs a cent an hour and
// reports what a call really cost. Over HTTP it serves stateless streamable
// HTTP (MCP 2026-07-28, and 2025 clients statelessly): a new McpServer per
// request, each behind the one gate, so any number of instances can stand
// behind one address.
//
// Configuration (environment):
//
//   STIPEND_URL             Stipend's base URL (default http://127.0.0.1:8080)
//   STIPEND_HOST_KEY        an API key with the host role (required)
//   PAIDTOOLS_ADDR          serve HTTP on this address (such as 127.0.0.1:8090,
//                           path /mcp); otherwise serve stdio
//   PAIDTOOLS_PURCHASE_URL  where agents' owners buy credits, shown on refusals
//
// The agent who pays is named by the client in _meta["io.stipend/agent-id"]
// (trustClientAgentId): fine for a server its agent's own host starts.
import { createServer } from 'node:http';

import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { Gate, centsOrUnits, createStipendClient, creditsOrUnits, free, reportCost } from '@stipend-mcp/stipend';
import { z } from 'zod';

import { nodeListener } from './http.js';

const MAX_HOURS = 24;

/** Builds the server, behind gate. */
function newServer(gate: Gate): McpServer {
  const server = gate.attach(new McpServer({ name: 'paidtools-ts2', version: '1.0.0' }));
  server.registerTool('echo', { description: 'Free: sends the text back.', inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool(
    'forecast',
    { description: "Paid (5 cents or 1 quota unit): tomorrow's weather for a city.", inputSchema: z.object({ city: z.string() }) },
    async ({ city }) => ({ content: [{ type: 'text', text: `sunny in ${city}` }] }),
  );
  server.registerTool(
    'hourly',
    {
      description: 'Paid by the hour (a cent an hour, at most 24): temperatures for the next hours.',
      inputSchema: z.object({ city: z.string(), hours: z.number().int() }),
    },
    async ({ city, hours }, ctx) => {
      if (hours < 1 || hours > MAX_HOURS) {
        throw new Error(`hours must be 1 to ${MAX_HOURS}`);
      }
      reportCost(ctx, centsOrUnits(hours, 'USD', Math.ceil(hours / 6)));
      return { content: [{ type: 'text', text: `${city}: ${hours} hours of mild weather` }] };
    },
  );
  return server;
}

async function main(): Promise<void> {
  const apiKey = process.env.STIPEND_HOST_KEY;
  if (!apiKey) {
    throw new Error('STIPEND_HOST_KEY is required (an API key with the host role)');
  }
  const gate = new Gate({
    stipend: createStipendClient({ baseUrl: process.env.STIPEND_URL || 'http://127.0.0.1:8080', apiKey }),
    service: 'weather',
    prices: { echo: free(), forecast: creditsOrUnits(5, 'USD', 1), hourly: creditsOrUnits(MAX_HOURS, 'USD', 4) },
    trustClientAgentId: true,
    purchaseUrl: process.env.PAIDTOOLS_PURCHASE_URL || undefined,
  });
  const addr = process.env.PAIDTOOLS_ADDR;
  if (!addr) {
    await newServer(gate).connect(new StdioServerTransport());
    return;
  }
  const handler = createMcpHandler(() => newServer(gate));
  const http = createServer(nodeListener(handler));
  const i = addr.lastIndexOf(':');
  http.listen(Number(addr.slice(i + 1)), addr.slice(0, i));
  await new Promise((resolve) => http.once('listening', resolve));
  const { address, port } = http.address() as { address: string; port: number };
  process.stderr.write(`paidtools-ts2: serving stateless streamable HTTP url=http://${address}:${port}/mcp\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`paidtools-ts2: ${String(err)}\n`);
  process.exit(1);
});
