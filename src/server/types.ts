/**
 * The types from outside the server that its functions take and return,
 * named here so that the server's entry documents them on its own: the
 * library's store and backend interface, and the SDK's MCP server.
 *
 * @module
 */

import type { McpServer as SdkMcpServer } from "@modelcontextprotocol/server";
import type { Backend as StoreBackend } from "../backend.ts";
import type { HandleStore as Store } from "../store.ts";

/** The store the server serves: `HandleStore` of `@mcpstate/core`. */
export type HandleStore = Store;

/** The primitives a storage engine provides to the store: `Backend` of `@mcpstate/core`. */
export type Backend = StoreBackend;

/**
 * The MCP server of the official SDK, `McpServer` of
 * `@modelcontextprotocol/server` (v2), that mcpstate registers its tools and
 * resources on.
 */
export type McpServer = SdkMcpServer;
