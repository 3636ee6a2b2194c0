// The calls the wallet makes, with a portal session's token: the token is
// the only credential, sent as a bearer header, never in a URL.

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// makeApi returns get and send for the Stipend server at base ("" for this
// origin) with token.
export function makeApi(base, token) {
  async function call(method, path, body, idempotencyKey) {
    const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    const res = await fetch(base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!res.ok) throw new ApiError(res.status, json);
    return json;
  }
  return {
    base,
    get: (path) => call("GET", path),
    send: (method, path, body, idempotencyKey) => call(method, path, body, idempotencyKey),
  };
}
