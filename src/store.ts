/**
 * `HandleStore`: every rule of mcpstate — minting, scoping, versions, TTL, conflicts, idempotency,
 * validation — over a {@link Backend} of atomic primitives. The class is a façade: each method
 * hands its arguments and the store's core (backend, clock, checked options) to a feature module
 * under `store/`, which holds the rules.
 *
 * @module
 */

import type { Backend, ErasureCounts, GrantRecord, HandleRecord } from "./backend.ts";
import type { JsonObject } from "./json.ts";
import { Kind, type KindOptions } from "./kinds.ts";
import type { PatchOp } from "./ops.ts";
import type { InferInput, InferOutput, StandardSchemaV1 } from "./standard_schema.ts";
import type { Grant, ShareOptions } from "./grants.ts";
import { checkGrantRecord } from "./store/_check.ts";
import { closeCore, type Core, coreOf, reclaimTimer } from "./store/_core.ts";
import * as erasing from "./store/_erase.ts";
import { type Maintenance, maintenance } from "./store/_encrypt.ts";
import * as history from "./store/_history.ts";
import * as leases from "./store/_lease.ts";
import * as lineage from "./store/_lineage.ts";
import * as listing from "./store/_list.ts";
import * as reads from "./store/_read.ts";
import * as records from "./store/_records.ts";
import * as sharing from "./store/_share.ts";
import * as trashing from "./store/_trash.ts";
import * as writes from "./store/_write.ts";
import type { ChangesSince, ForkOptions, HandleInfo, HandlePage } from "./types.ts";
import type { HandleStoreCapabilities, HandleStoreOptions, ImportRecordOptions } from "./types.ts";
import type { ImportResult, LeaseOptions, LeaseResult, ListOptions } from "./types.ts";
import type { ListPageOptions, MergeResult, MintOptions, PatchOptions } from "./types.ts";
import type { PathsReadResult, QuotaOptions, ReadOptions, ReadResult } from "./types.ts";
import type { ReleaseOptions, RevokeOptions, SaveOptions, SaveResult, Snapshot } from "./types.ts";
import type { StateAt, StateRead, TouchOptions, TransferOptions, TrashOptions } from "./types.ts";
import type { TrashPage, UsageInfo, UserOption, UsersOptions, WatchOptions } from "./types.ts";

export type { ForkPoint } from "./backend.ts";
export type * from "./types.ts";
export { leasePayload, toPayload, toReadPayload } from "./wire.ts";

/**
 * Durable, user-keyed, versioned state behind opaque handles. Every method that reaches the backend
 * throws {@link BackendError} when the engine fails or the store is closed.
 * @example Mint, read, save with a version check, patch
 * ```ts
 * import { Append, HandleStore } from "@mcpstate/core";
 * await using store = await HandleStore.fromUrl("memory://");
 * const handle = await store.mint("research", { sources: [] }, { user: "alice", ttlDays: 7 });
 * const snap = await store.get(handle, { user: "alice" });
 * await store.save(handle, { sources: ["a"] }, { user: "alice", expectVersion: snap.version });
 * await store.patch(handle, [Append("sources", "b")], { user: "alice" });
 * ```
 */
export class HandleStore implements AsyncDisposable {
  readonly #core: Core;
  readonly #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * Wraps a backend: `backend`, the storage primitives.
   * @param options Clock, size cap, patch length cap, grace period, reclaim interval.
   */
  constructor(backend: Backend, options: HandleStoreOptions = {}) {
    this.#core = coreOf(backend, options);
    this.#timer = reclaimTimer(this.#core);
  }

  /**
   * Opens a store on the backend a URL names (see the README for the forms).
   * @param url Backend URL; default `sqlite:///~/.mcpstate/state.db`.
   * @param options Store options.
   * @returns An open store; close it when done.
   */
  static async fromUrl(url?: string, options: HandleStoreOptions = {}): Promise<HandleStore> {
    const { openBackend } = await import("./url.ts");
    return new HandleStore(await openBackend(url), options);
  }

