import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';

import type { StipendClient } from '../client/index.js';
import type { Policy, Price } from './price.js';
import type { CallContext, HandlerContext } from './sdk.js';

/** The extra a tools/call handler gets from SDK 1.x (2.x hands a ServerContext; see HandlerContext). */
export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** A tools/call as the gate sees it, for GateConfig.agentId. */
export interface CallInfo {
  /** The tool's name. */
  readonly tool: string;
  /** The call's arguments, as the SDK delivers them. */
  readonly arguments: Readonly<Record<string, unknown>> | undefined;
  /** The request's _meta. */
  readonly meta: Readonly<Record<string, unknown>> | undefined;
  /** What the SDK hands the handler: 1.x's extra (authInfo, sessionId, requestId, signal, requestInfo) or 2.x's ctx. */
  readonly extra: HandlerContext;
  /** The parts of extra the gate reads, the same for both SDKs. */
  readonly context: CallContext;
}

/** Receives what the gate cannot tell the caller: Stipend failures, fail-open calls. */
export interface GateLogger {
  info(message: string, fields: Readonly<Record<string, unknown>>): void;
  warn(message: string, fields: Readonly<Record<string, unknown>>): void;
  error(message: string, fields: Readonly<Record<string, unknown>>): void;
}

/** Configures a Gate. */
export interface GateConfig {
  /** Charges the calls: a client with a host key (createStipendClient). */
  readonly stipend: StipendClient;
  /** The Stipend service name of this server's tools. */
  readonly service: string;
  /**
   * Each tool's price, by name. Registering a tool missing from the table
   * throws, and a call of a tool missing from it is refused
   * (tool_not_priced), so a forgotten price never gives a tool away.
   */
  readonly prices: Readonly<Record<string, Price>>;
  /** The policy of a priced tool whose price names none; absent: "on_success". */
  readonly policy?: Policy;
  /**
   * Returns the agent to charge for a call (undefined or "": the call is
   * refused with agent_unknown); absent: defaultAgentId.
   */
  readonly agentId?: (call: CallInfo) => string | undefined | Promise<string | undefined>;
  /**
   * Lets a call without verified auth info name its agent in
   * `_meta["io.stipend/agent-id"]` (defaultAgentId). Only for servers whose
   * clients may say who pays, such as a stdio server started by the agent's
   * own host. Absent: false.
   */
  readonly trustClientAgentId?: boolean;
  /**
   * Runs calls uncharged (their results marked `_meta["io.stipend/unbilled"]`)
   * when Stipend cannot be reached. Absent: false, the gate fails closed and
   * refuses such calls with a retryable billing_unavailable.
   */
  readonly failOpen?: boolean;
  /** Bounds each call to Stipend, retries included, in milliseconds; absent: 5000. */
  readonly timeoutMs?: number;
  /**
   * How long the hold of a call charged on success lasts, in whole seconds
   * (1–86400); a hold neither captured nor released (the server died) then
   * expires uncharged. Set it above the longest a tool may run: a tool still
   * running when its hold expires cannot be charged, and its result is
   * withheld. It is part of each hold's request, so it must match the Go
   * gate's Config.HoldTTL for one call retried through both gates to be
   * charged once. Absent: 300, the Go gate's default.
   */
  readonly holdTtlSeconds?: number;
  /** Where an agent's owner buys credits, shown in payment_required refusals. */
  readonly purchaseUrl?: string;
  /** Absent: lines on stderr (stdout carries the protocol of a stdio server). */
  readonly logger?: GateLogger;
}

/** Bounds each call to Stipend when GateConfig.timeoutMs is absent (the Go gate's DefaultTimeout). */
export const DEFAULT_TIMEOUT_MS = 5000;

/** The hold TTL when GateConfig.holdTtlSeconds is absent (entitlement.DefaultHoldTTL). */
export const DEFAULT_HOLD_TTL_SECONDS = 300;

/** The longest hold TTL Stipend takes (entitlement.MaxHoldTTL). */
export const MAX_HOLD_TTL_SECONDS = 86_400;

/** The default logger: one line per event on stderr. */
export const stderrLogger: GateLogger = {
  info: (message, fields) => line('info', message, fields),
  warn: (message, fields) => line('warn', message, fields),
  error: (message, fields) => line('error', message, fields),
};

function line(level: string, message: string, fields: Readonly<Record<string, unknown>>): void {
  process.stderr.write(`stipend gate: ${level}: ${message} ${JSON.stringify(fields, errorsAsText)}\n`);
}

function errorsAsText(_key: string, value: unknown): unknown {
  return value instanceof Error ? String(value) + (value.cause ? ` (${String(value.cause)})` : '') : value;
}
