import { randomUUID } from 'node:crypto';

import type { CallToolRequest, CallToolResult, ListToolsResult, Tool } from '@modelcontextprotocol/sdk/types.js';

import { defaultAgentId } from './agent.js';
import { GatedCall, type Server, type Settings } from './call.js';
import {
  DEFAULT_HOLD_TTL_SECONDS,
  DEFAULT_TIMEOUT_MS,
  type GateConfig,
  MAX_HOLD_TTL_SECONDS,
  stderrLogger,
} from './config.js';
import { type KeyMaterial, requestStamp } from './key.js';
import { META } from './meta.js';
import { DEFAULT_POLICY, type Price, type Terms, free, priceProblem, termsOf, validName } from './price.js';
import { type CallContext, type HandlerContext, SUPPORTED_SDKS } from './sdk.js';
import { type WalletConfig, type WalletServer, registerWallet, walletOf } from './wallet.js';

/** A request handler as the SDK's Protocol stores it. */
type Handler = (request: { method: string; params?: unknown }, extra: HandlerContext) => unknown;

/**
 * The parts of the SDK's Server (McpServer.server) the gate hooks into. The
 * first argument of setRequestHandler is a zod schema of the request in SDK
 * 1.x and the method's name in 2.x.
 */
interface Protocol {
  setRequestHandler(schemaOrMethod: unknown, handler: Handler): void;
  assertCanSetRequestHandler(method: string): void;
  readonly transport?: object;
}

/**
 * An McpServer of either supported SDK (SUPPORTED_SDKS), as far as attach
 * needs to know it: the low-level server it wraps, and registerTool.
 */
export interface GateableServer {
  readonly server: object;
  registerTool(name: string, ...rest: never[]): unknown;
}

/** The servers a gate is attached to. */
const attached = new WeakSet<object>();

/** The servers addWallet added the wallet to. */
const withWallet = new WeakSet<object>();

/**
 * Charges the tool calls of an McpServer to Stipend: the TypeScript twin of
 * the Go gate (package mcpgate), with the same prices, policies,
 * idempotency keys, refusals and _meta. It attaches to the McpServer of
 * `@modelcontextprotocol/sdk` 1.x and of `@modelcontextprotocol/server` 2.x
 * alike. Build it once, attach it to each McpServer before registering
 * tools:
 *
 * ```ts
 * const gate = new Gate({ stipend, service: 'weather', prices: { echo: free(), forecast: credits(5, 'USD') } });
 * const server = gate.attach(new McpServer({ name: 'weather', version: '1.0.0' }));
 * server.registerTool('forecast', { inputSchema: { city: z.string() } }, async ({ city }) => …);
 * ```
 */
export class Gate {
  readonly #s: Settings;
  /** The wallet tool's name, once addWallet added it. */
  #walletTool: string | undefined;

