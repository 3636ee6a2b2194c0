/**
 * Stipend for MCP servers built on the official TypeScript SDK: a Gate that
 * charges each tool call of an McpServer to Stipend (the twin of the Go
 * gate, package mcpgate), and a typed client of Stipend's REST API.
 *
 * @module
 */
export { Gate, type GateableServer } from './gate/gate.js';
export {
  type CallInfo,
  DEFAULT_HOLD_TTL_SECONDS,
  DEFAULT_TIMEOUT_MS,
  type GateConfig,
  type GateLogger,
  MAX_HOLD_TTL_SECONDS,
  type ToolExtra,
  stderrLogger,
} from './gate/config.js';
export { defaultAgentId } from './gate/agent.js';
export { type AuthInfoView, type CallContext, type HandlerContext, SUPPORTED_SDKS, type ServerContextV2, requestMeta } from './gate/sdk.js';
export { type Amount, cents, centsOrUnits, reportCost, unitsUsed } from './gate/amount.js';
export { META } from './gate/meta.js';
export { WALLET, type WalletConfig, type WalletServer, type WalletSession } from './gate/wallet.js';
export {
  DEFAULT_POLICY,
  type FreePrice,
  LIMITS,
  type PaidPrice,
  type Policy,
  type Price,
  type Terms,
  credits,
  creditsOrUnits,
  describeTerms,
  free,
  termsOf,
  units,
} from './gate/price.js';
export { type Charge, type Denial, type Refusal, type RefusalKind, refusalText } from './gate/refusal.js';
export { type KeyMaterial, argumentsJSON, idempotencyKey, requestStamp } from './gate/key.js';
export * from './client/index.js';
