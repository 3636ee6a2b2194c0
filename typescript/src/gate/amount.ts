import type { Money } from '../client/index.js';
import type { GateLogger } from './config.js';
import { type PaidPrice, describeTerms, termsOf } from './price.js';
import type { HandlerContext } from './sdk.js';

/**
 * What one call really cost, as its tool reports it with reportCost: cost
 * for credits, units for a quota. A field left out is charged the price
 * (the hold's maximum).
 */
export interface Amount {
  readonly cost?: Money;
  readonly units?: number;
}

/** An Amount of n cents (minor units) in currency. */
export function cents(n: number, currency: string): Amount {
  return { cost: { cents: n, currency } };
}

/** An Amount of n quota units. */
export function unitsUsed(n: number): Amount {
  return { units: n };
}

/** An Amount for a tool priced with creditsOrUnits: n cents if credits pay, u units if a quota does. */
export function centsOrUnits(n: number, currency: string, u: number): Amount {
  return { cost: { cents: n, currency }, units: u };
}

/** What one call's tool reported; the gate keeps one per call charged on success. */
export class Meter {
  #reported: Amount = {};

  constructor(
    readonly tool: string,
    readonly price: PaidPrice,
    readonly log: GateLogger,
  ) {}

  /** Checks a against the price, caps it there and records it (the Go gate's meter.report). */
  report(a: Amount): void {
    const capped: { cost?: Money; units?: number } = {};
    let over = false;
    if (a.cost !== undefined) {
      const price = this.price.cost;
      if (price === undefined) {
        throw new RangeError(`stipend gate: reportCost: tool ${this.tool} is not paid in credits, so it cannot report a cost`);
      }
      if (a.cost.currency !== price.currency) {
        throw new RangeError(`stipend gate: reportCost: cost in ${JSON.stringify(a.cost.currency)}, but tool ${this.tool} is priced in ${price.currency}`);
      }
      if (!Number.isSafeInteger(a.cost.cents) || a.cost.cents < 0) {
        throw new RangeError(`stipend gate: reportCost: cost.cents must be a whole number of minor units, not negative; got ${a.cost.cents}`);
      }
      over = a.cost.cents > price.cents;
      capped.cost = { cents: Math.min(a.cost.cents, price.cents), currency: price.currency };
    }
    if (a.units !== undefined) {
      if (!Number.isSafeInteger(a.units) || a.units < 0) {
        throw new RangeError(`stipend gate: reportCost: units must be a whole number, not negative; got ${a.units}`);
      }
      const most = this.price.units ?? 1;
      over ||= a.units > most;
      capped.units = Math.min(a.units, most);
    }
    if (over) {
      this.log.warn('the tool reported more than its price; charging the price', {
        tool: this.tool,
        reported: a,
        price: describeTerms(termsOf(this.price)),
      });
    }
    this.#reported = capped;
  }

  /** The last report. */
  amount(): Amount {
    return this.#reported;
  }
}

/** The meters of the calls in flight, by the extra their tool handler gets. */
export const meters = new WeakMap<HandlerContext, Meter>();

/**
 * Reports, from inside a tool handler, what the call really cost; pass the
 * handler's extra (SDK 1.x) or ctx (SDK 2.x). When the tool succeeds, the gate captures that amount
 * instead of the price. The price is the most a call may cost: a report
 * above it charges the price and is logged. Called more than once, the last
 * report counts; a field a report leaves out is charged the price, so a tool
 * priced with creditsOrUnits reports both (centsOrUnits).
 *
 * It throws a RangeError, and the report is ignored, for an amount the price
 * cannot take (a cost in another currency or for a tool credits cannot pay,
 * a negative or fractional amount). Outside a call the gate charges on
 * success (a free tool, a tool charged before it runs, a call run uncharged
 * because Stipend was down, a server without the gate) it does nothing and
 * returns false; it returns true when the report was recorded. This is the
 * Go gate's mcpgate.Charge.
 */
export function reportCost(extra: HandlerContext, amount: Amount): boolean {
  const meter = meters.get(extra);
  if (meter === undefined) {
    return false;
  }
  meter.report(amount);
  return true;
}
