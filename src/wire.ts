/**
 * The wire form of the store's answers: snake_case keys and ISO-8601 UTC
 * times, as the MCP tools, the CLI and the inspector show them.
 *
 * @module
 */

import type { ActiveLease, HandleInfo, ReadResult, Snapshot } from "./types.ts";

/**
 * Renders a snapshot or info in the wire form: snake_case keys, ISO-8601 UTC times.
 *
 * @param s A snapshot or info.
 * @returns `{ handle, kind, version, created_at, updated_at, expires_at, last_writer, state? }`.
 *
 * @example
 * ```ts
 * import { HandleStore, toPayload } from "@mcpstate/core";
 * await using store = await HandleStore.fromUrl("memory://");
 * const h = await store.mint("note", { a: 1 }, { user: "u" });
 * toPayload(await store.get(h, { user: "u" })).created_at; // "2026-…Z"
 * ```
 */
export function toPayload(s: HandleInfo | Snapshot<unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    handle: s.handle,
    kind: s.kind,
    version: s.version,
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
    expires_at: s.expiresAt ? s.expiresAt.toISOString() : null,
    last_writer: s.lastWriter,
  };
  if (s.schemaVersion !== undefined) out.schema_version = s.schemaVersion;
  if (s.forkedFrom !== undefined) {
    out.forked_from = { handle: s.forkedFrom.handle, version: s.forkedFrom.version };
  }
  if (s.activeLease) out.active_lease = leasePayload(s.activeLease);
  if (s.sharedBy !== undefined) out.shared_by = s.sharedBy;
  if (s.rights !== undefined) out.rights = s.rights;
  if (s.preview !== undefined) out.preview = s.preview;
  if ("state" in s) out.state = s.state;
  return out;
}

/**
 * Renders an answer of {@link HandleStore.read} in the wire form: that of
 * {@link toPayload}, with `state`, `outline` or `values` (and `missing`), then
 * `truncated` and `size_bytes`. The keys of `values` and of a paths read's
 * `outline` are the paths as the caller passed them.
 *
 * @param r An answer of `read`.
 * @returns `{ handle, …, state | outline | values, truncated, size_bytes }`.
 *
 * @example
 * ```ts
 * import { HandleStore, toReadPayload } from "@mcpstate/core";
 * await using store = await HandleStore.fromUrl("memory://");
 * const h = await store.mint("note", { text: "x".repeat(1000) }, { user: "u" });
 * const wire = toReadPayload(await store.read(h, { user: "u", maxBytes: 256 }));
 * [wire.truncated, wire.size_bytes]; // [true, 1011]
 * ```
 */
export function toReadPayload(r: ReadResult<unknown>): Record<string, unknown> {
  const out = toPayload(r as HandleInfo | Snapshot<unknown>);
  if ("values" in r) {
    out.values = r.values;
    if (r.outline !== undefined) out.outline = r.outline;
    if (r.missing !== undefined) out.missing = r.missing;
  } else if ("outline" in r) {
    out.outline = r.outline;
  }
  out.truncated = r.truncated;
  out.size_bytes = r.sizeBytes;
  return out;
}

/**
 * Renders a lease in the wire form: `{ holder, expires_at }` (ISO-8601 UTC).
 *
 * @param l A lease in force, or a {@link LeaseResult}.
 * @returns `{ holder, expires_at }`.
 */
export function leasePayload(l: ActiveLease): { holder: string; expires_at: string } {
  return { holder: l.holder, expires_at: l.expiresAt.toISOString() };
}
