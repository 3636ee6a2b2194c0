import type { ToolExtra } from './config.js';

/**
 * The SDKs a Gate attaches to, and how their request handlers see a call.
 *
 * - `@modelcontextprotocol/sdk` 1.x: `McpServer.server.setRequestHandler(zodSchema, (request, extra) => …)`,
 *   where extra has signal, sessionId, requestId, authInfo and requestInfo.
 * - `@modelcontextprotocol/server` 2.x: `McpServer.server.setRequestHandler('tools/call', (request, ctx) => …)`,
 *   where ctx has sessionId, mcpReq.{id, signal} and http.{authInfo, req}.
 */
export const SUPPORTED_SDKS = '@modelcontextprotocol/sdk 1.x (McpServer) or @modelcontextprotocol/server 2.x (McpServer)';

/** The verified auth info of a request, as both SDKs carry it (only extra is read). */
export interface AuthInfoView {
  readonly extra?: Readonly<Record<string, unknown>>;
}

/** The context a 2.x handler gets (ServerContext of @modelcontextprotocol/server), as far as the gate reads it. */
export interface ServerContextV2 {
  readonly sessionId?: string;
  readonly mcpReq: {
    readonly id: string | number;
    readonly signal: AbortSignal;
    readonly requestState?: () => unknown;
    readonly _meta?: Readonly<Record<string, unknown>>;
  };
  readonly http?: { readonly authInfo?: AuthInfoView; readonly req?: unknown };
}

/** What a tool handler gets besides its arguments: 1.x's extra or 2.x's ctx. Pass it to reportCost. */
export type HandlerContext = ToolExtra | ServerContextV2;

/** One call's context, the same whichever SDK delivered it. */
export interface CallContext {
  /** Aborts when the client cancels the request or the connection ends. */
  readonly signal: AbortSignal;
  /** The streamable HTTP session, if any. */
  readonly sessionId: string | undefined;
  /** The JSON-RPC id of the request. */
  readonly requestId: string | number;
  /** Verified auth info (a bearer token the server checked), if any. */
  readonly authInfo: AuthInfoView | undefined;
  /** True when the request came over HTTP. */
  readonly http: boolean;
  /**
   * The requestState of a request that continues a call after an
   * input-required result. SDK 2.x lifts it off the params before handlers
   * run and hands it over through ctx.mcpReq.requestState(); 1.x leaves it in
   * the params (undefined here).
   */
  readonly requestState: string | undefined;
}

/** Reads ctx, whichever SDK made it. */
export function callContext(ctx: HandlerContext): CallContext {
  if ('mcpReq' in ctx) {
    return {
      signal: ctx.mcpReq.signal,
      sessionId: ctx.sessionId || undefined,
      requestId: ctx.mcpReq.id,
      authInfo: ctx.http?.authInfo,
      http: ctx.http !== undefined,
      requestState: liftedState(ctx),
    };
  }
  return {
    signal: ctx.signal,
    sessionId: ctx.sessionId || undefined,
    requestId: ctx.requestId,
    authInfo: ctx.authInfo,
    http: ctx.requestInfo !== undefined,
    requestState: undefined,
  };
}

/** The requestState SDK 2.x lifted off a request: as sent when it is a string, else its JSON. */
function liftedState(ctx: ServerContextV2): string | undefined {
  let v: unknown;
  try {
    v = ctx.mcpReq.requestState?.();
  } catch {
    return undefined; // state the server's codec rejects: the SDK refuses the request anyway
  }
  if (v === undefined || v === null) {
    return undefined;
  }
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** The _meta of the request ctx belongs to, whichever SDK made ctx (1.x: extra._meta; 2.x: ctx.mcpReq._meta). */
export function requestMeta(ctx: HandlerContext): Readonly<Record<string, unknown>> | undefined {
  return 'mcpReq' in ctx ? ctx.mcpReq._meta : ctx._meta;
}
