/** How a client retries; every field has a default (DEFAULT_RETRY). */
export interface RetryOptions {
  /** Attempts of a retryable request in all; 1 means no retry. */
  readonly attempts?: number;
  /** The first backoff window, in milliseconds; each retry doubles it. */
  readonly minBackoffMs?: number;
  /** The largest backoff window, in milliseconds. */
  readonly maxBackoffMs?: number;
}

/** The retry defaults, those of the Go client (client.DefaultAttempts and friends). */
export const DEFAULT_RETRY = { attempts: 4, minBackoffMs: 50, maxBackoffMs: 2000 } as const;

/**
 * The longest Retry-After, in milliseconds, the client waits out itself; a
 * longer one ends the retries and the answer goes to the caller.
 */
export const MAX_RETRY_AFTER_MS = 10_000;

/** The fetch function the client sends through. */
export type Fetch = (input: Request) => Promise<Response>;

/**
 * POST routes that are safe to send again without an Idempotency-Key
 * header: the charge routes carry their idempotency key in the body, and the
 * state changes end in the same state however often they are sent. Every
 * other POST of the API requires the header, except the Stripe webhook,
 * which is Stripe's to retry.
 */
const REPEATABLE_POSTS = [
  /^\/v1\/(consume|check|authorize)$/,
  /^\/v1\/holds\/[^/]+\/(capture|release)$/,
  /^\/v1\/payments\/[^/]+\/(succeed|fail)$/,
  /^\/v1\/entitlements\/[^/]+\/revoke$/,
  /^\/v1\/webhook-endpoints\/[^/]+\/disable$/,
];

/**
 * Reports whether request may be sent again after a network error, a 503 or
 * a 429: every method but POST, a POST with an Idempotency-Key header, and
 * the POST routes of REPEATABLE_POSTS.
 */
export function repeatable(request: Request, basePath: string): boolean {
  if (request.method !== 'POST') {
    return true;
  }
  if (request.headers.has('Idempotency-Key')) {
    return true;
  }
  const path = new URL(request.url).pathname.slice(basePath.length);
  return REPEATABLE_POSTS.some((re) => re.test(path));
}

/**
 * Returns a fetch that retries what the Go client retries: network errors,
 * 503 and 429 answers, with full-jitter exponential backoff but never
 * sooner than the answer's Retry-After (seconds), and only for repeatable
 * requests. Every attempt sends the same body, so the same idempotency key.
 * The request's signal (with timeoutMs, if set) is the deadline of the whole
 * call: when it ends during a backoff, the last answer (or network error) is
 * what the call returns (or throws).
 */
export function retryingFetch(base: Fetch, basePath: string, retry: RetryOptions = {}, timeoutMs?: number): Fetch {
  const attempts = Math.max(1, retry.attempts ?? DEFAULT_RETRY.attempts);
  const minBackoff = retry.minBackoffMs ?? DEFAULT_RETRY.minBackoffMs;
  const maxBackoff = Math.max(retry.maxBackoffMs ?? DEFAULT_RETRY.maxBackoffMs, minBackoff);
  return async (request) => {
    const signal = timeoutMs === undefined ? request.signal : AbortSignal.any([request.signal, AbortSignal.timeout(timeoutMs)]);
    const body = request.body === null ? undefined : await request.arrayBuffer();
    const n = repeatable(request, basePath) ? attempts : 1;
    let last: { response: Response; retryAfterMs: number } | { error: unknown } | undefined;
    for (let i = 0; i < n; i++) {
      if (last !== undefined) {
        const window = Math.min(minBackoff * 2 ** (i - 1), maxBackoff);
        const wait = Math.max(Math.random() * window, 'retryAfterMs' in last ? last.retryAfterMs : 0);
        if (!(await sleep(wait, signal))) {
          break;
        }
      }
      let response: Response;
      try {
        response = await base(new Request(request.url, { method: request.method, headers: request.headers, body, signal }));
      } catch (error) {
        if (signal.aborted || !(error instanceof TypeError)) {
          throw error;
        }
        last = { error }; // fetch's TypeError: no HTTP answer
        continue;
      }
      const retryAfterMs = retryAfter(response.headers.get('Retry-After'));
      if (i === n - 1 || (response.status !== 503 && response.status !== 429) || retryAfterMs > MAX_RETRY_AFTER_MS) {
        return response;
      }
      // Keep the answer, in case it is the last one, and free the connection.
      last = { response: await buffered(response), retryAfterMs };
    }
    if (last === undefined) {
      throw new Error('stipend client: no attempt was made');
    }
    if ('error' in last) {
      throw last.error;
    }
    return last.response;
  };
}

/** Parses a Retry-After given in seconds; anything else is 0. */
export function retryAfter(header: string | null): number {
  if (header === null || !/^\s*\d+\s*$/.test(header)) {
    return 0;
  }
  return Number(header.trim()) * 1000;
}

async function buffered(response: Response): Promise<Response> {
  const body = await response.arrayBuffer();
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** Waits ms; false if signal ends first. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener('abort', onAbort);
  });
}
