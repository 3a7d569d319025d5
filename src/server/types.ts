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

/**
 * A typed kind, as the server takes it: `Kind` of `@mcpstate/core` (from
 * `defineKind` or `store.kind`), whatever its state type.
 *
 * @since 0.5.0
 */
export interface AnyKind {
  /** The kind name. */
  readonly name: string;
  /** Its schema version. */
  readonly version: number;
  /** Its Standard Schema. */
  readonly schema: unknown;
  /** Its upcast steps, by the version they start from. */
  readonly upcast: unknown;
  /** The JSON Schema offered to the model, or `null`. */
  readonly jsonSchema: Record<string, unknown> | null;
}
