// The real Stipend for the tests: `stipend serve` on the memory store, in
// development mode, on a free loopback port, with its keys written by
// --dev-keys-out; and a billing client to fund agents.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { type StipendClient, createStipendClient } from '@stipend-mcp/stipend';

const buildBin = fileURLToPath(new URL('../../bin/', import.meta.url));

/** The built stipend binary: STIPEND_BIN, or build/bin/stipend (scripts/go-binaries.mjs). */
export const STIPEND_BIN = process.env.STIPEND_BIN || buildBin + 'stipend';

/** The built Go example server: PAIDTOOLS_BIN, or build/bin/paidtools. */
export const PAIDTOOLS_BIN = process.env.PAIDTOOLS_BIN || buildBin + 'paidtools';

/** A running `stipend serve`. */
export interface Stipend {
  readonly url: string;
  readonly keys: { readonly host: string; readonly billing: string; readonly admin: string };
  /** A client with the billing key. */
  readonly billing: StipendClient;
  /** What it logged so far. */
  logs(): string;
  /** Stops it (SIGKILL: nothing here tests its shutdown) and waits until it is gone. */
  stop(): Promise<void>;
}

/** Starts `stipend serve` and waits until it listens. */
export async function startStipend(): Promise<Stipend> {
  const dir = await mkdtemp(join(tmpdir(), 'stipend-ts-'));
  const keysFile = join(dir, 'keys.json');
  const p = spawnLogged(STIPEND_BIN, ['serve', '--addr', '127.0.0.1:0', '--dev-keys-out', keysFile], {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
  });
  const stop = async (): Promise<void> => {
    await p.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const addr = await p.awaitLog(listening, 'listening');
    const keys = JSON.parse(await readFile(keysFile, 'utf8')) as { host: string; billing: string; admin: string };
    const url = `http://${addr}`;
    return { url, keys, billing: createStipendClient({ baseUrl: url, apiKey: keys.billing }), logs: p.logs, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The address of stipend serve's "listening" log line, once it has logged it. */
function listening(logs: string): string | undefined {
  for (const line of logs.split('\n')) {
    if (!line.startsWith('{')) {
      continue;
    }
    const rec = JSON.parse(line) as { message?: string; addr?: string };
    if (rec.message === 'listening' && rec.addr) {
      return rec.addr;
    }
  }
  return undefined;
}

/** A server process whose stderr is kept. */
export interface Logged {
  /** What it logged so far. */
  logs(): string;
  /** Resolves with what find first finds in its log; rejects if it exits before (what: what it was waited for). */
  awaitLog(find: (logs: string) => string | undefined, what: string): Promise<string>;
  /** Stops it and waits until it is gone. SIGKILL: nothing here tests the servers' shutdown, and a graceful Go shutdown waits for connections Node's fetch may leave open. */
  stop(): Promise<void>;
}

/** Starts command with env, keeping what it writes to stderr. */
export function spawnLogged(command: string, args: readonly string[], env: Record<string, string>): Logged {
  const child = spawn(command, [...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let text = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  const exited = once(child, 'exit');
  return {
    logs: () => text,
    awaitLog: (find, what) =>
      new Promise((resolve, reject) => {
        const look = (): void => {
          const found = find(text);
          if (found !== undefined) {
            child.stderr.off('data', look);
            resolve(found);
          }
        };
        child.stderr.on('data', look);
        void exited.then(([code]) => reject(new Error(`${command} exited with ${String(code)} before ${what}; its log:\n${text}`)));
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/**
 * Gives agent cents of USD credits for service: a manual payment, completed,
 * as a billing integration does. Returns the credits entitlement's id.
 */
export async function fund(stipend: Stipend, agent: string, cents: number, service = 'weather', key = `fund-${agent}-${service}-${cents}`): Promise<string> {
  const created = await stipend.billing.POST('/v1/payments', {
    body: { agentId: agent, amount: { cents, currency: 'USD' }, provider: 'manual', grant: { type: 'credits', scope: { service } } },
    params: { header: { 'Idempotency-Key': key } },
  });
  if (!created.data) {
    throw new Error(`POST /v1/payments: ${created.response.status} ${JSON.stringify(created.error)}`);
  }
  const done = await stipend.billing.POST('/v1/payments/{id}/succeed', { params: { path: { id: created.data.id } } });
  const id = done.data?.entitlements?.[0]?.id;
  if (!id) {
    throw new Error(`POST /v1/payments/${created.data.id}/succeed: ${done.response.status} ${JSON.stringify(done.error ?? done.data)}`);
  }
  return id;
}

/** The entitlement's credits: balance and held cents. */
export async function credits(stipend: Stipend, entitlementId: string): Promise<{ balance: number; held: number }> {
  const got = await stipend.billing.GET('/v1/entitlements/{id}', { params: { path: { id: entitlementId } } });
  if (!got.data) {
    throw new Error(`GET /v1/entitlements/${entitlementId}: ${got.response.status} ${JSON.stringify(got.error)}`);
  }
  return { balance: got.data.credits?.balance.cents ?? 0, held: got.data.credits?.held?.cents ?? 0 };
}

/** The agent's consumptions, newest first. */
export async function consumptions(stipend: Stipend, agent: string): Promise<{ id: string; idempotencyKey: string; cost?: { cents: number } }[]> {
  const got = await stipend.billing.GET('/v1/accounts/{agentId}/consumptions', { params: { path: { agentId: agent }, query: { limit: 100 } } });
  if (!got.data) {
    throw new Error(`GET consumptions of ${agent}: ${got.response.status} ${JSON.stringify(got.error)}`);
  }
  return got.data.items;
}
