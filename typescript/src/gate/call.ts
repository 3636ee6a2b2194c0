import type { CallToolRequest, CallToolResult } from '@modelcontextprotocol/sdk/types.js';

import {
  type Problem,
  type Schemas,
  type StipendClient,
  isConflict,
  isPaymentRequired,
  isUnavailable,
  problemKind,
} from '../client/index.js';
import { Meter, meters } from './amount.js';
import type { CallInfo, GateLogger } from './config.js';
import { type KeyMaterial, idempotencyKey } from './key.js';
import { META } from './meta.js';
import { type PaidPrice, type Policy, type Price, termsOf } from './price.js';
import { type Charge, type Refusal, type RefusalKind, chargeOf, refusalResult } from './refusal.js';
import { type CallContext, type HandlerContext, callContext } from './sdk.js';
import { linkWallet } from './wallet.js';

/** What a Gate decided at construction; every call reads it. */
export interface Settings {
  readonly stipend: StipendClient;
  readonly service: string;
  readonly prices: ReadonlyMap<string, Price>;
  readonly policy: Policy;
  readonly agentId: (call: CallInfo) => string | undefined | Promise<string | undefined>;
  readonly failOpen: boolean;
  readonly timeoutMs: number;
  readonly holdTtlSeconds: number;
  readonly purchaseUrl: string | undefined;
  readonly log: GateLogger;
  /** Set by Gate.addWallet: payment_required refusals link the wallet app. */
  walletLinked?: boolean;
}

/** The server's side of one call: run the tool, read its declaration, know the connection. */
export interface Server {
  /** Runs the call's tool (the SDK's tools/call handler) with extra. */
  run(extra: HandlerContext): Promise<CallToolResult>;
  /** Whether the tool may declare an output schema (true when unknown). */
  declaresOutputSchema(tool: string, extra: HandlerContext): Promise<boolean>;
  /** The key material of a call without a client key. */
  requestMaterial(context: CallContext): KeyMaterial;
}

type Hold = Schemas['Hold'];

/** An answer of Stipend: the data of a 2xx, or the status (0: none) and problem of a failure. */
type Answer<T> = { ok: true; data: T } | { ok: false; status: number; problem: Problem | undefined; error: unknown };

async function ask<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<Answer<T>> {
  try {
    const r = await p;
    if (r.data !== undefined) {
      return { ok: true, data: r.data };
    }
    const problem = typeof r.error === 'object' && r.error !== null ? (r.error as Problem) : undefined;
    return { ok: false, status: r.response.status, problem, error: r.error };
  } catch (error) {
    return { ok: false, status: 0, problem: undefined, error }; // no answer: network, deadline
  }
}

/** Reports whether a failed answer is a 409 of the problem kind (such as "hold-expired"). */
function is409(a: { status: number; problem: Problem | undefined }, kind: string): boolean {
  return a.status === 409 && problemKind(a.problem) === kind;
}

/** res with _meta[key] = value. */
function withMeta(res: CallToolResult, key: string, value: unknown): CallToolResult {
  return { ...res, _meta: { ...res._meta, [key]: value } };
}

/**
 * One tools/call passing the gate: the Go gate's gatedCall (mcpgate
 * middleware.go, before.go, onsuccess.go), decision for decision.
 */
export class GatedCall {
  readonly tool: string;
  readonly context: CallContext;
  price: Price | undefined;
  agent = '';

  constructor(
    readonly s: Settings,
    readonly request: CallToolRequest,
    readonly extra: HandlerContext,
    readonly server: Server,
  ) {
    this.tool = request.params.name;
    this.context = callContext(extra);
  }

  /** Charges the call by its tool's policy and answers it. */
  async handle(): Promise<CallToolResult> {
    const refusal = await this.admit();
    if (refusal) {
      return this.refuse(refusal);
    }
    const price = this.price as Price;
    if (price.free === true) {
      return this.server.run(this.extra);
    }
    return (price.policy ?? this.s.policy) === 'before' ? this.chargeBefore(price) : this.chargeOnSuccess(price);
  }

