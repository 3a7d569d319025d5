/**
 * `HandleStore`: every rule of mcpstate — minting, scoping, versions, TTL,
 * conflicts, idempotency, validation — over a {@link Backend} of atomic
 * primitives. The class is a façade: each method hands its arguments and
 * the store's core (backend, clock, checked options) to a feature module
 * under `store/`, which holds the rules.
 *
 * @module
 */

import type { Backend, GrantRecord, HandleRecord } from "./backend.ts";
import type { JsonObject } from "./json.ts";
import { Kind, type KindOptions } from "./kinds.ts";
import type { PatchOp } from "./ops.ts";
import type { InferInput, InferOutput, StandardSchemaV1 } from "./standard_schema.ts";
import type { Grant, ShareOptions } from "./grants.ts";
import { checkGrantRecord } from "./store/_check.ts";
import { type Core, coreOf, reclaim } from "./store/_core.ts";
import * as history from "./store/_history.ts";
import * as leases from "./store/_lease.ts";
import * as lineage from "./store/_lineage.ts";
import * as listing from "./store/_list.ts";
import * as reads from "./store/_read.ts";
import * as records from "./store/_records.ts";
import * as sharing from "./store/_share.ts";
import * as trashing from "./store/_trash.ts";
import * as writes from "./store/_write.ts";
import type {
  ChangesSince,
  ForkOptions,
  HandleInfo,
  HandlePage,
  HandleStoreCapabilities,
  HandleStoreOptions,
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
  TrashOptions,
  TrashPage,
  UsageInfo,
  UserOption,
  UsersOptions,
  WatchOptions,
} from "./types.ts";

export type { ForkPoint } from "./backend.ts";
export type * from "./types.ts";
export { leasePayload, toPayload, toReadPayload } from "./wire.ts";

/**
 * Durable, user-keyed, versioned state behind opaque handles.
 *
 * @example Mint, read, save with a version check, patch
 * ```ts
 * import { Append, HandleStore, StaleWrite } from "@mcpstate/core";
 * await using store = await HandleStore.fromUrl("memory://");
 * const handle = await store.mint("research", { sources: [] }, { user: "alice", ttlDays: 7 });
 * const snap = await store.get(handle, { user: "alice" });
 * await store.save(handle, { sources: ["a"] }, { user: "alice", expectVersion: snap.version });
 * try {
 *   await store.save(handle, { sources: [] }, { user: "alice", expectVersion: snap.version });
 * } catch (e) {
 *   if (!(e instanceof StaleWrite)) throw e; // e.details.current is the winner's snapshot
 * }
 * await store.patch(handle, [Append("sources", "b")], { user: "alice" });
 * ```
 */
