/** The _meta keys the gate reads and writes; the Go gate's (mcpgate.Meta*). */
export const META = {
  /** Request: the client's idempotency key for the call. */
  idempotencyKey: 'io.stipend/idempotency-key',
  /** Request: the agent to charge, where the server trusts its clients to say (trustClientAgentId). */
  agentId: 'io.stipend/agent-id',
  /** Result: the Charge of a charged call. */
  consumption: 'io.stipend/consumption',
  /** Result: true when the gate let a call run uncharged because Stipend was unreachable (failOpen). */
  unbilled: 'io.stipend/unbilled',
  /** Result: the Refusal of a refused call. */
  refusal: 'io.stipend/refusal',
  /** tools/list entry: the Terms of a tool in the price table. */
  price: 'io.stipend/price',
} as const;
