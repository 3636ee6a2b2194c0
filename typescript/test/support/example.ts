// examples/paidtools-ts, the TypeScript example server, as the tests start it.
import { fileURLToPath } from 'node:url';

import { type Session, type TransportName, spawnSession } from './mcp.js';
import type { Stipend } from './stipend.js';

/** The built example (npm run build in examples/paidtools-ts). */
export const EXAMPLE = fileURLToPath(new URL('../../../../examples/paidtools-ts/dist/main.js', import.meta.url));

/**
 * Starts the example over transport, charging stipend, with env on top. Its
 * calls to Stipend may take up to a minute: a loaded test machine is slow,
 * and an unreachable Stipend still fails fast (connection refused).
 */
export function example(
  transport: TransportName,
  stipend: Stipend | { url: string; keys: { host: string } },
  env: Record<string, string> = {},
): Promise<Session> {
  return spawnSession(transport, process.execPath, [EXAMPLE], {
    STIPEND_URL: stipend.url,
    STIPEND_HOST_KEY: stipend.keys.host,
    PAIDTOOLS_TIMEOUT_MS: '60000',
    ...env,
  });
}