  /** Looks up the price and, for a priced tool, the agent; the refusal of a call that cannot be charged at all. */
  async admit(): Promise<Refusal | undefined> {
    this.price = this.s.prices.get(this.tool);
    if (this.price === undefined) {
      return this.plain('tool_not_priced', `tool ${this.tool} has no price configured, so it is not available`);
    }
    if (this.price.free === true) {
      return undefined;
    }
    const p = this.request.params;
    const info: CallInfo = { tool: this.tool, arguments: p.arguments, meta: p._meta, extra: this.extra, context: this.context };
    let agent: string | undefined;
    try {
      agent = await this.s.agentId(info);
    } catch (err) {
      this.s.log.warn('the agentId function failed', { tool: this.tool, err });
    }
    if (!agent) {
      return this.refusal('agent_unknown', `tool ${this.tool} is paid, and the call does not say which agent pays for it`);
    }
    this.agent = agent;
    return undefined;
  }

  /** The idempotency key of the call (key.ts). */
  key(): string {
    const p = this.request.params;
    const clientKey = p._meta?.[META.idempotencyKey];
    const material: KeyMaterial =
      typeof clientKey === 'string' && clientKey !== '' ? { clientKey } : this.server.requestMaterial(this.context);
    const raw = (p as { requestState?: unknown }).requestState;
    const state = typeof raw === 'string' ? raw : this.context.requestState;
    return idempotencyKey(this.s.service, this.tool, p.arguments, material, state);
  }

  /** PolicyBefore: consume, then run; the charge stands whatever the tool does. */
  async chargeBefore(price: PaidPrice): Promise<CallToolResult> {
    const s = this.s;
    const answer = await ask(
      s.stipend.POST('/v1/consume', {
        body: { agentId: this.agent, service: s.service, tool: this.tool, idempotencyKey: this.key(), cost: price.cost, units: price.units },
        signal: this.deadline(),
      }),
    );
    if (!answer.ok) {
      const refusal = this.deny(answer);
      return refusal ? this.refuse(refusal) : this.runUnbilled();
    }
    const { result, consumption } = answer.data;
    if (consumption === undefined || (result !== 'consumed' && result !== 'replay')) {
      s.log.error('Stipend answered a consume without a consumption', { tool: this.tool, result });
      return this.refuse(this.plain('billing_error', 'the call could not be charged because of a billing configuration error'));
    }
    let out: CallToolResult;
    try {
      out = await this.server.run(this.extra);
    } catch (err) {
      if (result === 'consumed') {
        s.log.warn('tool failed after it was charged', { tool: this.tool, consumption: consumption.id, err });
      }
      throw err;
    }
    if (out.isError === true && result === 'consumed') {
      s.log.warn('tool failed after it was charged', { tool: this.tool, consumption: consumption.id });
    }
    return withMeta(out, META.consumption, chargeOf(consumption, result));
  }

  /**
   * PolicyOnSuccess: authorize a hold of the price, run the tool, capture
   * (what the tool reported, else the price) when it succeeded, release when
   * it failed or the request was cancelled. An authorize that replays finds
   * the hold as it is now: captured (the call was charged: run again, charge
   * nothing more), released or expired (refused: idempotency_key_spent), or
   * open (another attempt holds it: run and, on success, capture; never
   * release a hold this attempt does not own).
   */
  async chargeOnSuccess(price: PaidPrice): Promise<CallToolResult> {
    const s = this.s;
    const answer = await ask(
      s.stipend.POST('/v1/authorize', {
        body: {
          agentId: this.agent,
          service: s.service,
          tool: this.tool,
          idempotencyKey: this.key(),
          maxCost: price.cost,
          maxUnits: price.units,
          ttlSeconds: s.holdTtlSeconds,
        },
        signal: this.deadline(),
      }),
    );
    if (!answer.ok) {
      const refusal = this.deny(answer);
      return refusal ? this.refuse(refusal) : this.runUnbilled();
    }
    const hold = answer.data.hold;
    const owner = answer.data.result === 'held';
    const meter = new Meter(this.tool, price, s.log);
    if (!owner) {
      if (hold.status === 'captured') {
        const res = await this.runMetered(meter);
        return withMeta(res, META.consumption, replayOf(hold));
      }
      if (hold.status === 'released' || hold.status === 'expired') {
        return this.refuse(this.spent(hold));
      }
    }
    if (this.context.signal.aborted) {
      // Cancelled while authorizing: do not start the work. The SDK sends no answer.
      if (owner) {
        await this.release(hold);
      }
      throw new Error('the call was cancelled');
    }
    let res: CallToolResult;
    try {
      res = await this.runMetered(meter);
    } catch (err) {
      if (owner) {
        await this.release(hold);
      }
      throw err;
    }
    // A task's handle (task-augmented calls, experimental in the SDK) is not
    // the work done, and neither is a result asking for input (SDK 2.x's
    // multi-round-trip flow): the request that finishes the call is charged.
    if (res.isError === true || this.context.signal.aborted || 'task' in res || needsInput(res)) {
      if (owner) {
        await this.release(hold);
      }
      return res;
    }
    return this.capture(hold, meter, res);
  }

