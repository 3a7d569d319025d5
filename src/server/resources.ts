/**
 * Each handle as an MCP resource: `mcpstate://state/{handle}`, listed and
 * read per caller (another user's handle is not found), subscribable on
 * `subscriptions/listen` streams.
 *
 * @module
 */

import {
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  ResourceTemplate,
  type ServerContext,
} from "@modelcontextprotocol/server";
import { McpStateError, Unauthenticated } from "../errors.ts";
import type { HandleStore, McpServer } from "./types.ts";
import { handleOfUri, RESOURCE_PREFIX, resourceUri } from "./live.ts";
import { payloadFor, type StateToolsOptions, toolRequestOf } from "./tools.ts";
import { tooShortForSharedBucket } from "./tools/_tool.ts";

/** At most this many handles (the most recently updated) in `resources/list`. */
export const RESOURCE_LIST_LIMIT = 500;

/**
 * Registers the `mcpstate://state/{handle}` resource template on `server`:
 * `resources/list` lists the caller's most recently updated handles (none
 * in shared-bucket mode, where a list would reveal every caller's handles),
 * and `resources/read` answers a handle's snapshot as JSON, the same object
 * `state_load` returns.
 *
 * @param server The server (created with the `resources` capability).
 * @param store The open store.
 * @param options The same identity options as the tools.
 */
export function registerStateResources(
  server: McpServer,
  store: HandleStore,
  options: StateToolsOptions,
): void {
  const anonymous = options.anonymous ?? false;
  const userOf = async (ctx: ServerContext): Promise<string> => {
    const user = await options.user(toolRequestOf(server, ctx));
    if (typeof user !== "string" || user.length === 0) throw new Unauthenticated();
    return user;
  };
  const fail = (e: unknown, uri: string): never => {
    if (e instanceof McpStateError) {
      if (e.code === "handle_not_found" || e.code === "handle_expired") {
        throw new ResourceNotFoundError(uri, e.message);
      }
      if (e.code === "backend_error") options.onInternalError?.(e, "resources");
      const message = e.code === "backend_error"
        ? "The storage backend failed or is unreachable right now; try again in a moment."
        : e.message;
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, message, { code: e.code });
    }
    options.onInternalError?.(e, "resources");
    throw new ProtocolError(ProtocolErrorCode.InternalError, "internal_error");
  };
  const template = new ResourceTemplate(`${RESOURCE_PREFIX}{handle}`, {
    list: async (ctx) => {
      if (anonymous) return { resources: [] };
      try {
        const page = await store.listPage(await userOf(ctx), { limit: RESOURCE_LIST_LIMIT });
        return {
          resources: page.handles.map((h) => ({
            uri: resourceUri(h.handle),
            name: h.handle,
            title: `${h.kind} ${h.handle}`,
            mimeType: "application/json",
            annotations: { lastModified: h.updatedAt.toISOString() },
          })),
        };
      } catch (e) {
        return fail(e, RESOURCE_PREFIX);
      }
    },
  });
  server.registerResource("state", template, {
    title: "Saved state",
    description:
      "A saved state by handle, as state_load returns it. Subscribe to hear when another conversation, client or device changes it.",
    mimeType: "application/json",
  }, async (uri, _variables, ctx) => {
    const handle = handleOfUri(uri.href);
    if (handle === undefined || (anonymous && tooShortForSharedBucket(handle))) {
      throw new ResourceNotFoundError(uri.href);
    }
    try {
      const request = toolRequestOf(server, ctx);
      const snap = await store.get(handle, { user: await userOf(ctx) });
      const writer = options.writer?.(request);
      return {
        contents: [{
          uri: uri.href,
          mimeType: "application/json",
          text: JSON.stringify({ ok: true, ...payloadFor(snap, writer) }),
        }],
      };
    } catch (e) {
      return fail(e, uri.href);
    }
  });
}
