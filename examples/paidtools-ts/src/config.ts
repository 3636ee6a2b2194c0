import { Gate, type GateConfig, type Price, createStipendClient } from '@stipend-mcp/stipend';

import { PRICES } from './server.js';

/** The example's settings, read from the environment (see main.ts). */
export interface Config {
  readonly stipendUrl: string;
  readonly hostKey: string;
  readonly service: string;
  readonly agentId: string | undefined;
  readonly addr: string | undefined;
  readonly failOpen: boolean;
  readonly purchaseUrl: string | undefined;
  /** Bounds each call to Stipend, retries included; undefined: the gate's default (5 s). */
  readonly timeoutMs: number | undefined;
  /** Replaces the built-in price table when set. */
  readonly prices: Readonly<Record<string, Price>> | undefined;
}

/** Reads the settings from env; it throws saying which one is wrong. */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const hostKey = env.STIPEND_HOST_KEY ?? '';
  if (hostKey === '') {
    throw new Error('STIPEND_HOST_KEY is required (an API key with the host role)');
  }
  let failOpen = false;
  if (env.PAIDTOOLS_FAIL_OPEN) {
    if (env.PAIDTOOLS_FAIL_OPEN !== 'true' && env.PAIDTOOLS_FAIL_OPEN !== 'false') {
      throw new Error(`PAIDTOOLS_FAIL_OPEN: ${JSON.stringify(env.PAIDTOOLS_FAIL_OPEN)} is not true or false`);
    }
    failOpen = env.PAIDTOOLS_FAIL_OPEN === 'true';
  }
  let timeoutMs: number | undefined;
  if (env.PAIDTOOLS_TIMEOUT_MS) {
    timeoutMs = Number(env.PAIDTOOLS_TIMEOUT_MS);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
      throw new Error(`PAIDTOOLS_TIMEOUT_MS: ${JSON.stringify(env.PAIDTOOLS_TIMEOUT_MS)} is not a positive whole number of milliseconds`);
    }
  }
  let prices: Record<string, Price> | undefined;
  if (env.PAIDTOOLS_PRICES) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(env.PAIDTOOLS_PRICES);
    } catch (err) {
      throw new Error(`PAIDTOOLS_PRICES: ${String(err)}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new Error('PAIDTOOLS_PRICES: want one JSON object of tool names and prices');
    }
    prices = parsed as Record<string, Price>; // the gate checks each price
  }
  return {
    stipendUrl: env.STIPEND_URL || 'http://127.0.0.1:8080',
    hostKey,
    service: env.PAIDTOOLS_SERVICE || 'weather',
    agentId: env.PAIDTOOLS_AGENT_ID || undefined,
    addr: env.PAIDTOOLS_ADDR || undefined,
    failOpen,
    purchaseUrl: env.PAIDTOOLS_PURCHASE_URL || undefined,
    timeoutMs,
    prices,
  };
}

/** The gate of c, charging through a Stipend client. */
export function newGate(c: Config, overrides: Partial<GateConfig> = {}): Gate {
  const agent = c.agentId;
  return new Gate({
    stipend: createStipendClient({ baseUrl: c.stipendUrl, apiKey: c.hostKey, userAgent: 'paidtools-ts' }),
    service: c.service,
    prices: c.prices ?? PRICES,
    failOpen: c.failOpen,
    purchaseUrl: c.purchaseUrl,
    ...(c.timeoutMs ? { timeoutMs: c.timeoutMs } : {}),
    // One agent per process, or the one each call names in its _meta: this
    // example trusts its clients to say who pays, as the Go example does. A
    // server open to untrusted clients verifies tokens instead (authInfo).
    ...(agent ? { agentId: () => agent } : { trustClientAgentId: true }),
    ...overrides,
  });
}