  /** Checks config (every price as Stipend would check its charge) and builds the gate; it throws saying what is wrong. */
  constructor(config: GateConfig) {
    if (typeof config.stipend?.POST !== 'function') {
      throw new TypeError('stipend gate: config.stipend must be a Stipend client (createStipendClient)');
    }
    if (typeof config.service !== 'string' || !validName(config.service) || config.service === '*') {
      throw new RangeError(`stipend gate: config.service ${JSON.stringify(config.service)} must be 1–200 printable ASCII characters and not "*"`);
    }
    const policy = config.policy ?? DEFAULT_POLICY;
    if (policy !== 'on_success' && policy !== 'before') {
      throw new RangeError(`stipend gate: config.policy must be "on_success" or "before"; got ${JSON.stringify(policy)}`);
    }
    const prices = new Map<string, Price>();
    for (const [tool, price] of Object.entries(config.prices ?? {})) {
      if (!validName(tool)) {
        throw new RangeError(`stipend gate: tool name ${JSON.stringify(tool)} in prices must be 1–200 printable ASCII characters (Stipend's limit)`);
      }
      const problem = priceProblem(price);
      if (problem !== undefined) {
        throw new RangeError(`stipend gate: price of tool "${tool}" ${problem}`);
      }
      prices.set(tool, price);
    }
    const timeoutMs = config.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0)) {
      throw new RangeError(`stipend gate: config.timeoutMs must be positive; got ${timeoutMs}`);
    }
    const ttl = config.holdTtlSeconds ?? DEFAULT_HOLD_TTL_SECONDS;
    if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_HOLD_TTL_SECONDS) {
      throw new RangeError(`stipend gate: config.holdTtlSeconds must be whole seconds from 1 to ${MAX_HOLD_TTL_SECONDS}; got ${ttl}`);
    }
    const trust = config.trustClientAgentId === true;
    this.#s = {
      stipend: config.stipend,
      service: config.service,
      prices,
      policy,
      agentId: config.agentId ?? ((call) => defaultAgentId(call, trust)),
      failOpen: config.failOpen === true,
      timeoutMs,
      holdTtlSeconds: ttl,
      purchaseUrl: config.purchaseUrl || undefined,
      log: config.logger ?? stderrLogger,
    };
  }

  /** The service the gate charges for. */
  get service(): string {
    return this.#s.service;
  }

  /** How tool is charged, as tools/list shows it; undefined for a tool not in the price table. */
  terms(tool: string): Terms | undefined {
    const price = this.#s.prices.get(tool);
    return price && termsOf(price, this.#s.policy);
  }

  /**
   * Puts the gate in front of server's tools and returns server. Attach it
   * before the first registerTool: from then on every tools/call is charged
   * by its tool's price and policy, every tools/list entry shows its price
   * under `_meta["io.stipend/price"]`, and registering a tool that has no
   * price throws. It throws if server already handles tools (a tool was
   * registered, or the McpServer options declare capabilities.tools) or
   * already has a gate, and a TypeError naming the supported SDKs when
   * server is not an McpServer of one of them.
   */
  attach<S extends GateableServer>(server: S): S {
    const protocol = (server as { server?: unknown } | null | undefined)?.server as Partial<Protocol> | undefined;
    if (
      typeof protocol?.setRequestHandler !== 'function' ||
      typeof protocol.assertCanSetRequestHandler !== 'function' ||
      typeof (server as { registerTool?: unknown }).registerTool !== 'function'
    ) {
      throw new TypeError(`stipend gate: attach takes an McpServer of ${SUPPORTED_SDKS}; got ${describe(server)}`);
    }
    if (attached.has(server)) {
      throw new Error('stipend gate: this McpServer already has a gate');
    }
    for (const method of ['tools/call', 'tools/list']) {
      try {
        protocol.assertCanSetRequestHandler(method);
      } catch {
        throw new Error(
          `stipend gate: attach the gate before the first registerTool: this McpServer already handles ${method} ` +
            '(a tool was registered, or its options declare capabilities.tools, which installs the tool handlers at once)',
        );
      }
    }
    attached.add(server);
    this.#checkRegistrations(server);

    const gate = this;
    let listTools: Handler | undefined;
    const set = protocol.setRequestHandler.bind(protocol);
    protocol.setRequestHandler = (schema, handler) => {
      if (schema === 'tools/list' || accepts(schema, { method: 'tools/list' })) {
        listTools = handler;
      }
      set(schema, (request, extra) => {
        switch (request.method) {
          case 'tools/call':
            return gate.#call(request as CallToolRequest, extra, handler, () => listTools, protocol as Protocol);
          case 'tools/list':
            return gate.#list(handler(request, extra) as Promise<ListToolsResult>);
        }
        return handler(request, extra);
      });
    };
    return server;
  }

  /**
   * Adds the wallet as an MCP App (SEP-1865; docs/portal.md) to server, an
   * McpServer this gate is attached to: a free tool (config.toolName,
   * "wallet" by default, added to the price table) whose result carries a
   * portal session of the calling agent, the resource `ui://stipend/wallet`
   * that renders it, and a link to it (`_meta.ui.resourceUri`) in every
   * payment_required refusal. Call it once, before serving. It throws when
   * config is wrong, the price table already has another tool of that
   * name, or server already has the wallet. A gate attached to several
   * servers (one per HTTP session) may add the wallet to each.
   * The Go gate's AddWallet.
   */
  addWallet(server: WalletServer, config: WalletConfig): void {
    if (!attached.has(server)) {
      throw new Error('stipend gate: addWallet takes an McpServer the gate is attached to (gate.attach(server) first)');
    }
    if (withWallet.has(server)) {
      throw new Error('stipend gate: this McpServer already has the wallet');
    }
    const w = walletOf(config);
    const prices = this.#s.prices as Map<string, Price>;
    // A gate attached to several servers (one per HTTP session) adds the wallet to each under one name.
    if (prices.has(w.tool) && this.#walletTool !== w.tool) {
      throw new Error(`stipend gate: the price table already has a tool ${JSON.stringify(w.tool)}`);
    }
    prices.set(w.tool, free());
    this.#walletTool = w.tool;
    this.#s.walletLinked = true;
    registerWallet(server, w, this.#s);
    withWallet.add(server);
  }

  /** Makes registerTool (and 1.x's older tool) of server throw for a tool without a price. */
  #checkRegistrations(server: GateableServer): void {
    const prices = this.#s.prices;
    const check = (name: unknown): void => {
      if (typeof name === 'string' && !prices.has(name)) {
        throw new Error(
          `stipend gate: tool "${name}" has no price: add it to the gate's prices (free() if calls are not charged); ` +
            'the gate refuses every call of a tool without one',
        );
      }
    };
    const s = server as unknown as Partial<Record<'registerTool' | 'tool', (name: unknown, ...rest: unknown[]) => unknown>>;
    for (const method of ['registerTool', 'tool'] as const) {
      const registered = s[method];
      if (typeof registered !== 'function') {
        continue; // 2.x has no tool()
      }
      const original = registered.bind(server);
      s[method] = (name, ...rest) => {
        check(name);
        return original(name, ...rest);
      };
    }
  }

  /** Charges one tools/call and answers it. */
  async #call(
    request: CallToolRequest,
    extra: HandlerContext,
    handler: Handler,
    listTools: () => Handler | undefined,
    protocol: Protocol,
  ): Promise<CallToolResult> {
    const server: Server = {
      run: async (ex) => (await handler(request, ex)) as CallToolResult,
      declaresOutputSchema: (tool, ex) => declaresOutputSchema(listTools(), tool, ex),
      requestMaterial: (context) => requestMaterial(context, protocol),
    };
    return new GatedCall(this.#s, request, extra, server).handle();
  }

  /** Shows each priced tool's terms in its tools/list entry, keeping its other _meta. */
  async #list(result: Promise<ListToolsResult>): Promise<ListToolsResult> {
    const res = await result;
    return {
      ...res,
      tools: res.tools.map((tool: Tool): Tool => {
        const terms = this.terms(tool.name);
        return terms ? { ...tool, _meta: { ...tool._meta, [META.price]: terms } } : tool;
      }),
    };
  }
}

