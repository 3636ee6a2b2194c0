import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

import type { StipendClient } from '../client/index.js';
import type { CallInfo } from './config.js';
import { type HandlerContext, callContext, requestMeta } from './sdk.js';

/**
 * The wallet as an MCP App (SEP-1865; docs/portal.md): a free tool that
 * shows the calling agent's wallet, the ui:// resource that renders it, and
 * the link from payment_required refusals to it. The Go gate's
 * mcpgate.AddWallet.
 */
export const WALLET = {
  /** The default name of the wallet tool. */
  toolName: 'wallet',
  /** The wallet app's resource. */
  uri: 'ui://stipend/wallet',
  /** The resource's mimeType: an MCP App's HTML. */
  mimeType: 'text/html;profile=mcp-app',
  /** The wallet tool result's _meta key holding the WalletSession the app reads the wallet with. */
  metaPortalSession: 'io.stipend/portal-session',
} as const;

/** The shortest and longest session a wallet mints, in seconds (portal.MinTTL, portal.MaxTTL). */
const MIN_TTL_SECONDS = 60;
const MAX_TTL_SECONDS = 86_400;

/** Configures Gate.addWallet. */
export interface WalletConfig {
  /**
   * Mints the calling agent's portal session: a client with a billing (or
   * admin) key. The gate's own client has a host key, which cannot mint;
   * the app gets only the session, never this key.
   */
  readonly minter: StipendClient;
  /**
   * The origin the app calls Stipend at, such as
   * "https://billing.example.com": hosts let the app connect there (the
   * resource's `_meta.ui.csp.connectDomains`).
   */
  readonly stipendUrl: string;
  /** How long each session lasts, in whole seconds from 60 to 86400; absent: 900 (15 minutes). */
  readonly ttlSeconds?: number;
  /** The tool's name; absent: "wallet". */
  readonly toolName?: string;
}

/** What the wallet tool gives the app under `_meta["io.stipend/portal-session"]`: where Stipend is, and the session's token. */
export interface WalletSession {
  readonly api: string;
  readonly agentId: string;
  readonly token: string;
  readonly expiresAt: string;
}

/** An McpServer of either SDK, as far as addWallet uses it. */
export interface WalletServer {
  registerTool(name: string, ...rest: never[]): unknown;
  registerResource(name: string, uri: string, ...rest: never[]): unknown;
}

/** What the gate needs to know of the wallet and its own settings to serve the tool. */
export interface WalletGate {
  readonly agentId: (call: CallInfo) => string | undefined | Promise<string | undefined>;
  readonly timeoutMs: number;
  readonly log: { error(message: string, fields: Readonly<Record<string, unknown>>): void };
}

/** The wallet's checked configuration. */
export interface Wallet {
  readonly minter: StipendClient;
  readonly origin: string;
  readonly ttlSeconds: number;
  readonly tool: string;
}

/** Checks c; it throws saying what is wrong. */
export function walletOf(c: WalletConfig): Wallet {
  if (typeof c?.minter?.POST !== 'function') {
    throw new TypeError('stipend gate: WalletConfig.minter is required (a Stipend client with a billing key)');
  }
  let u: URL | undefined;
  try {
    u = new URL(c.stipendUrl);
  } catch {
    u = undefined;
  }
  if (u === undefined || (u.protocol !== 'https:' && u.protocol !== 'http:') || u.host === '') {
    throw new RangeError(`stipend gate: WalletConfig.stipendUrl ${JSON.stringify(c.stipendUrl)}: want an origin such as https://billing.example.com`);
  }
  const ttl = c.ttlSeconds ?? 900;
  if (!Number.isInteger(ttl) || ttl < MIN_TTL_SECONDS || ttl > MAX_TTL_SECONDS) {
    throw new RangeError(`stipend gate: WalletConfig.ttlSeconds ${ttl}: want whole seconds from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS}`);
  }
  return { minter: c.minter, origin: u.origin, ttlSeconds: ttl, tool: c.toolName || WALLET.toolName };
}

/** The wallet app's HTML, shipped in the package (dist/wallet.html, copied from portal/dist at build). */
export function walletHTML(): string {
  return readFileSync(new URL('../wallet.html', import.meta.url), 'utf8');
}

/** Registers the wallet tool and resource on server. */
export function registerWallet(server: WalletServer, w: Wallet, g: WalletGate): void {
  const html = walletHTML();
  const ui = { ui: { resourceUri: WALLET.uri }, 'ui/resourceUri': WALLET.uri };
  const register = server.registerTool as unknown as (name: string, config: object, cb: (...args: unknown[]) => unknown) => unknown;
  register.call(
    server,
    w.tool,
    {
      title: 'Wallet',
      description: "Show the user the wallet that pays for this server's tools: balance, usage, receipts, and a top-up button. Free.",
      _meta: ui,
    },
    // No input schema: SDK 1.x and 2.x hand the handler only its extra (ctx).
    (...args: unknown[]) => showWallet(w, g, args[args.length - 1] as HandlerContext),
  );
  const resMeta = { ui: { csp: { connectDomains: [w.origin] }, prefersBorder: true } };
  const resource = server.registerResource as unknown as (name: string, uri: string, config: object, cb: () => unknown) => unknown;
  resource.call(server, 'wallet', WALLET.uri, { title: 'Wallet', mimeType: WALLET.mimeType, _meta: resMeta }, () => ({
    contents: [{ uri: WALLET.uri, mimeType: WALLET.mimeType, text: html, _meta: resMeta }],
  }));
}

/**
 * The wallet tool: it mints a portal session of the calling agent and
 * gives it to the app (in _meta, which hosts do not show the model), and
 * tells the model what it did.
 */
async function showWallet(w: Wallet, g: WalletGate, extra: HandlerContext): Promise<CallToolResult> {
  const context = callContext(extra);
  let agent: string | undefined;
  try {
    agent = await g.agentId({ tool: w.tool, arguments: undefined, meta: requestMeta(extra), extra, context });
  } catch {
    agent = undefined;
  }
  if (!agent) {
    return walletError('the wallet cannot be shown: the call does not say which agent it is for');
  }
  let answer;
  try {
    answer = await w.minter.POST('/v1/portal-sessions', {
      params: { header: { 'Idempotency-Key': randomUUID() } },
      body: { agentId: agent, ttlSeconds: w.ttlSeconds },
      signal: AbortSignal.any([context.signal, AbortSignal.timeout(g.timeoutMs)]),
    });
  } catch (err) {
    answer = { data: undefined, error: err };
  }
  const ps = answer.data;
  if (ps === undefined) {
    g.log.error("minting the wallet's portal session failed", { agent, err: answer.error });
    return walletError('the wallet is unavailable right now; try again shortly');
  }
  const session: WalletSession = { api: w.origin, agentId: agent, token: ps.token, expiresAt: ps.expiresAt };
  return {
    content: [
      {
        type: 'text',
        text: `Showing the wallet of agent ${agent} (balance, usage, receipts, top-up). Its session ends at ${rfc3339(ps.expiresAt)}.`,
      },
    ],
    structuredContent: { agentId: agent, expiresAt: ps.expiresAt },
    _meta: { [WALLET.metaPortalSession]: session },
  };
}

/** t in whole seconds, UTC (Go's time.RFC3339), as the Go gate says it. */
function rfc3339(t: string): string {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toISOString().replace(/\.\d+Z$/, 'Z');
}

function walletError(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/** res, a payment_required refusal, pointed at the wallet app. */
export function linkWallet(res: CallToolResult): CallToolResult {
  return { ...res, _meta: { ...res._meta, ui: { resourceUri: WALLET.uri } } };
}
