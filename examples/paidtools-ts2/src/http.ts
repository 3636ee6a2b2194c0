import type { IncomingMessage, ServerResponse } from 'node:http';

/** A web-standard request handler, such as createMcpHandler's. */
export interface FetchHandler {
  fetch(request: Request): Promise<Response>;
}

/**
 * Serves Node's HTTP requests with a web-standard handler: the request body
 * read whole, the answer written whole (stateless streamable HTTP answers
 * each post in full).
 */
export function nodeListener(handler: FetchHandler): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) {
        chunks.push(chunk as Buffer);
      }
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (typeof v === 'string') {
          headers.set(k, v);
        }
      }
      const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
      const answer = await handler.fetch(new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body }));
      res.writeHead(answer.status, Object.fromEntries(answer.headers));
      res.end(Buffer.from(await answer.arrayBuffer()));
    })().catch((err: unknown) => {
      process.stderr.write(`paidtools-ts2: ${String(err)}\n`);
      if (!res.headersSent) {
        res.writeHead(500).end();
      }
    });
  };
}
