import { createHash } from 'node:crypto';

import canonicalize from 'canonicalize';

/**
 * What identifies one logical call: the client's own idempotency key, or
 * else the session and the JSON-RPC request it arrived in.
 */
export type KeyMaterial =
  | { readonly clientKey: string }
  | {
      /** The session id ("" without one). */
      readonly session: string;
      /** The connection's nonce and the JSON-RPC id, as requestStamp makes it. */
      readonly request: string;
    };

/**
 * Derives the idempotency key Stipend charges a call under, exactly as the
 * Go gate (mcpgate/key.go) does, so that one call retried through either
 * gate is charged once: SHA-256 over length-prefixed fields (8-byte
 * big-endian lengths) — "client" and the client's key, or "request", the
 * session and the request stamp — then the service, the tool name, the
 * arguments in canonical form (argumentsJSON) and, for a request that
 * continues a call after an input-required result, "state" and its
 * requestState (SDK 1.x servers never see one). The result is "mcp-"
 * and 64 hex digits: valid whatever the client sent, and it never reveals
 * the client's key.
 */
export function idempotencyKey(
  service: string,
  tool: string,
  args: unknown,
  material: KeyMaterial,
  requestState?: string,
): string {
  const h = createHash('sha256');
  const field = (s: string): void => {
    const b = Buffer.from(s, 'utf8');
    const n = Buffer.alloc(8);
    n.writeBigUInt64BE(BigInt(b.length));
    h.update(n);
    h.update(b);
  };
  if ('clientKey' in material) {
    field('client');
    field(material.clientKey);
  } else {
    field('request');
    field(material.session);
    field(material.request);
  }
  field(service);
  field(tool);
  field(argumentsJSON(args));
  if (requestState) {
    field('state');
    field(requestState);
  }
  return 'mcp-' + h.digest('hex');
}

/**
 * The arguments of a call as both gates hash them: the JSON Canonicalization
 * Scheme of RFC 8785 (object names sorted, numbers and strings in
 * ECMAScript's one spelling, no whitespace), and "" for a call without
 * arguments. The Go gate canonicalises the bytes it received, so the two
 * agree whatever spelling the client sent; testdata/idempotency-keys.json has
 * the cases. Arguments that have no canonical form (a lone surrogate) are
 * hashed as JSON.stringify writes them; the Go gate hashes such arguments
 * as it received them, which agrees when the client wrote them that way.
 */
export function argumentsJSON(args: unknown): string {
  if (args === undefined) {
    return '';
  }
  try {
    return canonicalize(args) ?? '';
  } catch {
    return JSON.stringify(args);
  }
}

/**
 * The request stamp of a JSON-RPC request: nonce, "/" and the id, "s:" and
 * a string id or "n:" and a (whole) numeric one, as mcpgate's transport
 * wrappers stamp it. Over streamable HTTP the nonce is "http:" and the
 * session id.
 */
export function requestStamp(nonce: string, id: string | number): string {
  if (typeof id === 'string') {
    return `${nonce}/s:${id}`;
  }
  return `${nonce}/n:${BigInt(Math.trunc(id)).toString()}`;
}
