import type { CallInfo } from './config.js';
import { META } from './meta.js';

/**
 * Names the agent to charge for a call, as the Go gate's DefaultAgentID
 * does:
 *
 * 1. when the request carries verified auth info (1.x: extra.authInfo; 2.x:
 *    ctx.http.authInfo; set by the SDK's requireBearerAuth or your
 *    transport), its `extra.agentId` — set it in your token verifier — and
 *    nothing else;
 * 2. otherwise, only if trustClientAgentId, the request's
 *    `_meta["io.stipend/agent-id"]`.
 *
 * Undefined means the call names no agent, and the gate refuses it
 * (agent_unknown).
 */
export function defaultAgentId(call: CallInfo, trustClientAgentId: boolean): string | undefined {
  const auth = call.context.authInfo;
  if (auth !== undefined) {
    return nonEmpty(auth.extra?.agentId);
  }
  return trustClientAgentId ? nonEmpty(call.meta?.[META.agentId]) : undefined;
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}
