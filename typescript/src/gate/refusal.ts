import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

import type { Consumption, Money, Problem } from '../client/index.js';
import { META } from './meta.js';
import { type Terms, describeTerms } from './price.js';

/**
 * The kinds of refusal, as the Go gate names them (mcpgate/refusal.go):
 *
 * - `payment_required`: no entitlement of the agent covers the call;
 * - `billing_unavailable`: Stipend could not be reached and the gate fails
 *   closed; the call may be retried (`retryable`);
 * - `idempotency_key_conflict`: the call's idempotency key was used before
 *   for a different charge;
 * - `agent_unknown`: the call does not say which agent pays;
 * - `tool_not_priced`: the tool is not in the price table;
 * - `billing_error`: Stipend refused the charge for another reason (the
 *   gate's configuration or key); the server's log says which;
 * - `idempotency_key_spent` (on_success): an earlier attempt of the same
 *   call under the same key ended without a charge (its hold was released
 *   or expired), so it is not run again under that key;
 * - `hold_expired` (on_success): the tool ran longer than its hold lasts,
 *   so the call could not be charged; its result was withheld.
 */
export type RefusalKind =
  | 'payment_required'
  | 'billing_unavailable'
  | 'idempotency_key_conflict'
  | 'agent_unknown'
  | 'tool_not_priced'
  | 'billing_error'
  | 'idempotency_key_spent'
  | 'hold_expired';

/** Why one entitlement could not pay (a 402's reasons). */
export type Denial = NonNullable<Problem['reasons']>[number];

/**
 * The machine-readable answer to a call the gate refused instead of running
 * its tool: the result's `_meta["io.stipend/refusal"]`, and also its
 * structuredContent when the tool declares no output schema.
 */
export interface Refusal {
  readonly error: RefusalKind;
  readonly message: string;
  readonly service: string;
  readonly tool: string;
  /** How the call is charged, when the tool has a price. */
  readonly price?: Terms;
  /** Why each of the agent's entitlements could not pay. */
  readonly reasons?: readonly Denial[];
  /** Where credits can be bought. */
  readonly purchaseUrl?: string;
  /** True when the same call may succeed if sent again. */
  readonly retryable?: true;
}

/** Explains a reason that names no entitlement (the Go gate's noEntitlement). */
const NO_ENTITLEMENT = 'this agent has no entitlement for it';

/**
 * The refusal as the model (and the person behind it) reads it, such as
 * "payment required: no entitlement of this agent covers tool forecast.
 * Price per call: 5 cents USD or 1 unit, charged before the tool runs.
 * Reasons: not_found (this agent has no entitlement for it). Buy credits at
 * https://example.com/buy." (the Go gate's Refusal.Text, word for word; the
 * shared vectors in mcpgate/testdata/vectors/refusals.json check it). The
 * purchase URL is in the text because hosts drop the structuredContent of
 * error results.
 */
export function refusalText(r: Refusal): string {
  let text = r.message;
  if (r.price) {
    const terms = describeTerms(r.price);
    switch (r.price.policy) {
      case 'on_success':
        text += `. Price per call: at most ${terms}, charged only if the tool succeeds`;
        break;
      case 'before':
        text += `. Price per call: ${terms}, charged before the tool runs`;
        break;
      default:
        text += `. Price per call: ${terms}`;
    }
  }
  (r.reasons ?? []).forEach((d, i) => {
    text += (i === 0 ? '. Reasons:' : ';') + ` ${d.reason} (${d.entitlementId ? `entitlement ${d.entitlementId}` : NO_ENTITLEMENT})`;
  });
  if (r.purchaseUrl) {
    text += '. Buy credits at ' + r.purchaseUrl;
  }
  return text + '.';
}

/**
 * The tool result of a refusal: isError, one text for the model, the
 * refusal in _meta, and as structuredContent when structured is true (the
 * tool declares no output schema, which a refusal could never match).
 */
export function refusalResult(r: Refusal, structured: boolean): CallToolResult {
  const result: CallToolResult = {
    content: [{ type: 'text', text: refusalText(r) }],
    isError: true,
    _meta: { [META.refusal]: r },
  };
  if (structured) {
    result.structuredContent = { ...r };
  }
  return result;
}

/**
 * What the gate puts in a charged call's result, under
 * `_meta["io.stipend/consumption"]`: the Go gate's Charge, and the hold of
 * an `on_success` call.
 */
export interface Charge {
  readonly consumptionId: string;
  /** "consumed", or "replay" when the call had been charged before under its key and nothing was charged now. */
  readonly result: 'consumed' | 'replay';
  readonly entitlementId: string;
  readonly cost?: Money;
  readonly units?: number;
  /** The credits entitlement's balance right after the charge. */
  readonly balanceAfter?: Money;
  /** The quota entitlement's remaining units right after the charge. */
  readonly remainingAfter?: number;
  /** The hold the charge was captured from (policy on_success). */
  readonly holdId?: string;
}

/** The Charge of a consumption. */
export function chargeOf(c: Consumption & { holdId?: string }, result: Charge['result']): Charge {
  const charge: { -readonly [K in keyof Charge]: Charge[K] } = {
    consumptionId: c.id,
    result,
    entitlementId: c.entitlementId,
  };
  if (c.cost && (c.cost.cents !== 0 || c.cost.currency !== '')) {
    charge.cost = c.cost;
  }
  if (c.units) {
    charge.units = c.units;
  }
  if (c.balanceAfter) {
    charge.balanceAfter = c.balanceAfter;
  }
  if (c.remainingAfter !== undefined) {
    charge.remainingAfter = c.remainingAfter;
  }
  if (c.holdId) {
    charge.holdId = c.holdId;
  }
  return charge;
}