/** Reports whether schema (a zod schema of the SDK) accepts value; false when it cannot tell. */
function accepts(schema: unknown, value: unknown): boolean {
  const parse = (schema as { safeParse?: (v: unknown) => { success: boolean } } | null)?.safeParse;
  return typeof parse === 'function' && parse.call(schema, value).success;
}

/**
 * Reports whether tool may declare an output schema, by listing the
 * server's tools as a client would (the Go gate's declaresOutputSchema). It
 * answers true when it cannot tell, so that a refusal never goes where an
 * output schema could reject it.
 */
async function declaresOutputSchema(listTools: Handler | undefined, tool: string, extra: HandlerContext): Promise<boolean> {
  if (listTools === undefined) {
    return true;
  }
  try {
    const res = (await listTools({ method: 'tools/list', params: {} }, extra)) as ListToolsResult;
    const t = res.tools.find((t) => t.name === tool);
    return t !== undefined && t.outputSchema !== undefined;
  } catch {
    return true;
  }
}

/** The nonce of each connection (transport) of a server, for calls without a session. */
const nonces = new WeakMap<object, string>();

/**
 * The key material of a call without a client key, as mcpgate.Transport and
 * mcpgate.Handler stamp it: over streamable HTTP with a session, the session
 * id and "http:<session>/<id>"; stateless HTTP (no session), a fresh nonce
 * per request, so each post is a new call; any other transport (stdio,
 * in-memory), no session and a nonce of the connection.
 */
function requestMaterial(context: CallContext, protocol: Protocol): KeyMaterial {
  if (context.sessionId) {
    return { session: context.sessionId, request: requestStamp('http:' + context.sessionId, context.requestId) };
  }
  if (context.http) {
    return { session: '', request: requestStamp('http:' + randomUUID(), context.requestId) };
  }
  const transport = protocol.transport;
  if (transport === undefined) {
    return { session: '', request: requestStamp(randomUUID(), context.requestId) };
  }
  let nonce = nonces.get(transport);
  if (nonce === undefined) {
    nonce = randomUUID();
    nonces.set(transport, nonce);
  }
  return { session: '', request: requestStamp(nonce, context.requestId) };
}

/** What a value handed to attach is, for its error message. */
function describe(v: unknown): string {
  if (v === null || typeof v !== 'object') {
    return v === null ? 'null' : typeof v;
  }
  const name = (v as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? `an object of class ${name}` : 'an object';
}
