/**
 * `createStateServer`: an `McpServer` named `mcpstate` with the state tools
 * and the `mcpstate://state/{handle}` resources.
 *
 * @module
 */

import { McpServer as SdkMcpServer } from "@modelcontextprotocol/server";
import type { HandleStore, McpServer } from "./types.ts";
import { registerStateResources } from "./resources.ts";
import {
  registerStateTools,
  SERVER_VERSION,
  stateInstructions,
  type StateToolsOptions,
} from "./tools.ts";

/** Options of {@link createStateServer}: the tool options plus the server's identity. */
export interface StateServerOptions extends StateToolsOptions {
  /** Server name in `serverInfo`. Default `"mcpstate"`. */
  name?: string;
  /** Server version in `serverInfo`. Default this package's version. */
  version?: string;
  /** Instructions served by `server/discover` and `initialize`. Default {@link stateInstructions}. */
  instructions?: string;
  /**
   * Whether to advertise `resources.subscribe`: the serving entry delivers
   * `notifications/resources/updated` (see `LiveUpdates`). Default `true`;
   * pass `false` where no subscription can be served (2025-era stateless HTTP).
   */
  subscriptions?: boolean;
}

/**
 * Creates an `McpServer` named `mcpstate` with the mcpstate tools and resources registered, the
 * server instructions, and cache hints for its list results.
 *
 * @param store The open store; the caller keeps ownership and closes it.
 * @param options Identity resolvers, shared-bucket mode, server name/version/instructions.
 * @returns A fresh server, ready for a transport or a serving entry.
 *
 * @example Serving the tools over stdio from your own entry point
 * ```ts ignore
 * import { serveStdio } from "@modelcontextprotocol/server/stdio";
 * import { HandleStore } from "@mcpstate/core";
 * import { createStateServer } from "@mcpstate/core/server";
 *
 * const store = await HandleStore.fromUrl();
 * serveStdio(() => createStateServer(store, { user: () => "local" }));
 * ```
 */
export function createStateServer(store: HandleStore, options: StateServerOptions): McpServer {
  // The tool list and instructions are the same for every caller and change
  // only with a new server version: shared caches may keep them for an hour.
  const hint = { ttlMs: 3_600_000, cacheScope: "public" as const };
  const server = new SdkMcpServer(
    { name: options.name ?? "mcpstate", version: options.version ?? SERVER_VERSION },
    {
      capabilities: {
        tools: { listChanged: false },
        resources: { subscribe: options.subscriptions ?? true, listChanged: false },
      },
      instructions: options.instructions ?? stateInstructions(options.anonymous ?? false),
      cacheHints: { "tools/list": hint, "server/discover": hint },
    },
  );
  registerStateTools(server, store, options);
  registerStateResources(server, store, options);
  return server;
}