  /** Runs the tool with meter in place for reportCost. */
  async runMetered(meter: Meter): Promise<CallToolResult> {
    meters.set(this.extra, meter);
    try {
      return await this.server.run(this.extra);
    } finally {
      meters.delete(this.extra);
    }
  }

  /** Charges the hold what the tool reported (else the price) and answers res with the charge. */
  async capture(hold: Hold, meter: Meter, res: CallToolResult): Promise<CallToolResult> {
    const s = this.s;
    const a = meter.amount();
    const answer = await ask(
      s.stipend.POST('/v1/holds/{id}/capture', {
        params: { path: { id: hold.id } },
        body: { agentId: this.agent, cost: a.cost, units: a.units },
        signal: AbortSignal.timeout(s.timeoutMs), // outlives the request
      }),
    );
    if (answer.ok) {
      const result = answer.data.result === 'captured' ? 'consumed' : 'replay'; // replay: another attempt captured it
      return withMeta(res, META.consumption, chargeOf(answer.data.consumption, result));
    }
    if (is409(answer, 'hold-expired')) {
      s.log.error(
        "the tool ran past its hold's expiry, so the call cannot be charged; its result is withheld (raise holdTtlSeconds above the tool's longest run)",
        { tool: this.tool, agent: this.agent, hold: hold.id, expiresAt: hold.expiresAt, holdTtlSeconds: s.holdTtlSeconds },
      );
      return this.refuse(
        this.refusal('hold_expired', 'the tool ran longer than its charge could be held, so the call was not charged and its result was withheld'),
      );
    }
    if (is409(answer, 'hold-conflict')) {
      return this.endedElsewhere(hold, res);
    }
    this.holdFailed('capturing the hold failed; it expires uncharged, so the agent is not charged for this call', hold, answer, {
      expiresAt: hold.expiresAt,
    });
    return withMeta(res, META.unbilled, true);
  }

  /** Answers a run whose capture found the hold ended by another attempt: charged, or not, as the hold now says. */
  async endedElsewhere(hold: Hold, res: CallToolResult): Promise<CallToolResult> {
    const answer = await ask(
      this.s.stipend.GET('/v1/holds/{id}', { params: { path: { id: hold.id } }, signal: AbortSignal.timeout(this.s.timeoutMs) }),
    );
    if (!answer.ok) {
      this.holdFailed('another attempt ended the hold, and reading it failed; answering the result unbilled', hold, answer);
      return withMeta(res, META.unbilled, true);
    }
    if (answer.data.status === 'captured') {
      return withMeta(res, META.consumption, replayOf(answer.data));
    }
    return this.refuse(this.spent(answer.data));
  }

  /** Gives the hold back whole; a release that fails leaves it to expire, which charges nothing either. */
  async release(hold: Hold): Promise<void> {
    const answer = await ask(
      this.s.stipend.POST('/v1/holds/{id}/release', {
        params: { path: { id: hold.id } },
        body: { agentId: this.agent },
        signal: AbortSignal.timeout(this.s.timeoutMs),
      }),
    );
    if (answer.ok) {
      return;
    }
    if (is409(answer, 'hold-conflict')) {
      this.s.log.info('the call failed, and another attempt of it had already been charged', { tool: this.tool, agent: this.agent, hold: hold.id });
      return;
    }
    this.holdFailed('releasing the hold of a failed call failed; it expires uncharged', hold, answer, { expiresAt: hold.expiresAt });
  }

  /** Logs a failed call about a hold: the tool call, the hold (and more about it), and Stipend's answer. */
  holdFailed(message: string, hold: Hold, answer: Extract<Answer<unknown>, { ok: false }>, more: { expiresAt?: string } = {}): void {
    this.s.log.error(message, { tool: this.tool, agent: this.agent, hold: hold.id, ...more, status: answer.status, err: answer.problem ?? answer.error });
  }

