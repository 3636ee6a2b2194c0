/**
 * Stipend for MCP servers built on the official TypeScript SDK: a typed
 * client of Stipend's REST API.
 *
 * @module
 */
export * from './client/index.js';
export { type KeyMaterial, argumentsJSON, idempotencyKey, requestStamp } from './gate/key.js';
