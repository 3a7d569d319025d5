/**
 * mcpstate: durable, user-keyed state for stateless MCP servers.
 *
 * The MCP revision of 2026-07-28 removed protocol sessions: a tool mints an
 * opaque handle, the model passes it back as an argument, and the server must
 * persist what the handle points to. {@link HandleStore} is that store —
 * minting, persistence, versions, TTL, identity scoping and conflicts that are
 * surfaced to the model instead of silently clobbered — over SQLite, Redis,
 * Deno KV, PostgreSQL or memory.
 *
 * Beside this entry: `@mcpstate/core/server` puts the same store behind MCP
 * tools and resources (stdio or Streamable HTTP), each backend is a subpath
 * taking a client you opened (`/sqlite`, `/redis`, `/denokv`, `/postgres`,
 * `/memory`), and `@mcpstate/core/cli` is the `mcpstate` command.
 *
 * @example Quickstart
 * ```ts
 * import { Append, HandleStore, StaleWrite } from "@mcpstate/core";
 *
 * await using store = await HandleStore.fromUrl("sqlite:///:memory:");
 * const handle = await store.mint("research", { sources: [], notes: "" }, {
 *   user: "alice",
 *   ttlDays: 7,
 * });
 * const snap = await store.get(handle, { user: "alice" });
 * try {
 *   await store.save(handle, { ...snap.state, notes: "arm64 wins" }, {
 *     user: "alice",
 *     expectVersion: snap.version,
 *     writer: "laptop/claude-code",
 *   });
 * } catch (e) {
 *   if (e instanceof StaleWrite) e.details.current; // the winner's snapshot
 * }
 * await store.patch(handle, [Append("sources", "https://arxiv.org/abs/...")], {
 *   user: "alice",
 *   writer: "phone/claude",
 * });
 * for (const info of await store.list("alice", { kind: "research" })) info.handle;
 * ```
 *
 * @module
 */

export { HandleStore } from "./src/store.ts";
export type {
  ActiveLease,
  ChangeInfo,
  ChangesSince,
  EncryptionOptions,
  ForkOptions,
  HandleInfo,
  HandlePage,
  HandleStoreCapabilities,
  HandleStoreOptions,
  HistoryOptions,
  ImportRecordOptions,
  ImportResult,
  LeaseOptions,
  LeaseResult,
  ListOptions,
  ListPageOptions,
  MergeResult,
  MintOptions,
  PatchOptions,
  PathsReadResult,
  QuotaOptions,
  ReadOptions,
  ReadResult,
  ReleaseOptions,
  RevokeOptions,
  SaveOptions,
  SaveResult,
  Snapshot,
  StateAt,
  StateRead,
  TouchOptions,
  TransferOptions,
  TrashedInfo,
  TrashOptions,
  TrashPage,
  UsageInfo,
  UserOption,
  UsersOptions,
  WatchOptions,
  WriteLeaseOption,
} from "./src/types.ts";
export { toPayload, toReadPayload } from "./src/wire.ts";
export * from "./src/ops.ts";
export {
  type Budgeted,
  jsonSize,
  type ListNode,
  MAX_READ_PATHS,
  MIN_READ_BYTES,
  type ObjectNode,
  outline,
  type OutlineNode,
  type OutlineOptions,
  type PathsRead,
  PREVIEW_CHARS,
  readPaths,
  type ShownNode,
  type StringNode,
  toPointer,
} from "./src/outline.ts";
export * from "./src/errors.ts";
export { PREVIEW_MAX_CHARS, previewOf } from "./src/preview.ts";
export { defineKind, Kind, type KindOptions, type Upcast } from "./src/kinds.ts";
export { type Grant, grantPayload, RIGHTS, type ShareOptions } from "./src/grants.ts";
export type {
  InferInput,
  InferOutput,
  StandardIssue,
  StandardResult,
  StandardSchemaProps,
  StandardSchemaV1,
} from "./src/standard_schema.ts";
export type { JsonObject } from "./src/json.ts";
export type * from "./src/backends/_types.ts";
export { DEFAULT_URL, openBackend } from "./src/url.ts";
