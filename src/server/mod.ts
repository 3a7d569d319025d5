/**
 * The mcpstate MCP server: tools that give any agent durable memory
 * across conversations, clients and devices, over stdio or Streamable HTTP,
 * speaking MCP 2026-07-28 and, statelessly, the 2025 revisions.
 *
 * {@link serveStateStdio} and {@link serveStateHttp} serve it with typed
 * options (`mcpstate serve` reads them from flags and runs these); server
 * authors add the same tools to their own `McpServer` with
 * {@link registerStateTools}, or mount {@link createHttpHandler} in their own
 * `Deno.serve`. {@link Telemetry} adds Prometheus metrics (served by
 * {@link serveMetrics}) and OpenTelemetry spans to any of them.
 *
 * @example Adding mcpstate's tools to your own MCP server
 * ```ts
 * import { McpServer } from "@modelcontextprotocol/server";
 * import { HandleStore } from "@mcpstate/core";
 * import { registerStateTools, writerLabel } from "@mcpstate/core/server";
 *
 * const store = await HandleStore.fromUrl("memory://");
 * const server = new McpServer({ name: "my-server", version: "1.0.0" });
 * registerStateTools(server, store, {
 *   user: () => "local",
 *   writer: writerLabel(undefined),
 * });
 * await store.close();
 * ```
 *
 * @module
 */

export type { AnyKind, Backend, HandleStore, McpServer } from "./types.ts";
export {
  ANONYMOUS_RANDOM_CHARS,
  checkReadAndTools,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_READ_BYTES,
  DEFAULT_TOOLS,
  failurePayload,
  registerStateTools,
  resolveToolNames,
  SERVER_VERSION,
  STATE_TOOLS,
  stateInstructions,
  type StateToolsOptions,
  type ToolRequest,
  type VerifiedToken,
} from "./tools.ts";
export { createStateServer, type StateServerOptions } from "./server.ts";
export { registerStateResources, RESOURCE_LIST_LIMIT } from "./resources.ts";
export {
  DEFAULT_MAX_LISTEN_STREAMS,
  DEFAULT_MAX_LISTEN_STREAMS_PER_USER,
  DEFAULT_MAX_WATCHES_PER_USER,
  handleOfUri,
  ListenLimitError,
  type ListenLimitName,
  type ListenLimits,
  LiveUpdates,
  READY_BOUND_MS,
  RESOURCE_PREFIX,
  resourceUri,
} from "./live.ts";
export {
  ANONYMOUS_USER,
  createHttpHandler,
  type HttpHandler,
  type HttpHandlerOptions,
} from "./http.ts";
export {
  ALLOWED_ALGORITHMS,
  createJwtVerifier,
  discoverJwksUrl,
  type JwtVerifierOptions,
  MAX_SUBJECT_LENGTH,
  protectedResourceMetadata,
  type TokenVerifier,
  userOfAuthInfo,
} from "./auth.ts";
export { machineName, writerLabel } from "./identity.ts";
export {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_PORT,
  type HttpServeOptions,
  type HttpServing,
  serveStateHttp,
  serveStateStdio,
  type StateServing,
  type StdioServeOptions,
} from "./serve.ts";
export {
  BACKEND_BUCKETS,
  type LiveCounts,
  type MetricsServeOptions,
  type MetricsServing,
  QUOTA_NAMES,
  serveMetrics,
  StateMetrics,
  TOOL_BUCKETS,
} from "./metrics.ts";
export {
  backendNameOf,
  Telemetry,
  type TelemetryOptions,
  type ToolOutcome,
  TRACER_NAME,
  tracerProviderRegistered,
} from "./telemetry.ts";