export class HandleStore implements AsyncDisposable {
  readonly #core: Core;
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * Wraps a backend.
   *
   * @param backend The storage primitives.
   * @param options Clock, size cap, patch length cap, grace period, reclaim interval.
   */
  constructor(backend: Backend, options: HandleStoreOptions = {}) {
    this.#core = coreOf(backend, options);
    const every = this.#core.reclaimMs;
    if (!backend.reclaimsExpired && every > 0) {
      const timer = setInterval(() => reclaim(this.#core), every);
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
  }

  /**
   * Opens a store on the backend a URL names (see the README for the forms).
   *
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
   *
   * @since 0.5.0
   *
   * @example
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * store.capabilities; // { users: true, importRecord: true }
   * ```
   */
  get capabilities(): HandleStoreCapabilities {
    return {
      users: typeof this.#core.backend.listUsers === "function",
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
   * A typed view of one kind: `mint`, `get`, `save`, `patch` and `read` with
   * the state typed by `schema` (any Standard Schema v1, such as a zod 4
   * schema). Every write is validated after its ops apply, and a state the
   * schema rejects is `InvalidState` with nothing written. With `version`
   * and `upcast`, states written under older versions are migrated when read
   * and written back upgraded on the next write.
   *
   * @param name The kind, `^[a-z][a-z0-9-]{0,31}$`.
   * @param schema A Standard Schema of the state.
   * @param options The schema version (default 1), upcasts, a JSON Schema.
   * @returns The typed view, bound to this store.
   * @throws {InvalidArgument} for a malformed name, schema or option.
   * @since 0.5.0
   *
   * @example
   * ```ts
   * import { z } from "zod";
   * import { HandleStore } from "@mcpstate/core";
   *
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
    return new Kind(
      name,
      schema as StandardSchemaV1<InferInput<T>, InferOutput<T>>,
      options,
      this,
    );
  }

  /**
   * Mints a new handle holding `state`.
   *
   * @param kind Lowercase kind, `^[a-z][a-z0-9-]{0,31}$`.
   * @param state A JSON object.
   * @param options The user, TTL, writer, idempotency key.
   * @returns The new handle.
   * @throws {InvalidArgument} for a malformed kind, user, TTL, writer or
   * idempotency key, a state that is not plain JSON, or an idempotency key
   * already used for a different call; nothing is written.
   * @throws {StateTooLarge} when the state's compact JSON is over `maxStateBytes`.
   * @throws {BackendError} when the engine fails or the store is closed.
   *
   * @example Mint a handle, once even when the call is retried
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   *
   * await using store = await HandleStore.fromUrl("memory://");
   * const options = { user: "alice", ttlDays: 7, idempotencyKey: "task-42" };
   * const handle = await store.mint("research", { sources: [] }, options);
   * handle.startsWith("research_"); // true: the kind, then 8 random characters
   * const again = await store.mint("research", { sources: [] }, options);
   * again === handle; // true: the retry returned the first result
   * ```
   */
  mint(kind: string, state: JsonObject, options: MintOptions): Promise<string> {
    return writes.mint(this.#core, kind, state, options);
  }

  /**
   * Reads a handle's snapshot.
   *
   * @param handle The handle.
   * @param options The user.
   * @returns The snapshot.
   * @throws {HandleNotFound} when the user has no such handle (another user's
   * handle reads the same).
   * @throws {HandleExpired} when its TTL passed and it is still in the grace period.
   * @throws {InvalidArgument} for a malformed handle or user.
   * @throws {BackendError} when the engine fails or the store is closed.
   *
   * @example Read a handle, and only as its owner
   * ```ts
   * import { HandleNotFound, HandleStore } from "@mcpstate/core";
   *
   * await using store = await HandleStore.fromUrl("memory://");
   * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
   * const snap = await store.get(handle, { user: "alice" });
   * snap.version; // 1
   * snap.state.text; // "hi"
   * await store.get(handle, { user: "bob" }).catch((e) => e instanceof HandleNotFound); // true
   * ```
   */
  get<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>> {
    return reads.get<S>(this.#core, handle, options);
  }

  /**
   * Reads a handle within a budget, for a caller (a model) that pays for
   * every byte it reads. Within `maxBytes` (or with none) the answer holds the
   * whole `state`; over it, an `outline` (keys, list lengths, sizes, short
   * previews, and the JSON Pointer of every part left out) with
   * `truncated: true`. With `paths`, only those parts are read: `values` maps
   * each path to its value, sharing the budget as {@link readPaths} does.
   *
   * @param handle The handle.
   * @param options The user, the budget, the paths.
   * @returns The metadata with the values of the paths (and their outlines).
   * @throws {InvalidArgument} When `maxBytes` is not a whole number of at least
   * 256, or `paths` is not a list of at most 32 well-formed paths.
   *
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
  /**
   * Reads a handle's whole state, or its outline when it is over `maxBytes`.
   *
   * @param handle The handle.
   * @param options The user and the budget.
   * @returns The metadata with the state or its outline.
   */
  read<S = JsonObject>(
    handle: string,
    options: ReadOptions & { paths?: undefined },
  ): Promise<StateRead<S>>;
  /**
   * Reads a handle within a budget (see the first signature).
   *
   * @param handle The handle.
   * @param options The user, the budget, the paths.
   * @returns The metadata with the state, its outline, or the values of the paths.
   */
  read<S = JsonObject>(handle: string, options: ReadOptions): Promise<ReadResult<S>>;
  read<S = JsonObject>(handle: string, options: ReadOptions): Promise<ReadResult<S>> {
    return reads.read<S>(this.#core, handle, options);
  }

  /**
   * Replaces a handle's state if it is still at `expectVersion`.
   *
   * @param handle The handle.
   * @param state The new state.
   * @param options The user, the version read, writer, TTL, idempotency key.
   * @returns The new snapshot.
   * @throws {StaleWrite} when someone wrote since `expectVersion`; its details
   * carry the current snapshot (and, with history, the changes since), and
   * nothing is written.
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed: a save does not revive it.
   * @throws {InvalidArgument} for a malformed handle, user, `expectVersion`,
   * TTL, writer or idempotency key, or a state that is not plain JSON.
   * @throws {StateTooLarge} when the state's compact JSON is over `maxStateBytes`.
   * @throws {BackendError} when the engine fails or the store is closed.
   *
   * @example Save on the version you read; on a conflict, re-read and apply again
   * ```ts
   * import { HandleStore, StaleWrite } from "@mcpstate/core";
   *
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
   * Applies patch ops atomically; never raises `StaleWrite`. A patch that
   * changes nothing writes nothing.
   *
   * @param handle The handle.
   * @param ops Ops from the factories or their wire form.
   * @param options The user, writer, idempotency key.
   * @returns The snapshot after the patch.
   * @throws {PatchError} for a malformed op, one that cannot apply, or more
   * than `maxPatchOps` ops (`reason` says which); no op of it is applied.
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed.
   * @throws {InvalidArgument} for a malformed handle, user, writer or
   * idempotency key, or an op value that is not plain JSON.
   * @throws {StateTooLarge} when the patched state would be over `maxStateBytes`.
   * @throws {BackendError} when the engine fails or the store is closed.
   *
   * @example Patch without reading first: concurrent patches all land
   * ```ts
   * import { Append, HandleStore, Increment } from "@mcpstate/core";
   *
   * await using store = await HandleStore.fromUrl("memory://");
   * const user = "alice";
   * const handle = await store.mint("log", { lines: [], count: 0 }, { user });
   * await Promise.all(["a", "b", "c"].map((line) =>
   *   store.patch(handle, [Append("lines", line), Increment("", "count")], { user })
   * ));
   * const snap = await store.get(handle, { user });
   * snap.state.count; // 3
   * snap.version; // 4
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
   *
   * @param handle The handle.
   * @param options The user, the new TTL (`null`: never), writer.
   * @returns The snapshot after the touch.
   */
  touch<S = JsonObject>(handle: string, options: TouchOptions): Promise<Snapshot<S>> {
    return writes.touch<S>(this.#core, handle, options);
  }

  /**
   * Lists a user's handles (metadata only), newest `updatedAt` first.
   *
   * @param user The user.
   * @param options Kind filter; whether to include expired handles.
   * @returns Every matching handle.
   */
  list(user: string, options: ListOptions = {}): Promise<HandleInfo[]> {
    return listing.list(this.#core, user, options);
  }

  /**
   * Lists one page of a user's handles.
   *
   * @param user The user.
   * @param options Kind filter, expired handles, page size, cursor.
   * @returns The page and the cursor of the next one.
   */
  listPage(user: string, options: ListPageOptions = {}): Promise<HandlePage> {
    return listing.listPage(this.#core, user, options);
  }

  /**
   * Deletes a handle. An expired handle is deleted as well.
   *
   * @param handle The handle.
   * @param options The user, idempotency key.
   */
  revoke(handle: string, options: RevokeOptions): Promise<void> {
    return trashing.revoke(this.#core, handle, options);
  }

  /**
   * Brings a revoked handle back from the trash, exactly at its last version,
   * within the undo window (`trashDays`).
   *
   * @param handle The revoked handle.
   * @param options The user.
   * @returns The restored snapshot.
   * @throws {HandleNotFound} when there is nothing to restore.
   */
  restore<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>> {
    return trashing.restore<S>(this.#core, handle, options);
  }

  /**
   * One page of a user's trash: the handles `revoke` moved there whose undo
   * window (`trashDays`) is still open by this store's clock, newest-deleted
   * first, metadata only. Each can be brought back with
   * {@link HandleStore.restore} until its `restorableUntil`.
   *
   * @param user The user.
   * @param options Page size (1 to 500, default 50) and the `nextCursor` of the previous page.
   * @returns The page and the cursor of the next one (`null` on the last page).
   * @throws {InvalidArgument} for a malformed user, limit or cursor, or a
   * backend that cannot list its trash (every built-in one can).
   * @throws {BackendError} when the engine fails or the store is closed.
   * @since 0.5.0
   *
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
   * What happened to a handle after `version`: the changelog entries, oldest
   * first, or — when the log no longer reaches back that far — `truncated`
   * with the current snapshot, so a caller always has a way forward.
   *
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
   * The state a handle had at an earlier version, rebuilt from the current
   * state and the changelog: each save and patch entry keeps the previous
   * values at the places it changed (`undo`), and undoing the entries after
   * `version`, newest first, gives the state at `version`. It is equal as
   * JSON to the state that version wrote (an object's keys may come back in
   * another order).
   *
   * @param handle The handle.
   * @param version A version from 1 to the current one.
   * @param options The user.
   * @returns The handle, kind, version and the state at that version.
   * @throws {InvalidArgument} When `version` is not a whole number from 1 to
   * the current version (`field: "version"`), or when the state at `version`
   * is no longer in the retained history (details `reason:
   * "history_unavailable"`, and `version`, the current one): the changelog
   * keeps `history.maxEntries` entries of at most `history.maxAgeDays`, an
   * entry over `history.maxEntryBytes` is kept as a marker only, and entries
   * written before this release carry no way back.
   * @throws {HandleNotFound} When the user has no such handle.
   * @throws {HandleExpired} When its TTL passed.
   * @since 0.5.0
   *
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
   * Takes (or renews) an advisory lease on a live handle: "`writer` is at
   * work on this for the next `seconds`". A lease never blocks a write and
   * never moves the version; `get` and `list` show it as `activeLease` until
   * it lapses or is released, so a resuming session sees who is at work.
   * While another holder's lease is in force nothing changes and the answer
   * has `acquired: false` with that holder.
   *
   * @param handle The handle.
   * @param options The user, the holder (`writer`), the lease's length.
   * @returns Whether the caller holds it, and the lease in force.
   * @since 0.4.0
   *
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
   * Releases the lease `writer` holds on a handle; another holder's lease is
   * left alone.
   *
   * @param handle The handle.
   * @param options The user and the holder.
   * @returns Whether a lease in force was released.
   * @since 0.4.0
   */
  release(handle: string, options: ReleaseOptions): Promise<boolean> {
    return leases.release(this.#core, handle, options);
  }

  /**
   * Watches a handle: yields its current snapshot, then a snapshot each time
   * its version moves — written through this store, another process or
   * another instance on the same backend. Versions that follow each other
   * quickly may be coalesced into the last one; `changesSince` recovers
   * every step between two yielded versions. The iteration ends when
   * `signal` aborts, and throws `handle_not_found` or `handle_expired` when
   * the handle is revoked or expires.
   *
   * @param handle The handle.
   * @param options The user, an abort signal, the safety-net poll interval.
   * @returns An async iterable of snapshots.
   * @since 0.4.0
   *
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
   * Removes every expired record now, grace period or not.
   *
   * @param user Only this user's; every user's when absent.
   * @returns How many records were removed.
   */
  sweep(user?: string): Promise<number> {
    return trashing.sweep(this.#core, user);
  }

  /**
   * Whether a handle has expired by this store's clock (what `get` answers
   * with `handle_expired`): for the entries of `list` with `includeExpired`.
   *
   * @param info A handle's metadata or snapshot.
   * @returns `true` when its expiry has passed.
   * @since 0.5.0
   *
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
   * One page of the users that hold at least one record (expired ones
   * included), in the backend's order: pass the last user of a page as
   * `after` for the next one; a page shorter than `limit` is the last. This
   * is how `mcpstate export` and `migrate` find every user.
   *
   * @param options Where to start, and the page size.
   * @returns The users of the page.
   * @throws {InvalidArgument} when the backend cannot list its users (see {@link HandleStore.capabilities}).
   * @since 0.5.0
   *
   * @example Every user of a store
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * await store.mint("note", {}, { user: "alice" });
   * await store.mint("note", {}, { user: "bob" });
   * const users: string[] = [];
   * // Pages of one user each, to show the paging; the default page holds 1,000.
   * let page = await store.users({ limit: 1 });
   * users.push(...page);
   * while (page.length === 1) {
   *   page = await store.users({ after: page[0]!, limit: 1 });
   *   users.push(...page);
   * }
   * users; // ["alice", "bob"]
   * ```
   */
  users(options: UsersOptions = {}): Promise<string[]> {
    return listing.users(this.#core, options);
  }

  /**
   * Every record of a user as the backend keeps it — state as JSON text,
   * times in epoch ms — expired records included, in handle order (UTF-16
   * code units), so that two exports of the same data are identical. Records
   * written while the walk runs are carried too; a record deleted meanwhile
   * is left out. This is what `mcpstate export` writes. `user` may be any
   * user {@link HandleStore.users} lists, even a name the store refuses
   * today (written by an older release), so that nothing is left behind.
   *
   * @param user The user.
   * @returns The records, read a page at a time.
   * @since 0.5.0
   *
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
   * How many records {@link HandleStore.exportRecords} would give for a user
   * now: their handles, expired ones included (metadata only, for a
   * progress bar).
   *
   * @param user The user.
   * @returns The count.
   * @since 0.5.0
   */
  countRecords(user: string): Promise<number> {
    return records.countRecords(this.#core, user);
  }

  /**
   * Checks a record by the rules {@link HandleStore.importRecord} applies,
   * writing nothing: the user, handle, kind and writer are names the store
   * accepts, the kind is a valid kind, the version and times are whole
   * numbers, and the state is a JSON object within the size cap. The
   * messages name the record's fields in their wire form (`"last_writer"`).
   *
   * @param user The user the record belongs to.
   * @param record The record.
   * @throws {InvalidArgument} naming the first field that is wrong.
   * @throws {StateTooLarge} when the state is over the size cap.
   * @since 0.5.0
   *
   * @example Refuse a record before writing anything
   * ```ts
   * import { HandleStore, type HandleRecord, InvalidArgument } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const record: HandleRecord = {
   *   handle: "Notes_k3v9x2mq",
   *   kind: "Notes",
   *   state: "{}",
   *   version: 1,
   *   createdAt: Date.now(),
   *   updatedAt: Date.now(),
   *   expiresAt: null,
   *   lastWriter: null,
   * };
   * try {
   *   store.checkRecord("alice", record);
   * } catch (e) {
   *   if (!(e instanceof InvalidArgument)) throw e; // '"kind" "Notes" is not a valid kind.'
   * }
   * ```
   */
  checkRecord(user: string, record: HandleRecord): void {
    records.checkRecord(this.#core, user, record);
  }

  /**
   * Imports a record exactly as given — handle, kind, state text, version,
   * times, expiry and writer — for a restore from an export or a migration
   * between backends. It is written when the user has no record with that
   * handle, or one with a lower version; otherwise nothing changes, so
   * importing again is harmless and never overwrites newer data. A record
   * that expired longer ago than the grace period is skipped. The record is
   * checked first as {@link HandleStore.checkRecord} does; a record that
   * fails is not written.
   *
   * @param user The user the record belongs to.
   * @param record The record, as {@link HandleStore.exportRecords} gives it.
   * @param options `dryRun`: check and compare only.
   * @returns What was done, and the record the store holds now.
   * @throws {InvalidArgument} for a record that breaks a rule, or when the
   *   backend cannot import (see {@link HandleStore.capabilities}; a dry run
   *   works on every backend).
   * @throws {StateTooLarge} when the state is over the size cap.
   * @since 0.5.0
   *
   * @example Import a record, then see that a second import keeps it
   * ```ts
   * import { HandleStore } from "@mcpstate/core";
   * await using store = await HandleStore.fromUrl("memory://");
   * const record = {
   *   handle: "note_k3v9x2mq",
   *   kind: "note",
   *   state: '{"text":"kept byte for byte"}',
   *   version: 3,
   *   createdAt: Date.now() - 60_000,
   *   updatedAt: Date.now(),
   *   expiresAt: null,
   *   lastWriter: "laptop/claude-code",
   * };
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
   *
   * @since 0.5.0
   */
  get quotas(): QuotaOptions | undefined {
    return this.#core.quotas && { ...this.#core.quotas };
  }

  /**
   * A user's usage: live handles (expired ones count until they are
   * reclaimed, trashed ones do not), the UTF-8 bytes of their states, and
   * the writes counted against `writesPerMinute` in the current minute of
   * the store clock (0 unless the store, or another sharing the backend,
   * enforces quotas).
   *
   * @param user The user.
   * @returns The usage.
   * @throws {InvalidArgument} for a malformed user, or a backend that keeps no usage.
   * @throws {BackendError} when the engine fails or the store is closed.
   * @since 0.5.0
   *
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
   * Forks a handle: a new handle of the same kind, owned by the caller,
   * holding the origin's state at its current version, with lineage
   * `forkedFrom: { handle, version }`. The fork is an ordinary handle
   * afterwards (its own versions from 1, its own changelog, the origin's
   * expiry and schema version); {@link HandleStore.mergeBack} brings its
   * changes home. The fork's mint entry in the changelog is `op: "fork"`
   * with `from`. A fork counts for the caller's quotas like a mint.
   *
   * @param handle The handle to fork (the caller's own).
   * @param options The user and the writer label.
   * @returns The fork's handle (as long as the origin's).
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed.
   * @throws {InvalidArgument} for a malformed handle, user or writer.
   * @throws {QuotaExceeded} when the fork would put the user over a quota.
   * @throws {BackendError} when the engine fails or the store is closed.
   * @since 0.5.0
   *
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
   * Merges a fork back into its origin: the fork's changes since the fork
   * point are applied to the origin with the disjoint merge of
   * `save(…, { onConflict: "merge" })` (see `merge.ts`), whatever the
   * origin's writers did meanwhile, as long as the two sides touched
   * disjoint places. The origin's changelog entry is `op: "merge"` with
   * `from: { handle, version }` (the fork and the version merged) and
   * `base_version` (the fork point). The fork stays as it is; merging it
   * again later brings the changes made since the first merge only if they
   * are still disjoint from the origin's, so fork again for more work.
   *
   * @param fork The fork (the caller's own handle made by {@link HandleStore.fork}).
   * @param options The user and the writer label of the origin's write.
   * @returns The origin's snapshot after the merge, with `mergedFrom`: the
   * fork and its version that were merged.
   * @throws {StaleWrite} with `conflicts` (the JSON Pointers both sides
   * changed) when the changes overlap, or with `reason: "history_unavailable"`
   * when the origin's state at the fork point is no longer in its changelog;
   * nothing is written.
   * @throws {HandleNotFound} when the user has no such fork, or its origin is gone.
   * @throws {HandleExpired} when the fork or the origin expired.
   * @throws {InvalidArgument} when the handle is no fork, or for a malformed
   * handle, user or writer.
   * @throws {BackendError} when the engine fails or the store is closed.
   * @since 0.5.0
   */
  mergeBack<S = JsonObject>(fork: string, options: ForkOptions): Promise<MergeResult<S>> {
    return lineage.mergeBack<S>(this.#core, fork, options);
  }

  /**
   * Transfers a handle to another user for good: its state, version,
   * timestamps and changelog move to `to` under the same handle string (so
   * a link or a note that names it stays right), in one atomic step; the old
   * owner loses access at once, or keeps a grant of rights `keep` (it shows
   * in the old owner's `list` with `sharedBy`, and in the new owner's
   * `grants`). Grants the old owner had made on the handle end in that same
   * step: the new owner decides who else may use it. With history on, the
   * move is the handle's next version, with a `transfer` entry (`from`, `to`,
   * `keep`). Refused, with nothing changed, when `to` already has a handle of
   * that name (live or in the trash).
   *
   * @param handle The caller's handle.
   * @param options The user, `to` (the new owner) and `keep`.
   * @returns The handle as the new owner uses it (the same string).
   * @throws {HandleNotFound} when the user has no such handle.
   * @throws {HandleExpired} when its TTL passed.
   * @throws {InvalidArgument} for a malformed handle, user, `to` or `keep`,
   * `to` equal to the user, `to` already holding that handle, or a backend
   * without the `transfer` primitive.
   * @throws {QuotaExceeded} when the handle would put `to` over a quota.
   * @throws {BackendError} when the engine fails or the store is closed.
   * @since 0.5.0
   *
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
  async close(): Promise<void> {
    if (this.#core.closed) return;
    this.#core.closed = true;
    clearInterval(this.#timer);
    await this.#core.backend.close();
  }

  /** Same as {@link HandleStore.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Shares a handle: `to` (a user id, or `"*"` for anyone who holds the
   * returned alias handle) may use the alias with `rights` — `read` (get,
   * read, list, changes), `append` (read + patches of only `append`,
   * `add_to_set`, `increment`), `patch` (read + any patch) or `write`
   * (patch + save and touch). A grantee may re-share its alias with rights
   * and expiry no wider than its own. Writes through a grant are checked
   * against it in the same atomic step as the write.
   *
   * @param handle The owner's handle, or an alias the caller holds (a re-share).
   * @param options The caller, the grantee, the rights, the TTL in days.
   * @returns The grant, with the alias handle the grantee uses.
   * @throws {PermissionDenied} when a re-share would widen the rights or outlive the grant held.
   * @throws {HandleNotFound} when the caller has no such handle (a trashed one included).
   * @throws {HandleExpired} when the handle expired.
   * @throws {InvalidArgument} for malformed rights, `to` or TTL, a share with
   * oneself, or a backend that keeps no grants.
   * @since 0.5.0
   *
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
   * Ends a grant and every re-share made under it, at once: once this
   * returns, no call through any of them reads or writes.
   *
   * @param grantOrAlias The grant id or its alias handle.
   * @param options The owner of the handle, or the grantee who made the re-share
   * (or a re-share above it).
   * @returns How many grants it ended (0 when it had ended already).
   * @throws {HandleNotFound} when there is no such grant for the caller.
   * @throws {PermissionDenied} when the caller is the grantee of that grant.
   * @since 0.5.0
   */
  unshare(grantOrAlias: string, options: UserOption): Promise<number> {
    return sharing.unshare(this.#core, grantOrAlias, options);
  }

  /**
   * The grants in force on a handle: for its owner every one; for a grantee
   * (passing its alias) the re-shares made under its own grant.
   *
   * @param handle The owner's handle, or an alias the caller holds.
   * @param options The caller.
   * @returns The grants, oldest first.
   * @since 0.5.0
   */
  grants(handle: string, options: UserOption): Promise<Grant[]> {
    return sharing.grants(this.#core, handle, options);
  }

  /**
   * The grants in force on a user's handle, whole, as the backend keeps
   * them: what `mcpstate export` writes after the record, so that import and
   * migrate carry them. Empty on a backend that keeps no grants.
   *
   * @param user The owner.
   * @param handle The owner's handle.
   * @returns The grants in force, oldest first (a re-share after its parent).
   * @since 0.5.0
   */
  exportGrants(user: string, handle: string): Promise<GrantRecord[]> {
    return records.exportGrants(this.#core, user, handle);
  }

  /**
   * Checks a grant by the rules {@link HandleStore.importGrant} applies,
   * writing nothing.
   *
   * @param grant The grant.
   * @throws {InvalidArgument} naming the first field that is wrong.
   * @since 0.5.0
   */
  checkGrant(grant: GrantRecord): void {
    checkGrantRecord(grant);
  }

  /**
   * Imports a grant exactly as exported ({@link HandleStore.exportGrants}),
   * once its handle has been imported: `"inserted"`; `"identical"` when the
   * target holds it already (a re-run); `"ended"` when it ended or expired
   * meanwhile, or its parent grant did (nothing written); `"missing"` when the
   * owner's handle is not in the target, or, with `dryRun`, when the grant
   * is not. No changelog entry is written: the grant's `share` entry came
   * with the handle's history, if any.
   *
   * @param grant The grant.
   * @param options `dryRun`: compare only, write nothing.
   * @returns What happened.
   * @throws {InvalidArgument} for a malformed grant, one whose id or alias the
   * target holds for another grant, or a backend that keeps no grants.
   * @since 0.5.0
   */
  importGrant(
    grant: GrantRecord,
    options: { dryRun?: boolean } = {},
  ): Promise<"inserted" | "identical" | "ended" | "missing"> {
    return records.importGrant(this.#core, grant, options);
  }
}
