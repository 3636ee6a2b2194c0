/**
 * A typed client of Stipend's REST API: openapi-fetch over types generated
 * from the service's OpenAPI document (src/generated/openapi.ts, by
 * openapi-typescript; `npm run generate` regenerates them), with the Go
 * client's retries.
 *
 * ```ts
 * const stipend = createStipendClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.STIPEND_HOST_KEY! });
 * const { data, error, response } = await stipend.POST('/v1/consume', { body: { agentId, service, tool, idempotencyKey } });
 * ```
 *
 * @module
 */
import createClient, { type Client } from 'openapi-fetch';

import type { components, paths } from '../generated/openapi.js';
import { type Fetch, type RetryOptions, retryingFetch } from './retry.js';

export type { components, paths } from '../generated/openapi.js';
export { DEFAULT_RETRY, MAX_RETRY_AFTER_MS, type Fetch, type RetryOptions, retryAfter } from './retry.js';

/** The schemas of the API's JSON bodies, by name. */
export type Schemas = components['schemas'];
/** An amount of money in minor units (cents) of an ISO 4217 currency. */
export type Money = Schemas['Money'];
/** An RFC 9457 problem document: every error answer of the API. */
export type Problem = Schemas['Problem'];
/** A charged tool call. */
export type Consumption = Schemas['Consumption'];
/**
 * A portal session as POST /v1/portal-sessions answers it: the end user's
 * short-lived, single-agent credential (token) and the wallet page (url).
 * The token, passed as apiKey to createStipendClient, reads that agent's
 * wallet routes only (docs/portal.md).
 */
export type PortalSessionCreated = Schemas['PortalSessionCreated'];
/**
 * An agent's membership in a shared wallet (an account of kind "wallet"):
 * the order its calls spend in, and its caps inside the wallet.
 */
export type Membership = Schemas['Membership'];
/** One wallet an agent belongs to, with the wallet's balance and the room the member's spend limit leaves. */
export type WalletMembership = Schemas['WalletMembership'];
/** Why one entitlement could not pay, one of a 402 problem's reasons. */
export type Denial = NonNullable<Problem['reasons']>[number];

/**
 * The refusal by the caller's cap in a shared wallet among a 402 problem's
 * reasons (reason "member_limit_reached", naming memberId and limit), or
 * undefined.
 */
export function memberLimit(problem: unknown): Denial | undefined {
  if (typeof problem !== 'object' || problem === null) {
    return undefined;
  }
  const reasons = (problem as { reasons?: unknown }).reasons;
  if (!Array.isArray(reasons)) {
    return undefined;
  }
  return (reasons as Denial[]).find((d) => d?.reason === 'member_limit_reached');
}

/** A Stipend REST client: an openapi-fetch Client over the API's paths. */
export type StipendClient = Client<paths>;

/** How to reach Stipend. */
export interface StipendClientOptions {
  /** Stipend's base URL, such as "http://127.0.0.1:8080". */
  readonly baseUrl: string;
  /** An API key; the gate needs one with the host role. */
  readonly apiKey: string;
  /** How requests are retried; see retryingFetch. */
  readonly retry?: RetryOptions;
  /** Bounds every call, retries included, in milliseconds; absent: only the call's own signal does. */
  readonly timeoutMs?: number;
  /** The fetch to send through; absent: globalThis.fetch. */
  readonly fetch?: Fetch;
  /** The User-Agent header; absent: "stipend-ts-client". */
  readonly userAgent?: string;
}

/**
 * Returns a client of the Stipend at options.baseUrl. Requests that are
 * safe to repeat (every method but POST, POSTs with an Idempotency-Key
 * header, and the charge and state-change routes) are retried on network
 * errors, 503 and 429, with the same body and key, within the call's signal
 * (and options.timeoutMs). Error answers come back as `error` (a Problem)
 * with the `response`; network errors and the deadline are thrown.
 */
export function createStipendClient(options: StipendClientOptions): StipendClient {
  let base: URL;
  try {
    base = new URL(options.baseUrl);
  } catch {
    throw new Error(`stipend client: base URL ${JSON.stringify(options.baseUrl)} must be an absolute http(s) URL`);
  }
  if ((base.protocol !== 'http:' && base.protocol !== 'https:') || base.host === '') {
    throw new Error(`stipend client: base URL ${JSON.stringify(options.baseUrl)} must be an absolute http(s) URL`);
  }
  const baseUrl = base.href.replace(/\/+$/, '');
  const send: Fetch = options.fetch ?? ((request) => fetch(request));
  return createClient<paths>({
    baseUrl,
    headers: {
      Authorization: `Bearer ${options.apiKey}`,
      Accept: 'application/json, application/problem+json',
      'User-Agent': options.userAgent ?? 'stipend-ts-client',
    },
    fetch: retryingFetch(send, new URL(baseUrl).pathname.replace(/\/+$/, ''), options.retry, options.timeoutMs),
  });
}

/** Reports whether status means no entitlement covers the call (402). */
export function isPaymentRequired(status: number): boolean {
  return status === 402;
}

/**
 * Reports whether status is a conflict: 409 (a state change the resource
 * does not allow, a request in progress) or 422 (an idempotency key reused
 * with other parameters).
 */
export function isConflict(status: number): boolean {
  return status === 409 || status === 422;
}

/** Reports whether status means Stipend could not answer: a 5xx or a 429. */
export function isUnavailable(status: number): boolean {
  return status >= 500 || status === 429;
}

/** Prefixes every problem type URI (problem.TypeBase); the URIs are stable. */
export const PROBLEM_TYPE_BASE = 'https://stipend-mcp.github.io/stipend/problems/';

/**
 * The kind of a problem document, such as "hold-expired" or
 * "payment-required": its type URI without PROBLEM_TYPE_BASE; undefined for
 * anything else.
 */
export function problemKind(problem: unknown): string | undefined {
  if (typeof problem !== 'object' || problem === null) {
    return undefined;
  }
  const type = (problem as { type?: unknown }).type;
  return typeof type === 'string' && type.startsWith(PROBLEM_TYPE_BASE) ? type.slice(PROBLEM_TYPE_BASE.length) : undefined;
}
