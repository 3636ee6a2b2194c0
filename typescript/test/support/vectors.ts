// The idempotency keys the Go gate derives (testdata/idempotency-keys.json,
// written by the Go test TestIdempotencyKeyVectors from mcpgate itself).
import { readFileSync } from 'node:fs';

/** One request of the vectors file and the key the Go gate charged it under. */
export interface KeyVector {
  readonly name: string;
  readonly service: string;
  readonly tool: string;
  readonly arguments?: string;
  readonly clientKey?: string;
  readonly sessionId: string;
  readonly requestId: string | number;
  readonly requestState?: string;
  readonly agrees: boolean;
  readonly key: string;
}

/** The vectors of testdata/idempotency-keys.json. */
export const VECTORS = (
  JSON.parse(readFileSync(new URL('../../../testdata/idempotency-keys.json', import.meta.url), 'utf8')) as { vectors: KeyVector[] }
).vectors;

/** One refusal of the Go gate and the text it writes for it. */
export interface RefusalVector {
  readonly name: string;
  readonly refusal: import('@stipend-mcp/stipend').Refusal;
  readonly text: string;
}

/** The vectors of mcpgate/testdata/vectors/refusals.json (written by the Go test TestRefusalVectors). */
export const REFUSAL_VECTORS = (
  JSON.parse(readFileSync(new URL('../../../../mcpgate/testdata/vectors/refusals.json', import.meta.url), 'utf8')) as { vectors: RefusalVector[] }
).vectors;