  /**
   * The refusal for a failed consume or authorize, or undefined when the gate
   * fails open and Stipend could not be reached (the call runs uncharged).
   */
  deny(a: { status: number; problem: Problem | undefined; error: unknown }): Refusal | undefined {
    const s = this.s;
    if (isPaymentRequired(a.status)) {
      const r = this.refusal('payment_required', `payment required: no entitlement of this agent covers tool ${this.tool}`);
      return {
        ...r,
        ...(s.purchaseUrl ? { purchaseUrl: s.purchaseUrl } : {}),
        ...(a.problem?.reasons?.length ? { reasons: a.problem.reasons } : {}),
      };
    }
    if (isConflict(a.status)) {
      return this.plain('idempotency_key_conflict', 'the idempotency key of this call was already used for a different call; send a new key');
    }
    if (this.context.signal.aborted) {
      // The caller gave up; it will not read a refusal, and it must not run the tool.
      return { ...this.plain('billing_unavailable', 'the call was cancelled before its charge was confirmed'), retryable: true };
    }
    if (a.status === 0 || isUnavailable(a.status)) {
      if (s.failOpen) {
        s.log.warn('Stipend unavailable; running the call uncharged (fail open)', { tool: this.tool, agent: this.agent, status: a.status, err: a.problem ?? a.error });
        return undefined;
      }
      s.log.error('Stipend unavailable; refusing the call (fail closed)', { tool: this.tool, status: a.status, err: a.problem ?? a.error });
      return { ...this.plain('billing_unavailable', 'billing is temporarily unavailable; try the call again shortly'), retryable: true };
    }
    // A 400, 401 or 403: the gate or its key is misconfigured. Say little to
    // the caller and everything to the operator.
    s.log.error('Stipend refused the charge', { tool: this.tool, agent: this.agent, status: a.status, err: a.problem ?? a.error });
    return this.plain('billing_error', 'the call could not be charged because of a billing configuration error');
  }

  /** Runs the call uncharged (fail open) and marks its result so. */
  async runUnbilled(): Promise<CallToolResult> {
    return withMeta(await this.server.run(this.extra), META.unbilled, true);
  }

  /** The refusal of a call whose key's hold ended without a charge. */
  spent(hold: Hold): Refusal {
    const why =
      hold.status === 'expired' ? 'it expired before the call finished' : 'it was released: the tool failed or the call was cancelled';
    return this.refusal(
      'idempotency_key_spent',
      `an earlier attempt of this call under the same idempotency key was not charged (${why}), so it is not run again under that key; send the call again with a new idempotency key`,
    );
  }

  /** A refusal of kind with message, showing the tool's price. */
  refusal(kind: RefusalKind, message: string): Refusal {
    const r = this.plain(kind, message);
    return this.price ? { ...r, price: termsOf(this.price, this.s.policy) } : r;
  }

  /** A refusal of kind with message and no price. */
  plain(kind: RefusalKind, message: string): Refusal {
    return { error: kind, message, service: this.s.service, tool: this.tool };
  }

  /** Answers r instead of a result of the tool. */
  async refuse(r: Refusal): Promise<CallToolResult> {
    const res = refusalResult(r, !(await this.server.declaresOutputSchema(this.tool, this.extra)));
    return this.s.walletLinked && r.error === 'payment_required' ? linkWallet(res) : res;
  }

  /** Bounds a consume or authorize: the gate's timeout, or the request's cancellation. */
  deadline(): AbortSignal {
    return AbortSignal.any([this.context.signal, AbortSignal.timeout(this.s.timeoutMs)]);
  }
}

/** Reports whether res asks the client for input (an InputRequiredResult of SDK 2.x) instead of finishing the call. */
function needsInput(res: object): boolean {
  return (res as { resultType?: unknown }).resultType === 'input_required' || 'inputRequests' in res;
}

/** The Charge of a captured hold, charged earlier. */
function replayOf(hold: Hold): Charge {
  const charge: { -readonly [K in keyof Charge]: Charge[K] } = {
    consumptionId: hold.consumptionId ?? '',
    result: 'replay',
    holdId: hold.id,
    entitlementId: hold.entitlementId,
  };
  if (hold.captured?.units) {
    charge.units = hold.captured.units;
  }
  if (hold.entitlementType === 'credits' && hold.captured?.cost) {
    charge.cost = hold.captured.cost;
  }
  return charge;
}