  /**
   * Which optional operations this store can run on its backend.
   * @since 0.5.0
   * @example
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * store.capabilities; // { users: true, importRecord: true }
   * ```
   */
  get capabilities(): HandleStoreCapabilities {
    return {
      users: this.#core.backend.records !== undefined,
      importRecord: records.importer(this.#core) !== undefined,
      grants: sharing.grantBackend(this.#core) !== undefined,
    };
  }

  /** The state size cap in bytes. */
  get maxStateBytes(): number {
    return this.#core.maxBytes;
  }

  /** The most ops one patch may hold. */
  get maxPatchOps(): number {
    return this.#core.maxPatchOps;
  }

  /**
   * A typed view of one kind, its states checked by `schema` (docs/library.md#typed-kinds).
   * @param name The kind, `^[a-z][a-z0-9-]{0,31}$`.
   * @param schema A Standard Schema v1 of the state (a zod 4 schema, for one).
   * @param options The schema version (default 1), upcasts, a JSON Schema.
   * @returns The typed view, bound to this store.
   * @throws {InvalidArgument} for a malformed name, schema or option.
   * @since 0.5.0
   * @example
   * ```ts
   * import { z } from "zod";
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const todo = store.kind("todo", z.object({ items: z.array(z.string()) }));
   * const handle = await todo.mint({ items: ["milk"] }, { user: "alice" });
   * (await todo.get(handle, { user: "alice" })).state.items; // string[]
   * ```
   */
  kind<T extends StandardSchemaV1>(
    name: string,
    schema: T,
    options: KindOptions = {},
  ): Kind<InferOutput<T>, InferInput<T>> {
    return new Kind(name, schema as StandardSchemaV1<InferInput<T>, InferOutput<T>>, options, this);
  }

  /**
   * Mints a new handle holding `state`.
   * @param kind Lowercase kind, `^[a-z][a-z0-9-]{0,31}$`.
   * @param state A JSON object.
   * @param options The user, TTL, writer, idempotency key.
   * @returns The new handle.
   * @throws {InvalidArgument} for a malformed kind, user, TTL, writer or idempotency key, a state
   * that is not plain JSON, or a key already used for a different call; nothing is written.
   * @throws {StateTooLarge} when the state's compact JSON is over `maxStateBytes`.
   * @example Mint a handle, once even when the call is retried
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const options = { user: "alice", ttlDays: 7, idempotencyKey: "task-42" };
   * const handle = await store.mint("research", { sources: [] }, options);
   * handle.startsWith("research_"); // true: the kind, then 8 random characters
   * (await store.mint("research", { sources: [] }, options)) === handle; // true: the first result
   * ```
   */
  mint(kind: string, state: JsonObject, options: MintOptions): Promise<string> {
    return writes.mint(this.#core, kind, state, options);
  }

  /**
   * Reads a handle's snapshot.
   * @param handle The handle.
   * @param options The user.
   * @returns The snapshot.
   * @throws {HandleNotFound} when the user has no such handle (another user's reads the same).
   * @throws {HandleExpired} when its TTL passed and it is still in the grace period.
   * @throws {InvalidArgument} for a malformed handle or user.
   * @example Read a handle, and only as its owner
   * ```ts
   * import { HandleNotFound, HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
   * const snap = await store.get(handle, { user: "alice" });
   * [snap.version, snap.state.text]; // [1, "hi"]
   * await store.get(handle, { user: "bob" }).catch((e) => e instanceof HandleNotFound); // true
   * ```
   */
  get<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>> {
    return reads.get<S>(this.#core, handle, options);
  }

  /**
   * Reads a handle within a byte budget, the values of `paths` sharing it as {@link readPaths}
   * does (docs/library.md#reading-large-states).
   * @param handle The handle.
   * @param options The user, the budget, the paths.
   * @returns The metadata with the values of the paths (and their outlines).
   * @throws {InvalidArgument} for a budget or paths {@link ReadOptions} refuses.
   * @example Read a large state, then one part of it
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const log = Array.from({ length: 5000 }, (_, i) => ({ run: i, ok: i % 7 !== 0 }));
   * const h = await store.mint("ci", { title: "Nightly", log }, { user: "u" });
   * const r = await store.read(h, { user: "u", maxBytes: 4096 });
   * if (r.truncated) r.outline; // { type: "object", path: "", bytes: 114632, keys: 2, entries: … }
   * const part = await store.read(h, { user: "u", maxBytes: 4096, paths: ["/log/4999", "title"] });
   * part.values; // { "/log/4999": { run: 4999, ok: true }, title: "Nightly" }
   * ```
   */
  read(
    handle: string,
    options: ReadOptions & { paths: readonly string[] },
  ): Promise<PathsReadResult>;
  /** Reads a handle's whole state, or its outline when it is over `maxBytes` (see above). */
  read<S = JsonObject>(
    handle: string,
    options: ReadOptions & { paths?: undefined },
  ): Promise<StateRead<S>>;
  /** Reads a handle within a budget: its state, its outline or the values of `paths`. */
  read<S = JsonObject>(handle: string, options: ReadOptions): Promise<ReadResult<S>>;
  read<S = JsonObject>(handle: string, options: ReadOptions): Promise<ReadResult<S>> {
    return reads.read<S>(this.#core, handle, options);
  }

  /**
   * Replaces the state if it is still at `expectVersion` (docs/library.md#the-conflict-model).
   * @param handle The handle.
   * @param state The new state.
   * @param options The user, the version read, writer, TTL, idempotency key.
   * @returns The new snapshot.
   * @throws {StaleWrite} when someone wrote since `expectVersion`, with the current snapshot (and,
   * with history, the changes since); nothing is written.
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed: a save does not revive it.
   * @throws {InvalidArgument} for a malformed handle, user, `expectVersion`, TTL, writer or
   * idempotency key, or a state that is not plain JSON.
   * @throws {StateTooLarge} when the state's compact JSON is over `maxStateBytes`.
   * @example Save on the version you read; on a conflict, re-read and apply again
   * ```ts
   * import { HandleStore, StaleWrite } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const user = "alice";
   * const handle = await store.mint("todo", { items: [] }, { user });
   * const read = await store.get(handle, { user });
   * await store.save(handle, { items: ["milk"] }, { user, expectVersion: read.version });
   * try {
   *   await store.save(handle, { items: ["eggs"] }, { user, expectVersion: read.version });
   * } catch (e) {
   *   if (!(e instanceof StaleWrite)) throw e;
   *   const now = await store.get<{ items: string[] }>(handle, { user });
   *   const items = [...now.state.items, "eggs"];
   *   await store.save(handle, { items }, { user, expectVersion: now.version }); // version 3
   * }
   * ```
   */
  save<S extends JsonObject = JsonObject>(
    handle: string,
    state: S,
    options: SaveOptions,
  ): Promise<SaveResult<S>> {
    return writes.save<S>(this.#core, handle, state, options);
  }

  /**
   * Applies patch ops atomically; never raises `StaleWrite`; a no-op patch writes nothing.
   * @param handle The handle.
   * @param ops Ops from the factories or their wire form.
   * @param options The user, writer, idempotency key.
   * @returns The snapshot after the patch.
   * @throws {PatchError} for a malformed op, one that cannot apply, or more than `maxPatchOps`
   * (`reason` says which); no op of it is applied.
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed.
   * @throws {InvalidArgument} for a malformed handle, user, writer or idempotency key, or an op
   * value that is not plain JSON.
   * @throws {StateTooLarge} when the patched state would be over `maxStateBytes`.
   * @example Patch without reading first: concurrent patches all land
   * ```ts
   * import { Append, HandleStore, Increment } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const user = "alice";
   * const handle = await store.mint("log", { lines: [], count: 0 }, { user });
   * await Promise.all(["a", "b", "c"].map((line) =>
   *   store.patch(handle, [Append("lines", line), Increment("", "count")], { user })
   * ));
   * const snap = await store.get(handle, { user });
   * [snap.state.count, snap.version]; // [3, 4]
   * ```
   */
  patch<S = JsonObject>(
    handle: string,
    ops: readonly PatchOp[],
    options: PatchOptions,
  ): Promise<Snapshot<S>> {
    return writes.patch<S>(this.#core, handle, ops, options);
  }

  /**
   * Renews (or clears) a handle's expiry from now; counts as a write.
   * @param handle The handle.
   * @param options The user, the new TTL (`null`: never), writer.
   * @returns The snapshot after the touch.
   */
  touch<S = JsonObject>(handle: string, options: TouchOptions): Promise<Snapshot<S>> {
    return writes.touch<S>(this.#core, handle, options);
  }

  /**
   * Lists a user's handles (metadata only), newest `updatedAt` first.
   * @param user The user.
   * @param options Kind filter; whether to include expired handles.
   * @returns Every matching handle.
   */
  list(user: string, options: ListOptions = {}): Promise<HandleInfo[]> {
    return listing.list(this.#core, user, options);
  }

  /**
   * Lists one page of a user's handles.
   * @param user The user.
   * @param options Kind filter, expired handles, page size, cursor.
   * @returns The page and the cursor of the next one.
   */
  listPage(user: string, options: ListPageOptions = {}): Promise<HandlePage> {
    return listing.listPage(this.#core, user, options);
  }

  /**
   * Deletes a handle. An expired handle is deleted as well.
   * @param handle The handle.
   * @param options The user, idempotency key.
   */
  revoke(handle: string, options: RevokeOptions): Promise<void> {
    return trashing.revoke(this.#core, handle, options);
  }

  /**
   * Brings a revoked handle back at its last version (docs/library.md#undo-a-delete).
   * @param handle The revoked handle.
   * @param options The user.
   * @returns The restored snapshot.
   * @throws {HandleNotFound} when there is nothing to restore.
   */
  restore<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>> {
    return trashing.restore<S>(this.#core, handle, options);
  }

  /**
   * One page of a user's trash, newest-deleted first (docs/library.md#undo-a-delete).
   * @param user The user.
   * @param options Page size (1 to 500, default 50) and the `nextCursor` of the previous page.
   * @returns The page and the cursor of the next one (`null` on the last page).
   * @throws {InvalidArgument} for a malformed user, limit or cursor, or a backend that cannot list
   * its trash (every built-in one can).
   * @since 0.5.0
   * @example Revoke, find it in the trash, restore it
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const h = await store.mint("note", { text: "hi" }, { user: "alice" });
   * await store.revoke(h, { user: "alice" });
   * const { handles } = await store.trash("alice");
   * handles[0]?.handle === h; // true; handles[0].restorableUntil is a week from now
   * await store.restore(h, { user: "alice" });
   * ```
   */
  trash(user: string, options: TrashOptions = {}): Promise<TrashPage> {
    return trashing.trash(this.#core, user, options);
  }

  /**
   * The changelog entries after `version`, oldest first, or `truncated` with the current snapshot
   * (docs/library.md#resuming-after-time-away).
   * @param handle The handle.
   * @param version The version the caller last saw.
   * @param options The user.
   * @returns The entries, or the current snapshot.
   */
  changesSince<S = JsonObject>(
    handle: string,
    version: number,
    options: UserOption,
  ): Promise<ChangesSince<S>> {
    return history.changesSince<S>(this.#core, handle, version, options);
  }

  /**
   * The state a handle had at an earlier version, rebuilt by undoing the changelog entries after it
   * (equal as JSON; docs/library.md#resuming-after-time-away).
   * @param handle The handle.
   * @param version A version from 1 to the current one.
   * @param options The user.
   * @returns The handle, kind, version and the state at that version.
   * @throws {InvalidArgument} when `version` is not a whole number from 1 to the current version
   * (`field: "version"`), or the state at it is no longer in the retained changelog (`reason:
   * "history_unavailable"`, and the current `version`).
   * @throws {HandleNotFound} When the user has no such handle.
   * @throws {HandleExpired} When its TTL passed.
   * @since 0.5.0
   * @example The state two writes ago
   * ```ts
   * import { Append, HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const h = await store.mint("log", { lines: [] }, { user: "u" });
   * await store.patch(h, [Append("lines", "a")], { user: "u" });
   * await store.patch(h, [Append("lines", "b")], { user: "u" });
   * (await store.stateAt(h, 2, { user: "u" })).state; // { lines: ["a"] }
   * ```
   */
  stateAt<S = JsonObject>(
    handle: string,
    version: number,
    options: UserOption,
  ): Promise<StateAt<S>> {
    return history.stateAt<S>(this.#core, handle, version, options);
  }

  /**
   * Takes (or renews) an advisory lease: "`writer` is at work on this for the next `seconds`"; it
   * never blocks a write (docs/library.md#advisory-leases).
   * @param handle The handle.
   * @param options The user, the holder (`writer`), the lease's length.
   * @returns Whether the caller holds it, and the lease in force.
   * @since 0.4.0
   * @example Take a lease, see it, release it
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const h = await store.mint("task", { step: 1 }, { user: "u" });
   * await store.lease(h, { user: "u", writer: "laptop/claude", seconds: 120 });
   * (await store.get(h, { user: "u" })).activeLease?.holder; // "laptop/claude"
   * await store.release(h, { user: "u", writer: "laptop/claude" });
   * ```
   */
  lease(handle: string, options: LeaseOptions): Promise<LeaseResult> {
    return leases.lease(this.#core, handle, options);
  }

  /**
   * Releases the lease `writer` holds on a handle; another holder's lease is left alone.
   * @param handle The handle.
   * @param options The user and the holder.
   * @returns Whether a lease in force was released.
   * @since 0.4.0
   */
  release(handle: string, options: ReleaseOptions): Promise<boolean> {
    return leases.release(this.#core, handle, options);
  }

  /**
   * Snapshots of a handle: the current one, then one per new version (docs/library.md#watching).
   * @param handle The handle.
   * @param options The user, an abort signal, the safety-net poll interval.
   * @returns An async iterable of snapshots; it ends when `signal` aborts.
   * @throws {HandleNotFound} while iterating, when the handle is revoked.
   * @throws {HandleExpired} while iterating, when it expires.
   * @since 0.4.0
   * @example Follow a handle until aborted
   * ```ts
   * import { HandleStore, SetKey } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const h = await store.mint("doc", { v: 0 }, { user: "u" });
   * const stop = new AbortController();
   * setTimeout(() => store.patch(h, [SetKey("", "v", 1)], { user: "u" }), 10);
   * for await (const snap of store.watch(h, { user: "u", signal: stop.signal })) {
   *   if (snap.version === 2) stop.abort();
   * }
   * ```
   */
  watch<S = JsonObject>(handle: string, options: WatchOptions): AsyncIterableIterator<Snapshot<S>> {
    return leases.watch<S>(this.#core, handle, options);
  }

  /**
   * Removes every trace of a user (docs/library.md#erase-a-user); `dryRun` only counts.
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * await store.mint("note", {}, { user: "alice" });
   * await store.erase("alice"); // { handles: 1, grants: 0 }
   * ```
   */
  erase(user: string, options: { dryRun?: boolean } = {}): Promise<ErasureCounts> {
    return erasing.erase(this.#core, user, options);
  }

  /** @internal Key maintenance: `mcpstate encrypt`, `keys rotate` and `doctor` (store/_encrypt.ts). */
  get maintenance(): Maintenance {
    return maintenance(this.#core);
  }

  /**
   * Removes every expired record now, grace period or not.
   * @param user Only this user's; every user's when absent.
   * @returns How many records were removed.
   */
  sweep(user?: string): Promise<number> {
    return trashing.sweep(this.#core, user);
  }

  /**
   * Whether a handle has expired by this store's clock (what `get` answers `handle_expired` for).
   * @param info A handle's metadata or snapshot.
   * @returns `true` when its expiry has passed.
   * @since 0.5.0
   * @example Mark the expired handles of a listing
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * await store.mint("note", {}, { user: "alice", ttlDays: 1 });
   * for (const info of await store.list("alice", { includeExpired: true })) {
   *   console.log(info.handle, store.isExpired(info) ? "expired" : "live");
   * }
   * ```
   */
  isExpired(info: Pick<HandleInfo, "expiresAt">): boolean {
    return info.expiresAt !== null && info.expiresAt.getTime() <= this.#core.clock();
  }

  /**
   * One page of the users with a record, expired ones included (docs/library.md#export-and-import).
   * @param options Where to start, and the page size.
   * @returns The users of the page.
   * @throws {InvalidArgument} when the backend lists no users ({@link HandleStore.capabilities}).
   * @since 0.5.0
   * @example Every user of a store
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * await store.mint("note", {}, { user: "alice" });
   * await store.users({ limit: 100 }); // ["alice"]; then { after: "alice", limit: 100 }
   * ```
   */
  users(options: UsersOptions = {}): Promise<string[]> {
    return listing.users(this.#core, options);
  }

  /**
   * A user's records as the backend keeps them, by handle (docs/library.md#export-and-import).
   * @param user The user (any that {@link HandleStore.users} lists).
   * @returns The records, expired ones included, read a page at a time.
   * @since 0.5.0
   * @example Copy one user's records into another store
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using from = await HandleStore.fromUrl("memory://");
   * await using to = await HandleStore.fromUrl("memory://");
   * await from.mint("note", { a: 1 }, { user: "alice" });
   * for await (const record of from.exportRecords("alice")) {
   *   await to.importRecord("alice", record); // { outcome: "inserted", current: … }
   * }
   * ```
   */
  exportRecords(user: string): AsyncIterableIterator<HandleRecord> {
    return records.exportRecords(this.#core, user);
  }

  /**
   * How many records {@link HandleStore.exportRecords} would give for a user now (metadata only).
   * @param user The user.
   * @returns The count.
   * @since 0.5.0
   */
  countRecords(user: string): Promise<number> {
    return records.countRecords(this.#core, user);
  }

  /**
   * Checks a record as {@link HandleStore.importRecord} would, writing nothing.
   * @param user The user the record belongs to.
   * @param record The record.
   * @throws {InvalidArgument} naming the first field that is wrong, in its wire form.
   * @throws {StateTooLarge} when the state is over the size cap.
   * @since 0.5.0
   * @example Refuse a record before writing anything
   * ```ts
   * import { HandleStore, InvalidArgument } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const record = { handle: "Notes_k3v9x2mq", kind: "Notes", state: "{}", version: 1,
   *   createdAt: 0, updatedAt: 0, expiresAt: null, lastWriter: null };
   * try { store.checkRecord("alice", record); } catch (e) { e instanceof InvalidArgument; } // kind
   * ```
   */
  checkRecord(user: string, record: HandleRecord): void {
    records.checkRecord(this.#core, user, record);
  }

  /**
   * Imports a record exactly as given, unless the store holds that version or a newer one
   * (docs/library.md#export-and-import).
   * @param user The user the record belongs to.
   * @param record The record, as {@link HandleStore.exportRecords} gives it.
   * @param options `dryRun`: check and compare only.
   * @returns What was done, and the record the store holds now.
   * @throws {InvalidArgument} for a record {@link HandleStore.checkRecord} refuses, or when the
   * backend cannot import (see {@link HandleStore.capabilities}; a dry run works on every backend).
   * @throws {StateTooLarge} when the state is over the size cap.
   * @since 0.5.0
   * @example Import a record, then see that a second import keeps it
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const record = { handle: "note_k3v9x2mq", kind: "note", state: '{"text":"kept byte for byte"}',
   *   version: 3, createdAt: Date.now() - 60_000, updatedAt: Date.now(), expiresAt: null,
   *   lastWriter: "laptop/claude-code" };
   * (await store.importRecord("alice", record)).outcome; // "inserted"
   * (await store.importRecord("alice", record, { dryRun: true })).outcome; // "kept"
   * (await store.get("note_k3v9x2mq", { user: "alice" })).version; // 3
   * ```
   */
  importRecord(
    user: string,
    record: HandleRecord,
    options: ImportRecordOptions = {},
  ): Promise<ImportResult> {
    return records.importRecord(this.#core, user, record, options);
  }

  /**
   * The quotas this store enforces (`undefined`: none).
   * @since 0.5.0
   */
  get quotas(): QuotaOptions | undefined {
    return this.#core.quotas && { ...this.#core.quotas };
  }

  /**
   * A user's handles, their bytes and this minute's writes (docs/library.md#quotas).
   * @param user The user.
   * @returns The usage.
   * @throws {InvalidArgument} for a malformed user, or a backend that keeps no usage.
   * @since 0.5.0
   * @example
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://", { quotas: { maxHandles: 100 } });
   * await store.mint("note", { text: "hi" }, { user: "alice" });
   * await store.usage("alice"); // { handles: 1, bytes: 13, writesThisMinute: 1 }
   * ```
   */
  usage(user: string): Promise<UsageInfo> {
    return records.usage(this.#core, user);
  }

  /**
   * Forks a handle: a new handle of the same kind, owned by the caller, holding the origin's
   * current state, with `forkedFrom` (docs/travel.md#fork-merge-back-transfer).
   * @param handle The handle to fork (the caller's own).
   * @param options The user and the writer label.
   * @returns The fork's handle (as long as the origin's).
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed.
   * @throws {InvalidArgument} for a malformed handle, user or writer.
   * @throws {QuotaExceeded} when the fork would put the user over a quota.
   * @since 0.5.0
   * @example Hand a copy to a sub-agent, then take its work back
   * ```ts
   * import { Append, HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const user = "alice";
   * const plan = await store.mint("plan", { steps: [], notes: "" }, { user });
   * const sub = await store.fork(plan, { user, writer: "sub-agent" });
   * await store.patch(sub, [Append("steps", "measure")], { user });
   * await store.patch(plan, [Append("steps", "ask")], { user }); // the parent goes on meanwhile
   * const merged = await store.mergeBack(sub, { user });
   * merged.state.steps; // ["ask", "measure"]
   * ```
   */
  fork(handle: string, options: ForkOptions): Promise<string> {
    return lineage.fork(this.#core, handle, options);
  }

  /**
   * Merges a fork's changes since the fork point into its origin, when they are disjoint from the
   * origin's (docs/travel.md#fork-merge-back-transfer).
   * @param fork The fork (the caller's own handle made by {@link HandleStore.fork}).
   * @param options The user and the writer label of the origin's write.
   * @returns The origin's snapshot after the merge, with `mergedFrom`.
   * @throws {StaleWrite} with `conflicts` when the changes overlap, or `reason:
   * "history_unavailable"` when the origin's state at the fork point is gone; nothing is written.
   * @throws {HandleNotFound} when the user has no such fork, or its origin is gone.
   * @throws {HandleExpired} when the fork or the origin expired.
   * @throws {InvalidArgument} for a handle that is no fork, or a malformed handle, user or writer.
   * @since 0.5.0
   */
  mergeBack<S = JsonObject>(fork: string, options: ForkOptions): Promise<MergeResult<S>> {
    return lineage.mergeBack<S>(this.#core, fork, options);
  }

  /**
   * Transfers a handle for good to user `to`, under the same handle string, in one atomic step
   * (docs/travel.md#fork-merge-back-transfer).
   * @param handle The caller's handle.
   * @param options The user, `to` (the new owner) and `keep`.
   * @returns The handle as the new owner uses it (the same string).
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed.
   * @throws {InvalidArgument} for a malformed handle, user, `to` or `keep`, `to` equal to the user,
   * `to` already holding that handle, or a backend without the `transfer` primitive.
   * @throws {QuotaExceeded} when the handle would put `to` over a quota.
   * @since 0.5.0
   * @example Hand a task over to someone else
   * ```ts
   * import { HandleNotFound, HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const h = await store.mint("task", { todo: ["ship"] }, { user: "alice" });
   * const theirs = await store.transfer(h, { user: "alice", to: "bob" });
   * (await store.get(theirs, { user: "bob" })).state.todo; // ["ship"]
   * await store.get(h, { user: "alice" }).catch((e) => e instanceof HandleNotFound); // true
   * ```
   */
  transfer(handle: string, options: TransferOptions): Promise<string> {
    return lineage.transfer(this.#core, handle, options);
  }

  /** Closes the backend. Idempotent. */
  close(): Promise<void> {
    return closeCore(this.#core, this.#timer);
  }

  /** Same as {@link HandleStore.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Shares a handle: `to` (a user, or `"*"`) may use the returned alias with `rights`
   * (docs/travel.md#sharing-a-handle).
   * @param handle The owner's handle, or an alias the caller holds (a re-share).
   * @param options The caller, the grantee, the rights, the TTL in days.
   * @returns The grant, with the alias handle the grantee uses.
   * @throws {PermissionDenied} when a re-share would widen the rights or outlive the grant held.
   * @throws {HandleNotFound} when the caller has no such handle (a trashed one included).
   * @throws {HandleExpired} when the handle expired.
   * @throws {InvalidArgument} for malformed rights, `to` or TTL, a share with oneself, or a backend
   * that keeps no grants.
   * @since 0.5.0
   * @example Share read-only for a week, then end it
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const h = await store.mint("research", { notes: [] }, { user: "alice" });
   * const g = await store.share(h, { user: "alice", to: "bob", rights: "read", ttlDays: 7 });
   * (await store.get(g.handle, { user: "bob" })).sharedBy; // "alice"
   * await store.unshare(g.grant, { user: "alice" });
   * ```
   */
  share(handle: string, options: ShareOptions): Promise<Grant> {
    return sharing.share(this.#core, handle, options);
  }

  /**
   * Ends a grant and every re-share made under it, at once: once this returns, no call through any
   * of them reads or writes.
   * @param grantOrAlias The grant id or its alias handle.
   * @param options The owner, or whoever made the re-share or one above it.
   * @returns How many grants it ended (0 when it had ended already).
   * @throws {HandleNotFound} when there is no such grant for the caller.
   * @throws {PermissionDenied} when the caller is the grantee of that grant.
   * @since 0.5.0
   */
  unshare(grantOrAlias: string, options: UserOption): Promise<number> {
    return sharing.unshare(this.#core, grantOrAlias, options);
  }

  /**
   * The grants in force on a handle: all for its owner, a grantee's own re-shares for its alias.
   * @param handle The owner's handle, or an alias the caller holds.
   * @param options The caller.
   * @returns The grants, oldest first.
   * @since 0.5.0
   */
  grants(handle: string, options: UserOption): Promise<Grant[]> {
    return sharing.grants(this.#core, handle, options);
  }

  /**
   * A handle's grants in force, as the backend keeps them (docs/library.md#export-and-import).
   * @param user The owner.
   * @param handle The owner's handle.
   * @returns The grants, oldest first (a re-share after its parent); none without grants.
   * @since 0.5.0
   */
  exportGrants(user: string, handle: string): Promise<GrantRecord[]> {
    return records.exportGrants(this.#core, user, handle);
  }

  /**
   * Checks a grant by the rules {@link HandleStore.importGrant} applies, writing nothing.
   * @param grant The grant.
   * @throws {InvalidArgument} naming the first field that is wrong.
   * @since 0.5.0
   */
  checkGrant(grant: GrantRecord): void {
    checkGrantRecord(grant);
  }

  /**
   * Imports an exported grant, once its handle is imported (docs/library.md#export-and-import).
   * @param grant The grant.
   * @param options `dryRun`: compare only, write nothing.
   * @returns What happened.
   * @throws {InvalidArgument} for a malformed grant, one whose id or alias the target holds for
   * another grant, or a backend that keeps no grants.
   * @since 0.5.0
   */
  importGrant(
    grant: GrantRecord,
    options: { dryRun?: boolean } = {},
  ): Promise<"inserted" | "identical" | "ended" | "missing"> {
    return records.importGrant(this.#core, grant, options);
  }
}
