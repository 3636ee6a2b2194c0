// What the tests use of examples/paidtools-ts2 (built): its adapter from
// Node's HTTP server to a web-standard handler such as createMcpHandler's.
import { fileURLToPath } from 'node:url';

type NodeListener = (handler: { fetch(request: Request): Promise<Response> }) => (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;

const built = fileURLToPath(new URL('../../../../examples/paidtools-ts2/dist/http.js', import.meta.url));

/** The example's nodeListener. */
export const nodeListener = ((await import(built)) as { nodeListener: NodeListener }).nodeListener;
