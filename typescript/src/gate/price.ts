import type { Money } from '../client/index.js';

/**
 * When the gate charges a priced call: `on_success` holds the price before
 * the tool runs and captures it only when the tool succeeds; `before`
 * consumes the price before the tool runs, and the charge stands whatever
 * the tool then does.
 */
export type Policy = 'on_success' | 'before';

/** The policy of a priced tool that names none. */
export const DEFAULT_POLICY: Policy = 'on_success';

/** The price of a tool that runs without being charged (Stipend is not called). */
export interface FreePrice {
  readonly free: true;
}

/**
 * What one call of a paid tool costs. With neither cost nor units it
 * charges one unit of a quota (or is covered by a subscription).
 */
export interface PaidPrice {
  readonly free?: false;
  /** Charged to a credits entitlement; absent: credits cannot pay. */
  readonly cost?: Money;
  /** Charged to a quota entitlement, 1 to 1,000,000; absent means 1. */
  readonly units?: number;
  /** When the call is charged; absent: the gate's policy. */
  readonly policy?: Policy;
}

/** What one call of a tool costs: free, or paid. */
export type Price = FreePrice | PaidPrice;

/** The price of a free tool. */
export function free(): FreePrice {
  return { free: true };
}

/** A price of cents in currency, paid from credits (or with one quota unit, or by a subscription). */
export function credits(cents: number, currency: string): PaidPrice {
  return { cost: { cents, currency } };
}

/** A price of n quota units (or covered by a subscription); credits cannot pay it. */
export function units(n: number): PaidPrice {
  return { units: n };
}

/** A price payable either way: cents from credits, or n units of a quota. */
export function creditsOrUnits(cents: number, currency: string, n: number): PaidPrice {
  return { cost: { cents, currency }, units: n };
}

/**
 * How a tool is charged, as the gate shows it in the tool's tools/list
 * entry under `_meta["io.stipend/price"]` and in refusals. Unlike a Price
 * it spells out the units a quota pays and the policy.
 */
export interface Terms {
  /** True for a tool that is never charged; nothing else is set then. */
  readonly free?: true;
  /** What credits pay per call; absent: credits cannot pay. */
  readonly cost?: Money;
  /** What a quota pays per call (at least 1). */
  readonly units?: number;
  /** When the call is charged. */
  readonly policy?: Policy;
}

/** The Terms of price under the gate's default policy. */
export function termsOf(price: Price, policy: Policy = DEFAULT_POLICY): Terms {
  if (price.free === true) {
    return { free: true };
  }
  const terms: { cost?: Money; units: number; policy: Policy } = {
    units: price.units ?? 1,
    policy: price.policy ?? policy,
  };
  if (price.cost) {
    terms.cost = { cents: price.cost.cents, currency: price.cost.currency };
  }
  return terms;
}

/** Describes terms for people, such as "5 cents USD or 1 unit". */
export function describeTerms(terms: Terms): string {
  if (terms.free) {
    return 'free';
  }
  const u = terms.units ?? 1;
  const unitText = u === 1 ? '1 unit' : `${u} units`;
  return terms.cost ? `${terms.cost.cents} cents ${terms.cost.currency} or ${unitText}` : unitText;
}

/** Stipend's limits on names, keys and amounts (entitlement, money). */
export const LIMITS = {
  /** Service, tool and agent names: 1–200 printable ASCII characters. */
  maxNameLength: 200,
  /** Quota units of one call. */
  maxUnits: 1_000_000,
  /** The largest amount in minor units: 2^53−1. */
  maxCents: Number.MAX_SAFE_INTEGER,
} as const;

/** Reports whether s is a valid Stipend service, tool or agent name. */
export function validName(s: string): boolean {
  return s.length > 0 && s.length <= LIMITS.maxNameLength && /^[\x20-\x7e]+$/.test(s);
}

/**
 * Checks price as Stipend would check its charge, and returns what is wrong
 * with it (naming the field), or undefined when it is valid.
 */
export function priceProblem(price: unknown): string | undefined {
  if (typeof price !== 'object' || price === null) {
    return 'must be an object such as free(), credits(5, "USD"), units(2) or creditsOrUnits(5, "USD", 1)';
  }
  const p = price as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    if (!['free', 'cost', 'units', 'policy'].includes(k)) {
      return `has an unknown field "${k}" (a price has free, cost, units and policy)`;
    }
  }
  if (p.free === true) {
    return Object.keys(p).length === 1 ? undefined : 'is free, so it can have no cost, units or policy';
  }
  if (p.free !== undefined && p.free !== false) {
    return 'free must be true or absent';
  }
  if (p.cost !== undefined) {
    const c = p.cost as Record<string, unknown> | null;
    if (typeof c !== 'object' || c === null) {
      return 'cost must be {cents, currency}';
    }
    if (typeof c.cents !== 'number' || !Number.isSafeInteger(c.cents) || c.cents < 0) {
      return `cost.cents must be a whole, non-negative number of minor units (at most ${LIMITS.maxCents}); got ${String(c.cents)}`;
    }
    if (typeof c.currency !== 'string' || !/^[A-Z]{3}$/.test(c.currency)) {
      return `cost.currency must be a three-letter upper-case ISO 4217 code such as "USD"; got ${JSON.stringify(c.currency)}`;
    }
  }
  if (p.units !== undefined) {
    if (typeof p.units !== 'number' || !Number.isInteger(p.units) || p.units < 1 || p.units > LIMITS.maxUnits) {
      return `units must be a whole number from 1 to ${LIMITS.maxUnits} (leave it out for 1); got ${String(p.units)}`;
    }
  }
  if (p.policy !== undefined && p.policy !== 'on_success' && p.policy !== 'before') {
    return `policy must be "on_success" or "before"; got ${JSON.stringify(p.policy)}`;
  }
  return undefined;
}
