// The harness of the TypeScript-client end-to-end tests: it starts the
// examples/paidtools binary over stdio or streamable HTTP, connects the
// official MCP TypeScript SDK's Client to it, and funds agents through
// Stipend's REST API.
//
// The Go test TestPaidTools_TypeScriptClient builds the binary, starts a
// Stipend on the memory store and runs `node --test` here with:
//
//	PAIDTOOLS_BIN        the built examples/paidtools binary
//	STIPEND_URL          the Stipend server
//	STIPEND_HOST_KEY     a key with the host role (the gate's)
//	STIPEND_BILLING_KEY  a key with the billing role (to fund agents)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** The _meta keys of the gate (mcpgate). */
export const META = {
  agentId: 'io.stipend/agent-id',
  idempotencyKey: 'io.stipend/idempotency-key',
  consumption: 'io.stipend/consumption',
  refusal: 'io.stipend/refusal',
  price: 'io.stipend/price',
};

/** The transports the example serves. */
export const TRANSPORTS = ['stdio', 'http'];

function required(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run these tests through go test ./examples/paidtools (TestPaidTools_TypeScriptClient)`);
  }
  return v;
}

export const env = {
  bin: required('PAIDTOOLS_BIN'),
  stipendURL: required('STIPEND_URL'),
  hostKey: required('STIPEND_HOST_KEY'),
  billingKey: required('STIPEND_BILLING_KEY'),
};

/**
 * Starts examples/paidtools over transport ('stdio' or 'http') with the
 * given environment on top of the defaults (this Stipend, its host key),
 * connects a Client and lists the tools, as hosts do before calling them (the
 * SDK then checks every result against its tool's output schema).
 * Returns { client, tools (a Map by name), close, logs (the server's stderr so far) }.
 */
export async function open(transport, settings = {}) {
  const serverEnv = { STIPEND_URL: env.stipendURL, STIPEND_HOST_KEY: env.hostKey, ...settings };
  const client = new Client({ name: 'paidtools-tsclient', version: '1.0.0' });
  let stop = async () => {};
  let logs;
  let clientTransport;
  if (transport === 'stdio') {
    clientTransport = new StdioClientTransport({ command: env.bin, env: serverEnv, stderr: 'pipe' });
    logs = collect(clientTransport.stderr);
  } else {
    const server = await startHTTP(serverEnv);
    ({ logs, stop } = server);
    clientTransport = new StreamableHTTPClientTransport(new URL(server.url));
  }
  const close = async () => {
    await client.close();
    await stop();
  };
  try {
    await client.connect(clientTransport);
    const { tools } = await client.listTools();
    return { client, tools: new Map(tools.map((t) => [t.name, t])), close, logs };
  } catch (err) {
    await close();
    throw new Error(`connecting to paidtools over ${transport}: ${err.message}; its log:\n${logs()}`);
  }
}

function collect(stream) {
  let text = '';
  stream?.on('data', (chunk) => { text += chunk; });
  return () => text;
}

// startHTTP starts the binary on a free loopback port and waits for the log
// line that gives its URL.
async function startHTTP(serverEnv) {
  const child = spawn(env.bin, [], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...serverEnv, PAIDTOOLS_ADDR: '127.0.0.1:0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const logs = collect(child.stderr);
  const exited = once(child, 'exit');
  // SIGKILL, not SIGTERM: after the SDK aborts its GET stream, Node's fetch
  // may open a connection it never sends on, and a graceful Go shutdown waits
  // up to 5 s for such a connection. Nothing here tests the shutdown.
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  const url = await new Promise((resolve, reject) => {
    const onData = () => {
      const m = /url=(http:\/\/\S+)/.exec(logs());
      if (m) {
        child.stderr.off('data', onData);
        resolve(m[1]);
      }
    };
    child.stderr.on('data', onData);
    exited.then(([code]) => reject(new Error(`paidtools exited with ${code} before serving; its log:\n${logs()}`)));
  });
  return { url, stop, logs };
}

/** A Stipend URL nothing listens on: a port taken and given back. */
export async function unreachableURL() {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return `http://127.0.0.1:${port}`;
}

async function stipend(method, path, body, headers = {}) {
  const res = await fetch(env.stipendURL + path, {
    method,
    headers: { Authorization: `Bearer ${env.billingKey}`, 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) {
    throw new Error(`${method} ${path}: ${res.status} ${text}`);
  }
  return JSON.parse(text);
}

/**
 * Gives agent cents USD of credits for the "weather" service: a manual
 * payment, completed, as a billing integration does. Returns the
 * completion (payment, receipt, entitlements).
 */
export async function fund(agent, cents, key = `fund-${agent}-${cents}`) {
  const payment = await stipend('POST', '/v1/payments', {
    agentId: agent,
    amount: { cents, currency: 'USD' },
    provider: 'manual',
    grant: { type: 'credits', scope: { service: 'weather' } },
  }, { 'Idempotency-Key': key });
  return stipend('POST', `/v1/payments/${payment.id}/succeed`);
}

/** Reads an entitlement (its credits.balance and credits.held) from Stipend. */
export function entitlement(id) {
  return stipend('GET', `/v1/entitlements/${encodeURIComponent(id)}`);
}

/**
 * Calls tool as agent (no agent when agent is empty), with an idempotency
 * key when key is set. The SDK's callTool throws when a result does not fit
 * the tool's output schema; these tests call it exactly as a host does.
 */
export function call(client, tool, args, { agent, key } = {}) {
  const meta = {};
  if (agent) meta[META.agentId] = agent;
  if (key) meta[META.idempotencyKey] = key;
  return client.callTool({ name: tool, arguments: args, _meta: meta });
}
