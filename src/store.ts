/**
 * `HandleStore`: every rule of mcpstate — minting, scoping, versions, TTL,
 * conflicts, idempotency, validation — over a {@link Backend} of atomic
 * primitives.
 *
 * @module
 */

import { previewOf } from "./preview.ts";
import { createPatch, type Operation } from "rfc6902";
import type {
  AuditStep,
  Backend,
  ChangeEntry,
  ForkPoint,
  GrantRecord,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  LeaseOutcome,
  LeaseRecord,
  QuotaLimits,
  Replayed,
  Retention,
  Step,
  UpdateOutcome,
  WriteContext,
} from "./backend.ts";
import { isReplayed, metaOf } from "./backend.ts";
export type { ForkPoint } from "./backend.ts";
import type {
  ChangeInfo,
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
  WriteLeaseOption,
} from "./types.ts";
export type {
  ActiveLease,
  ChangeInfo,
  ChangesSince,
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
} from "./types.ts";
import { toPayload } from "./wire.ts";
export { leasePayload, toPayload, toReadPayload } from "./wire.ts";
import {
  BackendError,
  HandleExpired,
  HandleNotFound,
  InvalidArgument,
  McpStateError,
  PermissionDenied,
  type Rights,
  StaleWrite,
  StateTooLarge,
} from "./errors.ts";
import {
  assertJson,
  decodeState,
  encodeParsed,
  encodeState,
  isPlainObject,
  type JsonObject,
  utf8Length,
} from "./json.ts";
import { applyOpsWithUndo, type JsonPatchOp, opsFromJson, type PatchOp } from "./ops.ts";
import { type EntryInfo, EVENT_OPS, rewind, undoOf } from "./history.ts";
import { mergeStates } from "./merge.ts";
import {
  checkNow,
  Kind,
  kindOfHandle,
  type KindOptions,
  type KindRule,
  rulesIn,
  withRules,
} from "./kinds.ts";
import type { InferInput, InferOutput, StandardSchemaV1 } from "./standard_schema.ts";
import {
  checkRights,
  covers,
  type Grant,
  GrantEnded,
  grantGone,
  grantOf,
  random130,
  rightsForOps,
  type ShareOptions,
} from "./grants.ts";
import { checkReadArgs, jsonSize, outline, readPaths } from "./outline.ts";

/**
 * How many times a merging save reads the changelog again and retries when
 * other writes keep landing between its read and its write. Every retry
 * means another writer's write landed, so the store as a whole progresses;
 * the bound only keeps one save from chasing a stream of writes for ever
 * (it then fails as a plain stale write, with the current state).
 */
const MERGE_ATTEMPTS = 64;

const DAY_MS = 86_400_000;
/** Options key of a call routed through a grant (the grant), or `null` for a direct call. */
const VIA: unique symbol = Symbol("mcpstate.via");
const ALPHABET = "abcdefghijklmnopqrstuvwxyz234567";
const KIND_RE = /^[a-z][a-z0-9-]{0,31}$/;
const IDEMPOTENCY_MS = DAY_MS;
const MAX_TIMER_MS = 2 ** 31 - 1;
const MAX_LEASE_SECONDS = 86_400;
/** Metadata rows per backend listing when a whole user is walked. */
const WALK_PAGE = 500;
/** Records read at once when a user's records are exported. */
const EXPORT_READS = 32;
/** Handles whose `updatedAt` is within this margin of the start of an export's listing are listed again. */
const EXPORT_CATCH_UP_MS = 5 * 60_000;
/** How an entry's text starts before its version is known (see {@link AuditStep}). */
const AUDIT_HEAD = '{"version":0,';

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
  readonly #backend: Backend;
  readonly #clock: () => number;
  readonly #maxBytes: number;
  readonly #maxPatchOps: number;
  readonly #graceMs: number;
  readonly #retention: Retention | undefined;
  readonly #maxEntryBytes: number;
  readonly #trashMs: number;
  readonly #quotas: QuotaLimits | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  /**
   * Wraps a backend.
   *
   * @param backend The storage primitives.
   * @param options Clock, size cap, patch length cap, grace period, reclaim interval.
   */
  constructor(backend: Backend, options: HandleStoreOptions = {}) {
    checkOptions(options, "HandleStore");
    this.#backend = backend;
    const clock = options.clock ?? Date.now;
    if (typeof clock !== "function") {
      throw new InvalidArgument("clock must be a function returning the time in epoch ms.", {
        field: "clock",
      });
    }
    this.#clock = clock;
    const max = options.maxStateBytes ?? 1_048_576;
    if (!Number.isSafeInteger(max) || max < 2) {
      throw new InvalidArgument("maxStateBytes must be a whole number of bytes, at least 2.");
    }
    this.#maxBytes = max;
    const maxOps = options.maxPatchOps ?? 1000;
    if (!Number.isSafeInteger(maxOps) || maxOps < 1) {
      throw new InvalidArgument("maxPatchOps must be a whole number of ops, at least 1.", {
        field: "maxPatchOps",
      });
    }
    this.#maxPatchOps = maxOps;
    const grace = options.expiredGraceDays ?? 7;
    if (typeof grace !== "number" || !Number.isFinite(grace) || grace < 0) {
      throw new InvalidArgument("expiredGraceDays must be a finite number of days, 0 or more.");
    }
    this.#graceMs = Math.round(grace * DAY_MS);
    const history = options.history ?? {};
    if (history !== false) {
      checkOptions(history, "history");
      const maxEntries = history.maxEntries ?? 100;
      const maxAgeDays = history.maxAgeDays ?? 30;
      const maxEntryBytes = history.maxEntryBytes ?? 32_768;
      for (const [name, v] of [["maxEntries", maxEntries], ["maxEntryBytes", maxEntryBytes]]) {
        if (!Number.isSafeInteger(v) || (v as number) < 1) {
          throw new InvalidArgument(`history.${name} must be a whole number, at least 1.`);
        }
      }
      if (typeof maxAgeDays !== "number" || !(maxAgeDays > 0)) {
        throw new InvalidArgument("history.maxAgeDays must be a number of days greater than 0.");
      }
      this.#retention = { maxEntries, maxAgeMs: Math.round(maxAgeDays * DAY_MS) };
      this.#maxEntryBytes = Math.min(maxEntryBytes, backend.maxEntryBytes ?? Infinity);
    } else {
      this.#retention = undefined;
      this.#maxEntryBytes = 0;
    }
    const trash = options.trashDays ?? 7;
    if (typeof trash !== "number" || !Number.isFinite(trash) || trash < 0) {
      throw new InvalidArgument("trashDays must be a finite number of days, 0 or more.");
    }
    this.#trashMs = Math.round(trash * DAY_MS);
    this.#quotas = checkQuotas(options.quotas, backend);
    const every = options.reclaimIntervalMs ?? 600_000;
    // setInterval runs a delay over 2^31 - 1 ms every millisecond instead.
    if (typeof every !== "number" || !(every >= 0 && every <= MAX_TIMER_MS)) {
      throw new InvalidArgument(
        `reclaimIntervalMs must be a number of ms from 0 (off) to ${MAX_TIMER_MS} (about 24.8 days).`,
        { field: "reclaimIntervalMs" },
      );
    }
    if (!backend.reclaimsExpired && every > 0) {
      const timer = setInterval(() => this.#reclaim(), every);
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
      users: typeof this.#backend.listUsers === "function",
      importRecord: this.#importer() !== undefined,
      grants: this.#grantBackend() !== undefined,
    };
  }

  /** The state size cap in bytes. */
  get maxStateBytes(): number {
    return this.#maxBytes;
  }

  /** The most ops one patch may hold. */
  get maxPatchOps(): number {
    return this.#maxPatchOps;
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
  async mint(kind: string, state: JsonObject, options: MintOptions): Promise<string> {
    const user = checkUser(options);
    if (typeof kind !== "string" || !KIND_RE.test(kind)) {
      throw new InvalidArgument(
        `The kind ${
          JSON.stringify(safeString(kind)).slice(0, 80)
        } is not valid: use 1-32 characters of lowercase letters, digits and "-", starting with a letter (e.g. "research").`,
        { field: "kind" },
      );
    }
    const ttl = checkTtl(options.ttlDays, true);
    const writer = checkWriter(options.writer);
    const chars = options.randomChars ?? 8;
    if (!Number.isInteger(chars) || chars < 8 || chars > 64) {
      throw new InvalidArgument("randomChars must be a whole number from 8 to 64.");
    }
    const rule = rulesIn(options)?.(kind);
    if (rule) state = await rule.check(state) as JsonObject;
    const text = encodeState(state, this.#maxBytes);
    const now = this.#clock();
    const lease = writeLease(options.lease, writer, now);
    const ctx = await this.#context(options.idempotencyKey, "", [
      "mint",
      kind,
      text,
      ttl ?? null,
      writer,
    ]);
    if (lease) ctx.lease = lease;
    if (this.#retention) {
      ctx.entry = this.#entry(1, now, writer, "mint", { patch: diffOf({}, state) });
      ctx.retention = this.#retention;
    }
    for (let attempt = 0; attempt < 8; attempt++) {
      const record: HandleRecord = {
        handle: `${kind}_${randomChars(chars)}`,
        kind,
        state: text,
        version: 1,
        createdAt: now,
        updatedAt: now,
        expiresAt: ttl == null ? null : now + ttl,
        lastWriter: writer,
        ...(rule ? { schemaVersion: rule.version } : {}),
        preview: previewOf(state),
      };
      const res = await this.#call(() => this.#backend.insert(user, record, ctx));
      if (isReplayed(res)) {
        const handle = this.#replayed(res, ctx).handle;
        await this.#leaseAfter(user, handle, ctx, undefined, true);
        return handle;
      }
      if (res.inserted) {
        await this.#leaseAfter(user, record.handle, ctx, res.lease, false);
        return record.handle;
      }
    }
    throw new BackendError("Could not mint a unique handle after 8 attempts; try again.");
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
  async get<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>> {
    const shared = this.#shared(handle, options, "read", (h, o) => this.get<S>(h, o), asAlias);
    if (shared) return shared;
    const user = checkUser(options);
    checkHandle(handle);
    const now = this.#clock();
    const b = this.#backend;
    let r: HandleRecord | null, leases: Map<string, LeaseRecord> | undefined;
    if (b.readLeased) {
      const { record, lease } = await this.#call(() => b.readLeased!(user, handle, now));
      r = record;
      if (lease) leases = new Map([[handle, lease]]);
    } else {
      [r, leases] = await this.#call(() =>
        Promise.all([b.read(user, handle), this.#leasesOf(user, [handle], now)])
      );
    }
    if (!r) throw await this.#missing(user, handle, options);
    const snap = snapshotOf<S>(this.#live(r, handle, now));
    const rule = rulesIn(options)?.(snap.kind);
    if (rule) {
      let state = rule.upcast(snap.state as JsonObject, snap.schemaVersion ?? 1);
      if (rule.checkOnRead) state = await rule.check(state) as JsonObject;
      snap.state = state as S;
    }
    return withLease(snap, leases);
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
  async read<S = JsonObject>(handle: string, options: ReadOptions): Promise<ReadResult<S>> {
    const user = checkUser(options);
    checkHandle(handle);
    const { maxBytes, paths } = options;
    checkReadArgs(maxBytes, paths);
    const { state, ...info } = await this.get<S>(handle, withRules({ user }, rulesIn(options)));
    if (paths !== undefined) return { ...info, ...readPaths(state, paths, maxBytes) };
    if (maxBytes === undefined) {
      return { ...info, state, truncated: false, sizeBytes: jsonSize(state) };
    }
    const b = outline(state, maxBytes);
    return b.truncated
      ? { ...info, outline: b.outline, truncated: true, sizeBytes: b.sizeBytes }
      : { ...info, state, truncated: false, sizeBytes: b.sizeBytes };
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
  async save<S extends JsonObject = JsonObject>(
    handle: string,
    state: S,
    options: SaveOptions,
  ): Promise<SaveResult<S>> {
    const shared = this.#shared(
      handle,
      options,
      "write",
      (h, o) => this.save<S>(h, state, o),
      asAlias,
    );
    if (shared) return shared;
    const user = checkUser(options);
    checkHandle(handle);
    const expect = options.expectVersion;
    if (typeof expect !== "number" || !Number.isSafeInteger(expect) || expect < 0) {
      throw new InvalidArgument(
        "expectVersion must be the whole version number you read (from get or state_load).",
        { field: "expect_version" },
      );
    }
    const merge = checkOnConflict(options.onConflict) === "merge";
    const ttl = checkTtl(options.ttlDays, true);
    const writer = checkWriter(options.writer);
    // A handle's kind is its prefix: the rule is known before the record is read.
    const rule = rulesIn(options)?.(kindOfHandle(handle));
    if (rule) state = await rule.check(state) as S;
    const stamp = rule ? { schemaVersion: rule.version } : {};
    const text = encodeState(state, this.#maxBytes);
    const now = this.#clock();
    const lease = writeLease(options.lease, writer, now);
    const via = viaIn(options);
    const ctx = await this.#context(options.idempotencyKey, via?.alias ?? handle, [
      "save",
      text,
      expect,
      ttl === undefined ? "keep" : ttl,
      writer,
      // A merging save is another call than a failing one (the fingerprint of a failing one is unchanged).
      ...(merge ? ["merge"] : []),
    ]);
    if (lease) ctx.lease = lease;
    if (via) ctx.grant = { grant: via.grant, alias: via.alias };
    const expiresAt = (cur: HandleRecord) =>
      ttl === undefined ? cur.expiresAt : ttl === null ? null : now + ttl;
    if (this.#retention) {
      // With history the write needs the previous state for its diff: one
      // read-modify-write step that also checks the version.
      ctx.retention = this.#retention;
      // A merging save reads the changelog since expectVersion, then merges inside the step.
      let log: EntryInfo[] | undefined;
      let merged: { version: number; state: JsonObject } | undefined;
      // The version the write follows: `expect`, or past entries that changed no state (a share).
      let base = expect;
      for (let attempt = 1;; attempt++) {
        const res = await this.#callOn(
          user,
          handle,
          () =>
            this.#update(user, handle, (cur) => {
              const live = this.#live(cur, handle, now);
              const head = { updatedAt: now, expiresAt: expiresAt(live), lastWriter: writer };
              if (live.version !== base) {
                if (log === undefined || live.version < expect) throw new StaleVersion(live);
                const step = this.#mergeStep(live, expect, log, state, head, rule);
                merged = { version: step.record.version, state: step.state };
                return step;
              }
              const version = live.version + 1;
              const before = decodeState(live.state);
              const patch = diffOf(before, state);
              return {
                record: {
                  ...live,
                  state: text,
                  version,
                  updatedAt: now,
                  expiresAt: expiresAt(live),
                  lastWriter: writer,
                  ...stamp,
                  preview: previewOf(state),
                },
                entry: this.#entry(version, now, writer, "save", withUndo(before, patch)),
              };
            }, ctx),
          options,
        ).catch((e) => {
          if (e instanceof StaleVersion) return e;
          throw e;
        });
        if (res instanceof StaleVersion) {
          const current = res.current;
          if (
            res.refusal === undefined && merge && current.version > expect &&
            attempt < MERGE_ATTEMPTS
          ) {
            // Read (again) what was written since the caller's version, and merge with it.
            log = await this.#entries(user, handle, expect);
            continue;
          }
          if (
            res.refusal === undefined && !merge && current.version > base &&
            attempt < MERGE_ATTEMPTS &&
            await this.#stateUnchanged(user, handle, base, current.version)
          ) {
            base = current.version;
            continue;
          }
          throw await this.#stale(user, handle, expect, current, res.refusal);
        }
        if (isReplayed(res)) {
          const snap = snapshotOf<S>(this.#replayed(res, ctx));
          await this.#leaseAfter(user, handle, ctx, undefined, true, snap);
          // A merged save lands past expectVersion + 1; a plain one exactly on it.
          return snap.version > expect + 1 ? { ...snap, merged: true, baseVersion: expect } : snap;
        }
        const info = infoOf(this.#live(res.record, handle, now));
        await this.#leaseAfter(user, handle, ctx, res.lease, false, info);
        if (merged?.version !== info.version) return { ...info, state };
        return { ...info, state: merged.state as S, merged: true, baseVersion: expect };
      }
    }
    const res = await this.#call(() =>
      this.#backend.save(user, handle, {
        expectVersion: expect,
        state: text,
        updatedAt: now,
        expiresAt: ttl === undefined ? "keep" : ttl === null ? null : now + ttl,
        lastWriter: writer,
        ...stamp,
        preview: previewOf(state),
      }, ctx)
    );
    if (isReplayed(res)) {
      const snap = snapshotOf<S>(this.#replayed(res, ctx));
      await this.#leaseAfter(user, handle, ctx, undefined, true, snap);
      return snap;
    }
    if (res.ok) {
      const info = infoOf(res.record);
      await this.#leaseAfter(user, handle, ctx, res.lease, false, info);
      // `state` was just validated and encoded: return it instead of parsing the text back.
      return { ...info, state };
    }
    if (!res.current) throw await this.#missing(user, handle, options);
    const current = this.#live(res.current, handle, now);
    // Without a changelog there is no way back to the caller's version: nothing to merge with.
    throw await this.#stale(user, handle, expect, current, merge ? UNAVAILABLE : undefined);
  }

  /**
   * Whether every entry `after < version <= upTo` left the state as it was
   * (`share`, `unshare`, `transfer`): a save behind only those is not stale.
   */
  async #stateUnchanged(user: string, handle: string, after: number, upTo: number) {
    const log = await this.#log(user, handle, after, upTo);
    return log !== null && log.length === upTo - after &&
      log.every((e) => EVENT_OPS.has(e.op));
  }

  /**
   * The step of a merging save whose `expect` is behind `live`: the state at
   * `expect` is rebuilt from the changelog `log`, and the caller's changes
   * since it are applied to `live` when they are disjoint from everyone
   * else's (see `merge.ts`). Throws a {@link StaleVersion} when the log does
   * not yet reach `live` (read it again), or one with the refusal to report.
   */
  #mergeStep(
    live: HandleRecord,
    expect: number,
    log: EntryInfo[],
    mine: JsonObject,
    head: Pick<HandleRecord, "updatedAt" | "expiresAt" | "lastWriter">,
    rule: KindRule | undefined,
    label?: { from: ForkPoint },
  ): Step & { record: HandleRecord; state: JsonObject } {
    if (live.version > (log[log.length - 1]?.version ?? expect)) throw new StaleVersion(live);
    let theirs = decodeState(live.state);
    let base = rewind(theirs, live.version, expect, log);
    if (base === null) throw new StaleVersion(live, UNAVAILABLE);
    if (rule) {
      // The caller wrote the current schema version: compare like with like.
      const from = live.schemaVersion ?? 1;
      theirs = rule.upcast(theirs, from);
      base = rule.upcast(base, from);
    }
    const out = mergeStates(base, theirs, mine);
    if (!out.ok) throw new StaleVersion(live, { conflicts: out.conflicts });
    // A merge of two valid states can still break the schema (a rule across keys).
    const state = rule ? checkNow(rule, out.state) : out.state;
    const text = rule ? encodeState(state, this.#maxBytes) : encodeParsed(state, this.#maxBytes);
    const version = live.version + 1;
    const what = label
      ? { ...label, base_version: expect, patch: out.patch, undo: out.undo }
      : { merged_from: expect, patch: out.patch, undo: out.undo };
    return {
      record: {
        ...live,
        ...head,
        state: text,
        version,
        ...(rule ? { schemaVersion: rule.version } : {}),
        preview: previewOf(state),
      },
      entry: this.#entry(version, head.updatedAt, head.lastWriter, label ? "merge" : "save", what),
      state,
    };
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
  async patch<S = JsonObject>(
    handle: string,
    ops: readonly PatchOp[],
    options: PatchOptions,
  ): Promise<Snapshot<S>> {
    const shared = this.#shared(
      handle,
      options,
      () => rightsForOps(opsFromJson(ops, { maxOps: this.#maxPatchOps })),
      (h, o) => this.patch<S>(h, ops, o),
      asAlias,
    );
    if (shared) return shared;
    const user = checkUser(options);
    checkHandle(handle);
    const parsed = opsFromJson(ops, { maxOps: this.#maxPatchOps });
    for (const op of parsed) {
      for (const field of ["value", "mapping"] as const) {
        if (field in op) {
          // With the size cap, a value built from shared subtrees is refused
          // before it is walked exponentially: no value over the cap can land.
          const value = (op as unknown as Record<string, unknown>)[field];
          assertJson(value, field, false, this.#maxBytes);
        }
      }
    }
    const writer = checkWriter(options.writer);
    const now = this.#clock();
    const lease = writeLease(options.lease, writer, now);
    const via = viaIn(options);
    const ctx = await this.#context(options.idempotencyKey, via?.alias ?? handle, [
      "patch",
      parsed,
      writer,
    ]);
    if (this.#retention) ctx.retention = this.#retention;
    if (lease) ctx.lease = lease;
    if (via) ctx.grant = { grant: via.grant, alias: via.alias };
    const rules = rulesIn(options);
    const res = await this.#callOn(user, handle, () =>
      this.#update(user, handle, (cur) => {
        const live = this.#live(cur, handle, now);
        const rule = rules?.(live.kind);
        let applied: JsonObject, undo: JsonPatchOp[], next: string;
        if (rule) {
          // Ops apply to the state as the kind's current version reads it, and
          // the result must pass its schema before anything is written.
          const base = rule.upcast(decodeState(live.state), live.schemaVersion ?? 1);
          ({ state: applied, undo } = applyOpsWithUndo(base, parsed));
          applied = checkNow(rule, applied) as JsonObject;
          next = encodeState(applied, this.#maxBytes);
          if (next === live.state && live.schemaVersion === rule.version) return null;
        } else {
          // The stored state is JSON and every op value was checked above: only
          // the size and the depth of the result remain to check.
          ({ state: applied, undo } = applyOpsWithUndo(decodeState(live.state), parsed));
          next = encodeParsed(applied, this.#maxBytes);
          if (next === live.state) return null;
        }
        return this.#step(
          {
            ...live,
            state: next,
            version: live.version + 1,
            updatedAt: now,
            lastWriter: writer,
            ...(rule ? { schemaVersion: rule.version } : {}),
            preview: previewOf(applied),
          },
          "patch",
          { ops: parsed, undo },
        );
      }, ctx), options);
    return await this.#written<S>(user, handle, res, ctx, now);
  }

  /**
   * Renews (or clears) a handle's expiry from now; counts as a write.
   *
   * @param handle The handle.
   * @param options The user, the new TTL (`null`: never), writer.
   * @returns The snapshot after the touch.
   */
  async touch<S = JsonObject>(handle: string, options: TouchOptions): Promise<Snapshot<S>> {
    const shared = this.#shared(handle, options, "write", (h, o) => this.touch<S>(h, o), asAlias);
    if (shared) return shared;
    const user = checkUser(options);
    checkHandle(handle);
    if (options.ttlDays === undefined) {
      throw new InvalidArgument("touch needs ttlDays: a number of days, or null for never.", {
        field: "ttl_days",
      });
    }
    const ttl = checkTtl(options.ttlDays, true);
    const writer = checkWriter(options.writer);
    const now = this.#clock();
    const lease = writeLease(options.lease, writer, now);
    const via = viaIn(options);
    const ctx = await this.#context(options.idempotencyKey, via?.alias ?? handle, [
      "touch",
      ttl,
      writer,
    ]);
    if (this.#retention) ctx.retention = this.#retention;
    if (lease) ctx.lease = lease;
    if (via) ctx.grant = { grant: via.grant, alias: via.alias };
    const expiresAt = ttl == null ? null : now + ttl;
    const res = await this.#callOn(user, handle, () =>
      this.#update(user, handle, (cur) => {
        const live = this.#live(cur, handle, now);
        return this.#step(
          { ...live, version: live.version + 1, updatedAt: now, expiresAt, lastWriter: writer },
          "touch",
          { expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString() },
        );
      }, ctx), options);
    return await this.#written<S>(user, handle, res, ctx, now);
  }

  /**
   * Lists a user's handles (metadata only), newest `updatedAt` first.
   *
   * @param user The user.
   * @param options Kind filter; whether to include expired handles.
   * @returns Every matching handle.
   */
  async list(user: string, options: ListOptions = {}): Promise<HandleInfo[]> {
    checkOptions(options, "list");
    const all: HandleInfo[] = [];
    let cursor: string | null = null;
    do {
      const page: HandlePage = await this.listPage(user, { ...options, limit: 500, cursor });
      all.push(...page.handles);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return all;
  }

  /**
   * Lists one page of a user's handles.
   *
   * @param user The user.
   * @param options Kind filter, expired handles, page size, cursor.
   * @returns The page and the cursor of the next one.
   */
  async listPage(user: string, options: ListPageOptions = {}): Promise<HandlePage> {
    checkUser({ user });
    checkOptions(options, "listPage");
    const limit = options.limit ?? 50;
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 500) {
      throw new InvalidArgument("limit must be a whole number from 1 to 500.", { field: "limit" });
    }
    const kind = options.kind;
    if (kind !== undefined && (typeof kind !== "string" || !KIND_RE.test(kind))) {
      throw new InvalidArgument('kind must be a valid kind such as "research".', {
        field: "kind",
      });
    }
    const after = options.cursor == null ? undefined : decodeCursor(options.cursor);
    const maxBytes = options.maxBytes;
    if (maxBytes !== undefined && (!Number.isSafeInteger(maxBytes) || maxBytes < 1)) {
      throw new InvalidArgument("maxBytes must be a whole number of bytes, at least 1.", {
        field: "max_bytes",
      });
    }
    const rows: HandleMeta[] = await this.#call(() =>
      this.#backend.list(user, {
        limit: limit + 1,
        ...(kind === undefined ? {} : { kind }),
        ...(options.includeExpired ? {} : { liveAt: this.#clock() }),
        ...(after ? { after } : {}),
        ...(options.previews ? { previews: true } : {}),
      })
    );
    const shared = await this.#sharedRows(user, kind, !options.includeExpired, after);
    if (shared.size > 0) {
      rows.push(...shared.keys());
      rows.sort(compareListed);
      rows.length = Math.min(rows.length, limit + 1);
    }
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    const last = page[page.length - 1];
    const leases = page.length === 0
      ? undefined
      : await this.#call(() => this.#leasesOf(user, page.map((r) => r.handle), this.#clock()));
    // A listing never shows a schema version: SQL engines list from an index without it.
    const handles = page.map((r) => {
      const g = shared.get(r);
      if (g) return asAlias(infoOf(r, false), g);
      const info = options.previews && r.preview !== undefined
        ? { ...infoOf(r, false), preview: r.preview }
        : infoOf(r, false);
      return withLease(info, leases);
    });
    const kept = maxBytes === undefined ? handles.length : fitPage(handles, more, maxBytes);
    if (kept < handles.length) {
      return { handles: handles.slice(0, kept), nextCursor: encodeCursor(page[kept - 1]!) };
    }
    return { handles, nextCursor: more && last ? encodeCursor(last) : null };
  }

  /**
   * The handles shared with `user` by name (grants in force), as listing
   * rows named by their alias, after the cursor `after`: one read of each
   * owner's record (a grantee holds few).
   */
  async #sharedRows(
    user: string,
    kind: string | undefined,
    liveOnly: boolean,
    after: { updatedAt: number; handle: string } | undefined,
  ): Promise<Map<HandleMeta, GrantRecord>> {
    const out = new Map<HandleMeta, GrantRecord>();
    const b = this.#grantBackend();
    if (!b) return out;
    const now = this.#clock();
    const grants = (await this.#call(() => b.grantsTo(user))).filter((g) =>
      grantGone(g, now) === null
    );
    const records = await Promise.all(
      grants.map((g) => this.#call(() => b.read(g.owner, g.handle))),
    );
    grants.forEach((g, i) => {
      const r = records[i];
      if (!r || (kind !== undefined && r.kind !== kind)) return;
      if (liveOnly && r.expiresAt !== null && r.expiresAt <= now) return;
      const meta = { ...metaOf(r), handle: g.alias };
      if (after && compareListed(meta, after) <= 0) return;
      out.set(meta, g);
    });
    return out;
  }

  /**
   * Deletes a handle. An expired handle is deleted as well.
   *
   * @param handle The handle.
   * @param options The user, idempotency key.
   */
  async revoke(handle: string, options: RevokeOptions): Promise<void> {
    const shared = this.#shared(handle, options, "owner", (h, o) => this.revoke(h, o), () => {});
    if (shared) return shared;
    const user = checkUser(options);
    checkHandle(handle);
    const ctx = await this.#context(options.idempotencyKey, handle, ["revoke"]);
    if (this.#trashMs > 0) ctx.trashUntil = ctx.now + this.#trashMs;
    const res = await this.#call(() => this.#backend.remove(user, handle, ctx));
    if (isReplayed(res)) {
      this.#checkFingerprint(res, ctx);
      return;
    }
    if (!res.removed) throw await this.#missing(user, handle, options);
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
  async restore<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>> {
    const user = checkUser(options);
    checkHandle(handle);
    const now = this.#clock();
    const ctx: WriteContext = { now, graceMs: this.#graceMs };
    if (this.#quotas) ctx.quota = this.#quotas;
    const r = await this.#call(() => this.#backend.untrash(user, handle, ctx));
    if (!r) throw new HandleNotFound(handle);
    return snapshotOf<S>(r);
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
  async trash(user: string, options: TrashOptions = {}): Promise<TrashPage> {
    checkUser({ user });
    checkOptions(options, "trash");
    const limit = options.limit ?? 50;
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 500) {
      throw new InvalidArgument("limit must be a whole number from 1 to 500.", { field: "limit" });
    }
    const listTrash = this.#backend.listTrash?.bind(this.#backend);
    if (!listTrash) throw unsupported("list its trash");
    let after: { trashUntil: number; handle: string } | undefined;
    const c = options.cursor;
    if (c != null) {
      let at: { updatedAt: number; handle: string } | undefined;
      try {
        // A trash cursor is "t" and a list cursor of its position.
        if (typeof c === "string" && c.startsWith("t")) at = decodeCursor(c.slice(1));
      } catch { /* refused below */ }
      if (!at) {
        throw new InvalidArgument(
          "This cursor did not come from this store's trash(). Pass back nextCursor exactly as you got it, or omit it to start from the first page.",
          { field: "cursor" },
        );
      }
      after = { trashUntil: at.updatedAt, handle: at.handle };
    }
    const rows = await this.#call(() =>
      listTrash(user, { limit: limit + 1, ...(after ? { after } : {}) })
    );
    // Past-window records sort last: the page ends at the first one.
    const now = this.#clock();
    const open = rows.findIndex((r) => r.trashUntil <= now);
    const live = open < 0 ? rows : rows.slice(0, open);
    const more = live.length > limit;
    const page = more ? live.slice(0, limit) : live;
    const last = page[page.length - 1];
    return {
      handles: page.map((r) => ({
        ...infoOf(r, false),
        restorableUntil: new Date(r.trashUntil),
      })),
      nextCursor: more && last
        ? "t" + encodeCursor({ updatedAt: last.trashUntil, handle: last.handle })
        : null,
    };
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
  async changesSince<S = JsonObject>(
    handle: string,
    version: number,
    options: UserOption,
  ): Promise<ChangesSince<S>> {
    const shared = this.#shared(
      handle,
      options,
      "read",
      (h, o) => this.changesSince<S>(h, version, o),
      (r: ChangesSince<S>, g) => r.truncated ? { ...r, current: asAlias(r.current, g) } : r,
    );
    if (shared) return shared;
    const user = checkUser(options);
    checkHandle(handle);
    checkVersion(version, "since_version", 0);
    const current = await this.#notBehind(user, handle, version, "since_version");
    const changes = await this.#log(user, handle, version, current.version);
    if (changes) return { truncated: false, changes, version: current.version };
    return { truncated: true, current: snapshotOf<S>(current) };
  }

  /** The live record, when it is at `version` or later; `field` names `version` in the error. */
  async #notBehind(
    user: string,
    handle: string,
    version: number,
    field: string,
  ): Promise<HandleRecord> {
    const r = await this.#call(() => this.#backend.read(user, handle));
    if (!r) throw await this.#missing(user, handle);
    const current = this.#live(r, handle, this.#clock());
    if (version > current.version) {
      throw new InvalidArgument(
        `Handle "${handle}" is at version ${current.version}; ${field} ${version} is ahead of it. Pass a version you have seen.`,
        { field, version: current.version },
      );
    }
    return current;
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
  async stateAt<S = JsonObject>(
    handle: string,
    version: number,
    options: UserOption,
  ): Promise<StateAt<S>> {
    const user = checkUser(options);
    checkHandle(handle);
    checkVersion(version, "version", 1);
    for (let attempt = 0;; attempt++) {
      const current = await this.#notBehind(user, handle, version, "version");
      const state = decodeState<JsonObject>(current.state);
      const head = { handle, kind: current.kind, version };
      if (version === current.version) return { ...head, state: state as S };
      const entries = this.#retention ? await this.#entries(user, handle, version) : [];
      const past = rewind(state, current.version, version, entries);
      if (past !== null) return { ...head, state: past as S };
      // A write between the two reads moved the record past the entries read: read again.
      const last = entries[entries.length - 1]?.version ?? 0;
      if (last > current.version && attempt < 3) continue;
      throw new InvalidArgument(
        `The state of "${handle}" at version ${version} is no longer in its retained history (it is at version ${current.version}).`,
        { field: "version", reason: "history_unavailable", version: current.version },
      );
    }
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
  async lease(handle: string, options: LeaseOptions): Promise<LeaseResult> {
    const user = checkUser(options);
    checkHandle(handle);
    const holder = checkHolder(options.writer);
    const seconds = checkLeaseSeconds(options.seconds);
    const acquire = this.#backend.acquireLease?.bind(this.#backend);
    if (!acquire) throw noLeases();
    const now = this.#clock();
    const r = await this.#call(() => this.#backend.read(user, handle));
    if (!r) throw await this.#missing(user, handle);
    this.#live(r, handle, now);
    const expiresAt = now + Math.max(1, Math.round(seconds * 1000));
    const res = await this.#call(() => acquire(user, handle, { holder, expiresAt }, now));
    return {
      acquired: res.acquired,
      holder: res.lease.holder,
      expiresAt: new Date(res.lease.expiresAt),
    };
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
  async release(handle: string, options: ReleaseOptions): Promise<boolean> {
    const user = checkUser(options);
    checkHandle(handle);
    const holder = checkHolder(options.writer);
    const release = this.#backend.releaseLease?.bind(this.#backend);
    if (!release) throw noLeases();
    return await this.#call(() => release(user, handle, holder, this.#clock()));
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
    const user = checkUser(options);
    checkHandle(handle);
    const signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidArgument("signal must be an AbortSignal.", { field: "signal" });
    }
    const pollMs = options.pollMs ?? 5_000;
    if (typeof pollMs !== "number" || !(pollMs >= 10 && pollMs <= MAX_TIMER_MS)) {
      throw new InvalidArgument(`pollMs must be a number of ms from 10 to ${MAX_TIMER_MS}.`, {
        field: "pollMs",
      });
    }
    return this.#watch<S>(user, handle, signal, pollMs);
  }

  async *#watch<S>(
    user: string,
    handle: string,
    signal: AbortSignal | undefined,
    pollMs: number,
  ): AsyncGenerator<Snapshot<S>> {
    if (this.#closed) throw new BackendError("The store is closed; open a new one.");
    let dirty = true;
    let wake = Promise.withResolvers<void>();
    const poke = () => {
      dirty = true;
      wake.resolve();
    };
    const onAbort = () => wake.resolve();
    signal?.addEventListener("abort", onAbort);
    const unsubscribe = this.#backend.subscribe
      ? await this.#call(() => this.#backend.subscribe!(user, handle, poke))
      : undefined;
    const timer = setInterval(poke, pollMs);
    Deno.unrefTimer(timer);
    try {
      let last = -1;
      while (!signal?.aborted) {
        if (dirty) {
          dirty = false;
          const snap = await this.get<S>(handle, { user });
          if (signal?.aborted) return;
          if (snap.version !== last) {
            last = snap.version;
            yield snap;
          }
          continue;
        }
        wake = Promise.withResolvers<void>();
        if (dirty || signal?.aborted) continue;
        await wake.promise;
      }
    } finally {
      clearInterval(timer);
      signal?.removeEventListener("abort", onAbort);
      unsubscribe?.();
    }
  }

  /** The active leases of `handles` (empty when the backend keeps none). */
  async #leasesOf(
    user: string,
    handles: readonly string[],
    now: number,
  ): Promise<Map<string, LeaseRecord> | undefined> {
    return await this.#backend.leases?.(user, handles, now);
  }

  /**
   * Removes every expired record now, grace period or not.
   *
   * @param user Only this user's; every user's when absent.
   * @returns How many records were removed.
   */
  async sweep(user?: string): Promise<number> {
    if (user !== undefined) checkUser({ user });
    const now = this.#clock();
    return await this.#call(() => this.#backend.sweep(user ?? null, now, now));
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
    return info.expiresAt !== null && info.expiresAt.getTime() <= this.#clock();
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
  async users(options: UsersOptions = {}): Promise<string[]> {
    checkOptions(options, "users");
    const limit = options.limit ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
      throw new InvalidArgument("limit must be a whole number from 1 to 10000.", {
        field: "limit",
      });
    }
    const after = options.after;
    if (after !== undefined && typeof after !== "string") {
      throw new InvalidArgument("after must be a user of the previous page.", { field: "after" });
    }
    const listUsers = this.#backend.listUsers?.bind(this.#backend);
    if (!listUsers) throw unsupported("list its users");
    return await this.#call(() => listUsers({ limit, ...(after === undefined ? {} : { after }) }));
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
    checkListedUser(user);
    return this.#exportRecords(user);
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
  async countRecords(user: string): Promise<number> {
    checkListedUser(user);
    let n = 0;
    await this.#walk(user, () => {
      n++;
    });
    return n;
  }

  async *#exportRecords(user: string): AsyncGenerator<HandleRecord> {
    const start = this.#clock();
    const seen = new Set<string>();
    await this.#walk(user, (m) => {
      seen.add(m.handle);
    });
    // A handle written while the listing ran moved ahead of its cursor (the
    // order follows updatedAt): a second pass over the newest catches it.
    const since = start - EXPORT_CATCH_UP_MS;
    await this.#walk(user, (m) => {
      if (m.updatedAt < since) return false;
      seen.add(m.handle);
      return true;
    });
    const handles = [...seen].sort(compareCodeUnits);
    for (let i = 0; i < handles.length; i += EXPORT_READS) {
      const chunk = handles.slice(i, i + EXPORT_READS);
      const records = await this.#call(() =>
        Promise.all(chunk.map((h) => this.#backend.read(user, h)))
      );
      for (const record of records) if (record) yield withoutPreview(record);
    }
  }

  /** Lists a user's metadata, newest first, expired included, until `visit` answers `false`. */
  async #walk(user: string, visit: (m: HandleMeta) => boolean | void): Promise<void> {
    let after: { updatedAt: number; handle: string } | undefined;
    for (;;) {
      const page = await this.#call(() =>
        this.#backend.list(user, { limit: WALK_PAGE, ...(after ? { after } : {}) })
      );
      for (const m of page) if (visit(m) === false) return;
      const last = page[page.length - 1];
      if (page.length < WALK_PAGE || !last) return;
      after = { updatedAt: last.updatedAt, handle: last.handle };
    }
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
    checkRecordTimes(record);
    checkRecordRest(user, record, this.#maxBytes);
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
  async importRecord(
    user: string,
    record: HandleRecord,
    options: ImportRecordOptions = {},
  ): Promise<ImportResult> {
    checkOptions(options, "importRecord");
    checkRecordTimes(record);
    const now = this.#clock();
    // Nothing of a record past its grace is kept, whatever else it holds.
    if (record.expiresAt !== null && record.expiresAt + this.#graceMs <= now) {
      return { outcome: "expired" };
    }
    checkRecordRest(user, record, this.#maxBytes);
    const clean: HandleRecord = {
      handle: record.handle,
      kind: record.kind,
      state: record.state,
      version: record.version,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
      expiresAt: record.expiresAt,
      lastWriter: record.lastWriter,
      ...(record.schemaVersion == null ? {} : { schemaVersion: record.schemaVersion }),
      ...(record.forkedFrom == null
        ? {}
        : { forkedFrom: { handle: record.forkedFrom.handle, version: record.forkedFrom.version } }),
      // checkRecordRest checked that the state is a JSON object.
      preview: previewOf(decodeState(record.state)),
    };
    const read = async () =>
      withoutPreview(await this.#call(() => this.#backend.read(user, clean.handle)));
    if (options.dryRun) {
      const current = await read();
      const outcome = current === null
        ? "inserted"
        : current.version < clean.version
        ? "replaced"
        : "kept";
      return { outcome, current };
    }
    const write = this.#importer();
    if (!write) throw unsupported("import records");
    const outcome = await this.#call(() => write(user, clean, { now, graceMs: this.#graceMs }));
    return { outcome, current: await read() };
  }

  /** The backend's import primitive, bound, or `undefined` when it has none. */
  #importer(): Backend["importRecord"] {
    return this.#backend.importRecord?.bind(this.#backend);
  }

  /**
   * The quotas this store enforces (`undefined`: none).
   *
   * @since 0.5.0
   */
  get quotas(): QuotaOptions | undefined {
    return this.#quotas && { ...this.#quotas };
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
  async usage(user: string): Promise<UsageInfo> {
    checkUser({ user });
    const b = this.#backend;
    if (!b.usage) throw unsupported("report usage");
    const now = this.#clock();
    return await this.#call(() => b.usage!(user, now));
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
  async fork(handle: string, options: ForkOptions): Promise<string> {
    const user = checkUser(options);
    checkHandle(handle);
    const writer = checkWriter(options.writer);
    const now = this.#clock();
    const origin = this.#live(
      await this.#call(() => this.#backend.read(user, handle)),
      handle,
      now,
    );
    const ctx = await this.#context(undefined, "", []);
    const from: ForkPoint = { handle, version: origin.version };
    if (this.#retention) {
      const what = { from, patch: diffOf({}, decodeState(origin.state)) };
      ctx.entry = this.#entry(1, now, writer, "fork", what);
      ctx.retention = this.#retention;
    }
    // As many random characters as the origin has: a 128-bit handle forks into one.
    const chars = Math.max(8, handle.length - origin.kind.length - 1);
    for (let attempt = 0; attempt < 8; attempt++) {
      const record: HandleRecord = {
        handle: `${origin.kind}_${randomChars(chars)}`,
        kind: origin.kind,
        state: origin.state,
        version: 1,
        createdAt: now,
        updatedAt: now,
        expiresAt: origin.expiresAt,
        lastWriter: writer,
        ...(origin.schemaVersion == null ? {} : { schemaVersion: origin.schemaVersion }),
        forkedFrom: from,
        preview: origin.preview ?? previewOf(decodeState(origin.state)),
      };
      const res = await this.#call(() => this.#backend.insert(user, record, ctx));
      if (!isReplayed(res) && res.inserted) return record.handle;
    }
    throw new BackendError("Could not mint a unique handle after 8 attempts; try again.");
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
  async mergeBack<S = JsonObject>(fork: string, options: ForkOptions): Promise<MergeResult<S>> {
    const user = checkUser(options);
    checkHandle(fork);
    const writer = checkWriter(options.writer);
    const now = this.#clock();
    const f = this.#live(await this.#call(() => this.#backend.read(user, fork)), fork, now);
    const point = f.forkedFrom;
    if (point == null) {
      throw new InvalidArgument(
        `The handle ${fork} is not a fork: only a handle made by state_fork can be merged back.`,
        { field: "handle" },
      );
    }
    const origin = point.handle;
    const mine = decodeState(f.state);
    const label = { from: { handle: fork, version: f.version } };
    const ctx = await this.#context(undefined, origin, []);
    if (this.#retention) ctx.retention = this.#retention;
    let log: EntryInfo[] | undefined;
    let merged: JsonObject | undefined;
    for (let attempt = 1;; attempt++) {
      const res = await this.#call(() =>
        this.#backend.update(user, origin, (cur) => {
          const live = this.#live(cur, origin, now);
          const head = { updatedAt: now, expiresAt: live.expiresAt, lastWriter: writer };
          if (live.version !== point.version) {
            if (log === undefined || live.version < point.version) throw new StaleVersion(live);
            const step = this.#mergeStep(live, point.version, log, mine, head, undefined, label);
            merged = step.state;
            return step;
          }
          // Nobody wrote the origin since the fork: the fork's state is the result.
          const before = decodeState(live.state);
          const version = live.version + 1;
          const record: HandleRecord = {
            ...live,
            ...head,
            state: f.state,
            version,
            ...(f.schemaVersion == null ? {} : { schemaVersion: f.schemaVersion }),
            preview: previewOf(mine),
          };
          merged = mine;
          const what = {
            ...label,
            base_version: point.version,
            ...withUndo(before, diffOf(before, mine)),
          };
          return this.#retention
            ? { record, entry: this.#entry(version, now, writer, "merge", what) }
            : { record };
        }, ctx)
      ).catch((e) => {
        if (e instanceof StaleVersion) return e;
        throw e;
      });
      if (res instanceof StaleVersion) {
        const current = res.current;
        if (res.refusal !== undefined) {
          throw await this.#stale(user, origin, point.version, current, res.refusal);
        }
        if (this.#retention && current.version > point.version && attempt < MERGE_ATTEMPTS) {
          log = await this.#entries(user, origin, point.version);
          continue;
        }
        const refusal = current.version > point.version ? UNAVAILABLE : undefined;
        throw await this.#stale(user, origin, point.version, current, refusal);
      }
      if (isReplayed(res)) throw new BackendError("A merge was answered as a replay; try again.");
      const info = infoOf(this.#live(res.record, origin, now));
      const state = (merged ?? decodeState(res.record!.state)) as S;
      return { ...info, state, mergedFrom: label.from };
    }
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
  async transfer(handle: string, options: TransferOptions): Promise<string> {
    const user = checkUser(options);
    checkHandle(handle);
    const to = checkUser({ user: (options as { to?: unknown }).to }, "to");
    if (to === user) {
      throw new InvalidArgument("to is the handle's owner already: name another user.", {
        field: "to",
      });
    }
    const keep = options.keep === undefined ? undefined : checkRights(options.keep, "keep");
    if (typeof this.#backend.transfer !== "function") {
      throw new InvalidArgument(
        "transfer needs a backend that moves a record between users in one atomic step; this one cannot.",
      );
    }
    if (keep !== undefined) this.#needGrants();
    const now = this.#clock();
    const record = this.#live(
      await this.#call(() => this.#backend.read(user, handle)),
      handle,
      now,
    );
    const ctx = await this.#context(undefined, handle, []);
    const kept: GrantRecord | undefined = keep === undefined ? undefined : {
      grant: `grant_${random130()}`,
      alias: `${record.kind}_${random130()}`,
      owner: to,
      handle,
      to: user,
      rights: keep,
      by: to,
      parent: null,
      createdAt: now,
      expiresAt: null,
      endedAt: null,
    };
    const audit = this.#auditStep(now, user, "transfer", {
      from: user,
      to,
      ...(keep === undefined ? {} : { keep }),
    });
    const res = await this.#call(() =>
      this.#backend.transfer!(user, handle, to, ctx, {
        ...(audit ? { audit } : {}),
        ...(kept ? { keep: kept } : {}),
      })
    );
    if (res === "absent") throw new HandleNotFound(handle);
    if (res === "taken") {
      throw new InvalidArgument(
        `The user ${
          JSON.stringify(to)
        } already has a handle named ${handle}; nothing was transferred.`,
        { field: "to" },
      );
    }
    return handle;
  }

  /**
   * The entry a grant change or a transfer leaves (SPEC 8.2), which the
   * backend numbers as the record's next version; `undefined` when the store
   * keeps no history.
   */
  #auditStep(
    now: number,
    writer: string,
    op: ChangeInfo["op"],
    what: Record<string, unknown>,
  ): AuditStep | undefined {
    if (!this.#retention) return undefined;
    const text = this.#entry(0, now, writer, op, what).text;
    return { at: now, tail: text.slice(AUDIT_HEAD.length), retention: this.#retention };
  }

  /** Closes the backend. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#backend.close();
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
  async share(handle: string, options: ShareOptions): Promise<Grant> {
    checkOptions(options, "share");
    const user = checkUser(options);
    checkHandle(handle);
    const rights = checkRights(options.rights);
    const to = checkGrantee(options.to, user);
    const ttl = checkTtl(options.ttlDays, false);
    const b = this.#needGrants();
    const now = this.#clock();
    let owner = user, target = handle, parent: GrantRecord | null = null;
    let record = await this.#call(() => b.read(user, handle));
    if (!record) {
      const g = await this.#alias(user, handle);
      if (!g) throw new HandleNotFound(handle);
      const reason = grantGone(g, now);
      if (reason) throw new GrantEnded(handle, reason);
      const held = g.rights as Rights;
      if (!covers(held, rights)) throw new PermissionDenied(held, rights, { handle });
      if (to === g.owner) {
        throw new InvalidArgument("The owner already has the handle: share it with someone else.", {
          field: "to",
        });
      }
      owner = g.owner;
      target = g.handle;
      parent = g;
      record = await this.#call(() => b.read(owner, target));
      if (!record) throw new HandleNotFound(handle);
    }
    const live = this.#live(record, handle, now);
    const expiresAt = ttl == null ? (parent?.expiresAt ?? null) : now + ttl;
    if (
      parent && parent.expiresAt !== null && (expiresAt === null || expiresAt > parent.expiresAt)
    ) {
      throw new PermissionDenied(parent.rights as Rights, "expires_at", {
        handle,
        expires_at: new Date(parent.expiresAt).toISOString(),
      });
    }
    const grant: GrantRecord = {
      grant: `grant_${random130()}`,
      alias: `${live.kind}_${random130()}`,
      owner,
      handle: target,
      to,
      rights,
      by: user,
      parent: parent?.grant ?? null,
      createdAt: now,
      expiresAt,
      endedAt: null,
    };
    const audit = this.#auditStep(now, user, "share", {
      grant: grant.grant,
      to,
      rights,
      expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
      ...(parent ? { via: parent.grant } : {}),
    });
    const res = await this.#call(() => b.putGrant(grant, now, audit)).catch((e) => {
      throw e instanceof GrantEnded ? new GrantEnded(handle, e.details.reason as never) : e;
    });
    if (res === "absent") throw new HandleNotFound(handle);
    return grantOf(grant);
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
  async unshare(grantOrAlias: string, options: UserOption): Promise<number> {
    const user = checkUser(options);
    checkHandle(grantOrAlias);
    const b = this.#needGrants();
    const g = await this.#call(() => b.readGrant(grantOrAlias));
    if (!g || (g.grant !== grantOrAlias && g.alias !== grantOrAlias)) {
      throw new HandleNotFound(grantOrAlias);
    }
    let allowed = g.owner === user || g.by === user;
    for (let p = g.parent; !allowed && p !== null;) {
      const up = await this.#call(() => b.readGrant(p!));
      if (!up) break;
      allowed = up.by === user;
      p = up.parent;
    }
    if (!allowed) {
      if (g.to === user || g.to === "*") {
        throw new PermissionDenied(g.rights as Rights, "owner", { handle: grantOrAlias });
      }
      throw new HandleNotFound(grantOrAlias);
    }
    if (g.endedAt !== null) return 0;
    const now = this.#clock();
    const audit = this.#auditStep(now, user, "unshare", { grant: g.grant });
    return (await this.#call(() => b.endGrant(g.grant, now, audit))).length;
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
  async grants(handle: string, options: UserOption): Promise<Grant[]> {
    const user = checkUser(options);
    checkHandle(handle);
    const b = this.#needGrants();
    const now = this.#clock();
    const own = await this.#call(() => b.read(user, handle));
    if (own) {
      this.#live(own, handle, now);
      const all = await this.#call(() => b.grantsOf(user, handle));
      return all.filter((g) => grantGone(g, now) === null).map(grantOf);
    }
    const mine = await this.#alias(user, handle);
    if (!mine) throw new HandleNotFound(handle);
    const reason = grantGone(mine, now);
    if (reason) throw new GrantEnded(handle, reason);
    const all = await this.#call(() => b.grantsOf(mine.owner, mine.handle));
    const under = new Set([mine.grant]);
    const out: Grant[] = [];
    for (const g of all) {
      if (g.parent === null || !under.has(g.parent)) continue;
      under.add(g.grant);
      if (grantGone(g, now) === null) out.push(grantOf(g));
    }
    return out;
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
  async exportGrants(user: string, handle: string): Promise<GrantRecord[]> {
    const b = this.#grantBackend();
    // A name the store would refuse (a record written from outside) has no grants: `share` checks.
    if (!b || !isIdentifier(user) || !isIdentifier(handle)) return [];
    const now = this.#clock();
    const all = await this.#call(() => b.grantsOf(user, handle));
    // Oldest first, and each re-share after the grant it re-shares (two
    // grants of one millisecond may come back in either order).
    const pending = all.filter((g) => grantGone(g, now) === null);
    const ids = new Set(pending.map((g) => g.grant));
    const placed = new Set<string>();
    const out: GrantRecord[] = [];
    while (pending.length > 0) {
      const i = pending.findIndex((g) =>
        g.parent === null || !ids.has(g.parent) || placed.has(g.parent)
      );
      const [g] = pending.splice(i < 0 ? 0 : i, 1);
      placed.add(g!.grant);
      out.push(g!);
    }
    return out;
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
  async importGrant(
    grant: GrantRecord,
    options: { dryRun?: boolean } = {},
  ): Promise<"inserted" | "identical" | "ended" | "missing"> {
    checkGrantRecord(grant);
    const b = this.#needGrants();
    const now = this.#clock();
    const same = (g: GrantRecord) => GRANT_KEYS.every((k) => g[k] === grant[k]);
    for (const id of [grant.grant, grant.alias]) {
      const held = await this.#call(() => b.readGrant(id));
      if (!held) continue;
      if (same(held)) return grantGone(held, now) === null ? "identical" : "ended";
      throw new InvalidArgument(
        `The target holds another grant under ${id}; this one was not imported.`,
        { field: id === grant.grant ? "grant" : "alias" },
      );
    }
    if (grantGone(grant, now) !== null) return "ended";
    const record = await this.#call(() => b.read(grant.owner, grant.handle));
    if (!record || options.dryRun) return "missing";
    const res = await this.#call(() => b.putGrant({ ...grant, endedAt: null }, now)).catch(
      (e) => {
        if (e instanceof GrantEnded) return "ended" as const;
        throw e;
      },
    );
    return res === "ended" ? "ended" : "inserted";
  }

  /** The backend when it keeps grants. */
  #grantBackend(): GrantBackend | undefined {
    const b = this.#backend;
    return b.putGrant && b.readGrant && b.endGrant && b.grantsOf && b.grantsTo
      ? b as GrantBackend
      : undefined;
  }

  #needGrants(): GrantBackend {
    const b = this.#grantBackend();
    if (!b) {
      throw new InvalidArgument("This backend keeps no grants: sharing is not available on it.", {
        field: "backend",
      });
    }
    return b;
  }

  /** The grant whose alias is `alias` and that `user` may use (ended ones too), or `null`. */
  async #alias(user: unknown, alias: string): Promise<GrantRecord | null> {
    const b = this.#grantBackend();
    if (!b || typeof user !== "string") return null;
    const g = await this.#call(() => b.readGrant(alias));
    if (!g || g.alias !== alias || (g.to !== "*" && g.to !== user)) return null;
    return g;
  }

  /**
   * Routes a call that names an alias handle through its grant: the direct
   * call first (the caller's own handle, no extra round trip); when it finds
   * no such handle and `handle` is an alias the caller holds, the call runs
   * on the owner's handle, as the owner, with the grant checked by the
   * backend inside the write. `undefined` for a call already routed.
   */
  #shared<T, O extends UserOption>(
    handle: string,
    options: O,
    needed: Rights | "owner" | (() => Rights),
    call: (handle: string, options: O & ViaOption) => Promise<T>,
    map: (result: T, g: GrantRecord) => T,
  ): Promise<T> | undefined {
    if (
      typeof options !== "object" || options === null || VIA in options ||
      this.#grantBackend() === undefined
    ) return undefined;
    let direct: Promise<T>;
    try {
      direct = call(handle, { ...options, [VIA]: null });
    } catch (e) {
      direct = Promise.reject(e);
    }
    // A handler on the direct call's promise: no frame of its own on the way of every call.
    return direct.catch(async (e) => {
      if (!(e instanceof HandleNotFound) || e instanceof GrantEnded) throw e;
      const g = typeof handle === "string" ? await this.#alias(options.user, handle) : null;
      if (!g) {
        throw e.details.handle === handle ? await this.#missing(options.user, handle) : e;
      }
      const reason = grantGone(g, this.#clock());
      if (reason) throw new GrantEnded(handle, reason);
      const rights = g.rights as Rights;
      const need = typeof needed === "function" ? needed() : needed;
      if (need === "owner" || !covers(rights, need)) {
        throw new PermissionDenied(rights, need, { handle });
      }
      try {
        return map(await call(g.handle, { ...options, user: g.owner, [VIA]: g }), g);
      } catch (e2) {
        throw aliasError(e2, g);
      }
    });
  }

  /** {@link Backend.update}, with the grant of `ctx` named in the changelog entry. */
  #update(
    user: string,
    handle: string,
    change: Parameters<Backend["update"]>[2],
    ctx: WriteContext,
  ): ReturnType<Backend["update"]> {
    const g = ctx.grant;
    if (!g) return this.#backend.update(user, handle, change, ctx);
    return this.#backend.update(user, handle, (cur) => {
      const step = change(cur);
      if (step?.entry) {
        const text = JSON.stringify({ ...JSON.parse(step.entry.text), via: g.grant });
        return { ...step, entry: { ...step.entry, text } };
      }
      return step;
    }, ctx);
  }

  /** A changelog entry for a write, or a marker when it is over `maxEntryBytes`. */
  #entry(
    version: number,
    at: number,
    writer: string | null,
    op: ChangeInfo["op"],
    what: Record<string, unknown>,
  ): ChangeEntry {
    const head = { version, at: new Date(at).toISOString(), writer, op };
    let text = JSON.stringify({ ...head, ...what });
    if (text.length * 3 > this.#maxEntryBytes && utf8Length(text) > this.#maxEntryBytes) {
      text = JSON.stringify({ ...head, omitted: true });
    }
    return { version, at, text };
  }

  #step(record: HandleRecord, op: ChangeInfo["op"], what: Record<string, unknown>): Step {
    if (!this.#retention) return { record };
    return {
      record,
      entry: this.#entry(record.version, record.updatedAt, record.lastWriter, op, what),
    };
  }

  /**
   * The entries `after < version <= upTo`, when the log holds every one of
   * them in full; `null` otherwise.
   */
  async #log(
    user: string,
    handle: string,
    after: number,
    upTo: number,
  ): Promise<ChangeInfo[] | null> {
    if (after === upTo) return [];
    if (!this.#retention) return null;
    const entries = await this.#entries(user, handle, after);
    const out: ChangeInfo[] = [];
    for (const info of entries) {
      if (info.version > upTo) break;
      if (info.version !== after + 1 + out.length) return null;
      if (info.omitted) return null;
      // The way back is the store's own business: the wire form shows what changed.
      delete info.undo;
      out.push(info);
    }
    return out.length === upTo - after ? out : null;
  }

  /** The changelog entries after `after`, parsed, oldest first (`undo` included). */
  async #entries(user: string, handle: string, after: number): Promise<(ChangeInfo & EntryInfo)[]> {
    const entries = await this.#call(() => this.#backend.changes(user, handle, after));
    return entries.map((e) => JSON.parse(e.text) as ChangeInfo & EntryInfo);
  }

  /**
   * The `StaleWrite` for a save based on `expect` while the record is at
   * `current`; `refusal` adds why a merging save did not merge.
   */
  async #stale(
    user: string,
    handle: string,
    expect: number,
    current: HandleRecord,
    refusal: Record<string, unknown> = {},
  ): Promise<StaleWrite> {
    const extra: Record<string, unknown> = { base_version: expect, ...refusal };
    if (this.#retention && expect < current.version) {
      const log = await this.#log(user, handle, expect, current.version).catch(() => null);
      // Bounded like a state: a log larger than the cap is left out.
      const fits = log !== null && utf8Length(JSON.stringify(log)) <= this.#maxBytes;
      extra.changes = fits ? log : null;
      if (!fits) extra.changes_truncated = true;
    }
    return new StaleWrite(handle, expect, toPayload(snapshotOf(current)), extra);
  }

  #reclaim(): void {
    if (this.#closed) return;
    const now = this.#clock();
    this.#backend.sweep(null, now - this.#graceMs, now).catch(() => {});
  }

  /** The snapshot after an update step (patch, touch), with the write's lease. */
  async #written<S>(
    user: string,
    handle: string,
    res: UpdateOutcome | Replayed,
    ctx: WriteContext,
    now: number,
  ): Promise<Snapshot<S>> {
    if (isReplayed(res)) {
      const snap = snapshotOf<S>(this.#replayed(res, ctx));
      await this.#leaseAfter(user, handle, ctx, undefined, true, snap);
      return snap;
    }
    const snap = snapshotOf<S>(this.#live(res.record, handle, now));
    await this.#leaseAfter(user, handle, ctx, res.lease, false, snap);
    return snap;
  }

  /**
   * After a write landed (or was replayed): the lease it asked for in
   * `ctx.lease`. `taken` is the outcome when the backend took it with the
   * write; otherwise (a backend that does not, a write that changed nothing,
   * a replay) it is taken now, after a check that the handle is still live
   * for a replay. Sets `info.activeLease` to the lease in force. Never throws:
   * the lease is advisory, and the write already landed.
   */
  async #leaseAfter(
    user: string,
    handle: string,
    ctx: WriteContext,
    taken: LeaseOutcome | undefined,
    replayed: boolean,
    info?: HandleInfo,
  ): Promise<void> {
    const lease = ctx.lease;
    if (!lease) return;
    let out = taken;
    if (!out) {
      const b = this.#backend;
      if (!b.acquireLease) return;
      try {
        out = await this.#call(async () => {
          if (replayed) this.#live(await b.read(user, handle), handle, this.#clock());
          return await b.acquireLease!(user, handle, lease, ctx.now);
        });
      } catch {
        return;
      }
    }
    if (info) {
      info.activeLease = { holder: out.lease.holder, expiresAt: new Date(out.lease.expiresAt) };
    }
  }

  #call<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      return Promise.reject(new BackendError("The store is closed; open a new one."));
    }
    // A handler on the call's own promise, not an async frame (every call goes through here).
    try {
      return fn().catch(backendFailed);
    } catch (e) {
      return Promise.reject(e).catch(backendFailed);
    }
  }

  /**
   * {@link HandleStore.#call} for a read or write of `(user, handle)`: a
   * not-found of that handle says whether it is in the caller's trash.
   */
  async #callOn<T>(
    user: string,
    handle: string,
    fn: () => Promise<T>,
    options?: object,
  ): Promise<T> {
    try {
      return await this.#call(fn);
    } catch (e) {
      if (!(e instanceof HandleNotFound) || e.details.handle !== handle) throw e;
      throw await this.#missing(user, handle, options);
    }
  }

  /**
   * The not-found of `handle` for `user`: with `restorableUntil` when it is in
   * the user's own trash (one backend call, made on a miss only).
   */
  async #missing(user: string, handle: string, options?: object): Promise<HandleNotFound> {
    // A call that goes on through an alias when it finds no handle of the
    // caller's asks the trash only once no alias is found either (`#shared`).
    if (options && (options as ViaOption)[VIA] === null) return new HandleNotFound(handle);
    const b = this.#backend;
    if (!b.trashedUntil) return new HandleNotFound(handle);
    const until = await this.#call(() => b.trashedUntil!(user, handle));
    return until === null || until <= this.#clock()
      ? new HandleNotFound(handle)
      : new HandleNotFound(handle, { restorableUntil: new Date(until) });
  }

  /** Returns the record if it exists and is live, else throws not-found / expired. */
  #live(r: HandleRecord | null, handle: string, now: number): HandleRecord {
    if (!r) throw new HandleNotFound(handle);
    if (r.expiresAt !== null && r.expiresAt <= now) {
      throw new HandleExpired(
        handle,
        new Date(r.expiresAt),
        Math.round((r.expiresAt - r.createdAt) / DAY_MS * 1000) / 1000,
      );
    }
    return r;
  }

  async #context(
    key: string | undefined,
    scope: string,
    args: unknown[],
  ): Promise<WriteContext> {
    const now = this.#clock();
    if (key === undefined) {
      return this.#quotas
        ? { now, graceMs: this.#graceMs, quota: this.#quotas }
        : { now, graceMs: this.#graceMs };
    }
    if (typeof key !== "string" || key.length === 0 || key.length > 256 || !isIdentifier(key)) {
      throw new InvalidArgument(
        "idempotencyKey must be a well-formed string of 1 to 256 characters, without U+0000.",
        {
          field: "idempotency_key",
        },
      );
    }
    const claim: IdempotencyClaim = {
      key,
      scope,
      fingerprint: await digest(JSON.stringify(args)),
      expiresAt: now + IDEMPOTENCY_MS,
    };
    const ctx: WriteContext = { now, graceMs: this.#graceMs, idempotency: claim };
    if (this.#quotas) ctx.quota = this.#quotas;
    return ctx;
  }

  #checkFingerprint(res: Replayed, ctx: WriteContext): void {
    if (res.fingerprint !== ctx.idempotency?.fingerprint) {
      throw new InvalidArgument(
        "This idempotency key was already used for a different call; nothing was applied. Use a fresh key for a new change.",
        { field: "idempotency_key" },
      );
    }
  }

  #replayed(res: Replayed, ctx: WriteContext): HandleRecord {
    this.#checkFingerprint(res, ctx);
    if (!res.result) throw new HandleNotFound(ctx.idempotency?.scope ?? "");
    return res.result;
  }
}

/**
 * Thrown inside a save step when the version moved on; turned into
 * `StaleWrite` outside. `refusal`: why a merging save could not merge (the
 * details it adds to the `StaleWrite`).
 */
class StaleVersion extends McpStateError {
  readonly current: HandleRecord;
  readonly refusal: Record<string, unknown> | undefined;
  constructor(current: HandleRecord, refusal?: Record<string, unknown>) {
    super("stale_write", "stale");
    this.current = current;
    this.refusal = refusal;
  }
}

/** The refusal of a merge whose base version is no longer in the changelog. */
const UNAVAILABLE = { reason: "history_unavailable" } as const;

/** A version argument: a whole number of at least `min`; `field` names it in the error. */
function checkVersion(version: unknown, field: string, min: number): asserts version is number {
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < min) {
    throw new InvalidArgument(`${field} must be a whole version number, ${min} or more.`, {
      field,
    });
  }
}

function checkOnConflict(x: unknown): "fail" | "merge" {
  if (x === undefined || x === "fail" || x === "merge") return x ?? "fail";
  throw new InvalidArgument(
    'on_conflict must be "fail" (a stale save is refused) or "merge" (disjoint edits are merged).',
    { field: "on_conflict" },
  );
}

function withLease<T extends HandleInfo>(
  info: T,
  leases: Map<string, LeaseRecord> | undefined,
): T {
  const l = leases?.get(info.handle);
  if (l) info.activeLease = { holder: l.holder, expiresAt: new Date(l.expiresAt) };
  return info;
}

function noLeases(): InvalidArgument {
  return new InvalidArgument(
    "This store's backend keeps no leases; use a backend that does (every built-in one does).",
  );
}

/** A lease's length in seconds: more than 0, at most a day. */
function checkLeaseSeconds(seconds: unknown): number {
  if (
    typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0 ||
    seconds > MAX_LEASE_SECONDS
  ) {
    throw new InvalidArgument(
      `seconds must be a number greater than 0 and at most ${MAX_LEASE_SECONDS} (one day).`,
      { field: "seconds" },
    );
  }
  return seconds;
}

/** The lease a write asks for (`undefined`: none), checked before anything is written. */
function writeLease(
  option: WriteLeaseOption | undefined,
  writer: string | null,
  now: number,
): LeaseRecord | undefined {
  if (option === undefined) return undefined;
  if (typeof option !== "object" || option === null) {
    throw new InvalidArgument("lease must be an object: { seconds, holder? }.", { field: "lease" });
  }
  const holder = checkHolder(option.holder ?? writer);
  const seconds = checkLeaseSeconds(option.seconds);
  return { holder, expiresAt: now + Math.max(1, Math.round(seconds * 1000)) };
}

function checkHolder(writer: unknown): string {
  const holder = checkWriter(writer);
  if (holder === null || holder.length === 0) {
    throw new InvalidArgument(
      'A lease needs a holder: pass writer, the label others will see (e.g. "laptop/claude-code").',
      { field: "writer" },
    );
  }
  return holder;
}

/**
 * A record as the store hands records out (export, import): without its
 * preview, which is derived from the state and computed again on import.
 */
function withoutPreview<R extends HandleRecord | null>(r: R): R {
  if (r === null || r.preview === undefined) return r;
  const { preview: _, ...rest } = r;
  return rest as R;
}

function infoOf(r: HandleMeta, schemaVersion = true): HandleInfo {
  return {
    handle: r.handle,
    kind: r.kind,
    version: r.version,
    createdAt: new Date(r.createdAt),
    updatedAt: new Date(r.updatedAt),
    expiresAt: r.expiresAt === null ? null : new Date(r.expiresAt),
    lastWriter: r.lastWriter,
    ...(r.schemaVersion == null || !schemaVersion ? {} : { schemaVersion: r.schemaVersion }),
    ...(r.forkedFrom == null || !schemaVersion ? {} : { forkedFrom: { ...r.forkedFrom } }),
  };
}

function snapshotOf<S>(r: HandleRecord): Snapshot<S> {
  return { ...infoOf(r), state: decodeState<S>(r.state) };
}

function checkUser(options: unknown, field = "user"): string {
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgument('Pass an options object with the user, e.g. { user: "alice" }.');
  }
  const user = (options as UserOption).user;
  if (
    typeof user !== "string" || user.length === 0 || user.length > 1024 || !isIdentifier(user)
  ) {
    throw new InvalidArgument(
      `${field} must be a non-empty, well-formed Unicode string of at most 1024 characters, without U+0000: the identity the state belongs to.`,
      { field },
    );
  }
  return user;
}

/** Validates the `quotas` option: `undefined` when there are none. */
function checkQuotas(quotas: QuotaOptions | undefined, backend: Backend): QuotaLimits | undefined {
  if (quotas === undefined) return undefined;
  checkOptions(quotas, "quotas");
  const out: QuotaLimits = {};
  for (const name of ["maxHandles", "maxBytes", "writesPerMinute"] as const) {
    const v = quotas[name];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
      throw new InvalidArgument(
        `quotas.${name} must be a whole number, at least 1 (omit it for no limit).`,
        {
          field: `quotas.${name}`,
        },
      );
    }
    out[name] = v;
  }
  if (Object.keys(out).length === 0) return undefined;
  if (typeof backend.usage !== "function") {
    throw new InvalidArgument(
      "This backend keeps no per-user usage, so it cannot enforce quotas; open the store without quotas.",
      { field: "quotas" },
    );
  }
  return out;
}

function checkOptions(options: unknown, where: string): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    const message = `The options of ${where} must be an object; omit them for the defaults.`;
    throw new InvalidArgument(message, { field: "options" });
  }
}

/** `String(x)`, except that an object's own `toString`/`valueOf` are never called: it becomes its tag. */
function safeString(x: unknown): string {
  return (typeof x === "object" && x !== null) || typeof x === "function"
    ? Object.prototype.toString.call(x)
    : String(x);
}

/**
 * Whether `s` is well-formed Unicode. Identities, writer labels and keys with
 * lone surrogates are refused: engines that keep UTF-8 would turn every lone
 * surrogate into U+FFFD, so two different names could meet as one.
 */
function wellFormed(s: string): boolean {
  return s.isWellFormed();
}

/**
 * Whether `s` may name a user, handle, writer, lease holder or idempotency
 * key: well-formed, and without U+0000. PostgreSQL's text refuses U+0000 and
 * other engines would keep it, so it is refused everywhere alike (a state may
 * hold it: states travel as JSON text, where it is an escape).
 */
function isIdentifier(s: string): boolean {
  return wellFormed(s) && !s.includes("\0");
}

/** The order of a listing: `updatedAt` descending, then `handle` ascending. */
function compareListed(
  a: { updatedAt: number; handle: string },
  b: { updatedAt: number; handle: string },
): number {
  if (a.updatedAt !== b.updatedAt) return b.updatedAt - a.updatedAt;
  return a.handle < b.handle ? -1 : a.handle > b.handle ? 1 : 0;
}

/** The backend primitives sharing needs. */
type GrantBackend =
  & Backend
  & Required<
    Pick<Backend, "putGrant" | "readGrant" | "endGrant" | "grantsOf" | "grantsTo">
  >;

/** A backend's failure as the store reports it: its own errors as they are, others as `backend_error`. */
function backendFailed(e: unknown): never {
  if (e instanceof McpStateError) throw e;
  const msg = e instanceof Error ? e.message : String(e);
  throw new BackendError(`The storage backend failed: ${msg}`, { cause: e });
}

/** Options of a call, routed (`[VIA]`: its grant) or direct (`null`). */
interface ViaOption {
  [VIA]?: GrantRecord | null;
}

function viaIn(options: unknown): GrantRecord | undefined {
  return (options as ViaOption)[VIA] ?? undefined;
}

/** A result through a grant: named by the alias, with who shared it and the rights. */
function asAlias<T extends HandleInfo>(r: T, g: GrantRecord): T {
  return { ...r, handle: g.alias, sharedBy: g.owner, rights: g.rights as Rights };
}

/** An error of a call through a grant, naming the alias instead of the owner's handle. */
function aliasError(e: unknown, g: GrantRecord): unknown {
  // A grant that ended inside the write is already named by its alias.
  if (!(e instanceof McpStateError) || e instanceof GrantEnded) return e;
  if (e instanceof HandleNotFound) return new HandleNotFound(g.alias);
  e.message = e.message.replaceAll(g.handle, g.alias);
  if (e.details.handle === g.handle) e.details.handle = g.alias;
  const current = e.details.current as Record<string, unknown> | undefined;
  if (current && typeof current === "object" && current.handle === g.handle) {
    e.details.current = { ...current, handle: g.alias };
  }
  return e;
}

/** The fields that make two grants the same grant (times and ending aside). */
const GRANT_KEYS = ["grant", "alias", "owner", "handle", "to", "rights", "by", "parent"] as const;

/** Validates a grant from outside (an import): names, rights, times. */
function checkGrantRecord(g: GrantRecord): void {
  if (typeof g !== "object" || g === null) {
    throw new InvalidArgument("A grant must be an object.", { field: "grant" });
  }
  checkUser({ user: g.owner }, "owner");
  checkUser({ user: g.by }, "by");
  for (const id of [g.grant, g.alias, g.handle]) checkHandle(id);
  if (g.parent !== null) checkHandle(g.parent);
  checkRights(g.rights);
  checkGrantee(g.to, g.owner);
  const time = (x: unknown, field: string) => {
    if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) {
      throw new InvalidArgument(`${field} must be a time in whole epoch milliseconds.`, { field });
    }
  };
  time(g.createdAt, "created_at");
  if (g.expiresAt !== null) time(g.expiresAt, "expires_at");
}

/** Validates the grantee of a share: a user id, or `"*"`; never the caller. */
function checkGrantee(to: unknown, user: string): string {
  if (typeof to !== "string" || to.length === 0 || to.length > 1024 || !isIdentifier(to)) {
    throw new InvalidArgument(
      'to must be the user id to share with (1-1024 characters, without U+0000), or "*" for anyone who holds the alias handle.',
      { field: "to" },
    );
  }
  if (to === user) {
    throw new InvalidArgument("You already have this handle: share it with someone else.", {
      field: "to",
    });
  }
  return to;
}

function checkHandle(handle: unknown): asserts handle is string {
  if (
    typeof handle !== "string" || handle.length === 0 || handle.length > 256 ||
    !isIdentifier(handle)
  ) {
    throw new InvalidArgument(
      'handle must be the handle string a mint returned (e.g. "research_k3v9x2mq").',
      { field: "handle" },
    );
  }
}

function checkWriter(writer: unknown): string | null {
  if (writer === undefined || writer === null) return null;
  if (typeof writer !== "string" || writer.length > 256 || !isIdentifier(writer)) {
    throw new InvalidArgument(
      "writer must be a well-formed string of at most 256 characters, without U+0000.",
      { field: "writer" },
    );
  }
  return writer;
}

/** Validates a TTL in days and returns it in ms (`null`: never, `undefined`: absent). */
function checkTtl(ttlDays: unknown, allowNull: boolean): number | null | undefined {
  if (ttlDays === undefined) return undefined;
  if (ttlDays === null && allowNull) return null;
  if (
    typeof ttlDays !== "number" || !Number.isFinite(ttlDays) || ttlDays <= 0 || ttlDays > 36525
  ) {
    throw new InvalidArgument(
      `ttl_days must be a number of days greater than 0 and at most 36525 (got ${
        safeString(ttlDays).slice(0, 40)
      }); omit it or pass null for no expiry.`,
      { field: "ttl_days" },
    );
  }
  // At least 1 ms: a TTL that rounds to 0 would land already expired.
  return Math.max(1, Math.round(ttlDays * DAY_MS));
}

/** The record is not an object, or its times are not epoch ms. */
function checkRecordTimes(record: unknown): asserts record is HandleRecord {
  if (typeof record !== "object" || record === null) {
    throw new InvalidArgument(
      "A record is an object with handle, kind, state, version, createdAt, updatedAt, expiresAt and lastWriter.",
      { field: "record" },
    );
  }
  const r = record as unknown as Record<string, unknown>;
  for (const [field, key] of [["created_at", "createdAt"], ["updated_at", "updatedAt"]]) {
    if (!Number.isSafeInteger(r[key!])) {
      throw new InvalidArgument(`"${field}" must be a time in whole epoch milliseconds.`, {
        field,
      });
    }
  }
  if (r.expiresAt !== null && !Number.isSafeInteger(r.expiresAt)) {
    throw new InvalidArgument(
      `"expires_at" must be null or a time in whole epoch milliseconds.`,
      { field: "expires_at" },
    );
  }
}

/** Why a name fails {@link isIdentifier}, after the field's name. */
const NOT_AN_IDENTIFIER = "holds U+0000 or a lone surrogate, which mcpstate never stores in a name";

/** Everything {@link checkRecordTimes} leaves: the names, the version, the state. */
function checkRecordRest(user: unknown, r: HandleRecord, maxBytes: number): void {
  const name = (field: string, value: unknown, max: number): string => {
    if (typeof value !== "string" || value.length === 0 || value.length > max) {
      throw new InvalidArgument(
        `"${field}" must be a non-empty string of at most ${max} characters.`,
        { field },
      );
    }
    if (!isIdentifier(value)) {
      throw new InvalidArgument(`"${field}" ${NOT_AN_IDENTIFIER}.`, { field });
    }
    return value;
  };
  name("user", user, 1024);
  name("handle", r.handle, 256);
  const kind = name("kind", r.kind, 32);
  if (!KIND_RE.test(kind)) {
    throw new InvalidArgument(`"kind" ${JSON.stringify(kind)} is not a valid kind.`, {
      field: "kind",
    });
  }
  if (!Number.isSafeInteger(r.version) || r.version < 1) {
    throw new InvalidArgument(`"version" must be a whole number, 1 or more.`, {
      field: "version",
    });
  }
  const writer: unknown = r.lastWriter;
  if (writer !== null && (typeof writer !== "string" || writer.length > 256)) {
    throw new InvalidArgument(
      `"last_writer" must be null or a string of at most 256 characters.`,
      { field: "last_writer" },
    );
  }
  if (writer !== null && !isIdentifier(writer)) {
    throw new InvalidArgument(`"last_writer" ${NOT_AN_IDENTIFIER}.`, { field: "last_writer" });
  }
  const sv: unknown = r.schemaVersion;
  if (sv != null && (!Number.isSafeInteger(sv) || (sv as number) < 1)) {
    throw new InvalidArgument(`"schema_version" must be null or a whole number, 1 or more.`, {
      field: "schema_version",
    });
  }
  const ff: unknown = r.forkedFrom;
  if (ff != null) {
    const f = ff as Partial<ForkPoint>;
    const keys = typeof ff === "object" && !Array.isArray(ff) ? Object.keys(ff).sort() : [];
    if (
      keys.join(",") !== "handle,version" || typeof f.handle !== "string" ||
      f.handle.length > 200 || !isIdentifier(f.handle) || !Number.isSafeInteger(f.version) ||
      (f.version as number) < 1
    ) {
      throw new InvalidArgument(
        `"forked_from" must be null or {"handle": a handle, "version": a whole number, 1 or more}.`,
        { field: "forked_from" },
      );
    }
  }
  let state: unknown;
  try {
    state = typeof r.state === "string" ? JSON.parse(r.state) : undefined;
  } catch { /* not JSON: refused below */ }
  if (!isPlainObject(state)) {
    throw new InvalidArgument(`"state" must be a JSON object.`, { field: "state" });
  }
  assertJson(state);
  const size = utf8Length(r.state);
  if (size > maxBytes) throw new StateTooLarge(size, maxBytes);
}

/** A user as `users` lists it: any non-empty string the backend holds. */
function checkListedUser(user: unknown): void {
  if (typeof user !== "string" || user.length === 0) {
    throw new InvalidArgument("user must be a non-empty string: a user that users() lists.", {
      field: "user",
    });
  }
}

function unsupported(what: string): InvalidArgument {
  return new InvalidArgument(
    `This store's backend cannot ${what}; use a backend that can (every built-in one does).`,
  );
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function randomChars(n: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(n));
  let out = "";
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}

async function digest(text: string): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The longest cursor {@link encodeCursor} makes: a 256-character handle
 * whose every character JSON escapes as `\u001f` (6 bytes), a 16-digit time,
 * in base64 (4 characters per 3 bytes), with its prefix.
 */
const MAX_CURSOR_CHARS = 3 + Math.ceil((256 * 6 + 24) / 3) * 4;

/**
 * A list cursor: `c2.` and the base64url of the UTF-8 of `[updatedAt, handle]`.
 * (`c1.` cursors of earlier releases held the same JSON as Latin-1 and could
 * not carry a handle outside it; {@link decodeCursor} still reads them.)
 */
function encodeCursor(r: { updatedAt: number; handle: string }): string {
  return "c2." + base64url(new TextEncoder().encode(JSON.stringify([r.updatedAt, r.handle])));
}

/**
 * How many of a page's `handles` fit in `maxBytes` (at least one): the
 * compact JSON of `{"handles":[…],"next_cursor":…}` with the cursor the cut
 * (or `more`) gives, else `null`.
 */
function fitPage(handles: HandleInfo[], more: boolean, maxBytes: number): number {
  const head = '{"handles":[],"next_cursor":}'.length;
  let items = 0;
  let kept = 0;
  for (let i = 0; i < handles.length; i++) {
    const h = handles[i]!;
    items += jsonSize(toPayload(h)) + (i > 0 ? 1 : 0);
    const last = i === handles.length - 1;
    const cursor = last && !more
      ? 4
      : jsonSize(encodeCursor({ updatedAt: h.updatedAt.getTime(), handle: h.handle }));
    if (i > 0 && head + items + cursor > maxBytes) break;
    kept = i + 1;
  }
  return kept;
}

function encodeLegacyCursor(r: { updatedAt: number; handle: string }): string {
  return "c1." + base64url(Uint8Array.from(JSON.stringify([r.updatedAt, r.handle]), latin1));
}

function latin1(c: string): number {
  const code = c.charCodeAt(0);
  if (code > 0xff) throw new RangeError("Not Latin-1");
  return code;
}

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

/**
 * Reads a cursor back. Only the exact text {@link encodeCursor} (or the `c1.`
 * form of earlier releases) makes for a position is accepted: anything else,
 * whatever it decodes to, is `invalid_argument`, never another error.
 */
function decodeCursor(cursor: unknown): { updatedAt: number; handle: string } {
  const bad = () =>
    new InvalidArgument(
      "This cursor did not come from this store's listPage/state_list. Pass back next_cursor exactly as you got it, or omit it to start from the first page.",
      { field: "cursor" },
    );
  if (typeof cursor !== "string" || cursor.length > MAX_CURSOR_CHARS) throw bad();
  const legacy = cursor.startsWith("c1.");
  if (!legacy && !cursor.startsWith("c2.")) throw bad();
  try {
    const binary = atob(cursor.slice(3).replaceAll("-", "+").replaceAll("_", "/"));
    const json = legacy ? binary : new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(binary, (c) => c.charCodeAt(0)),
    );
    const v: unknown = JSON.parse(json);
    if (
      Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) &&
      typeof v[1] === "string" && v[1].length > 0 && v[1].length <= 256 && isIdentifier(v[1])
    ) {
      const at = { updatedAt: v[0] as number, handle: v[1] };
      // One position, one text: other spellings of it did not come from here.
      if ((legacy ? encodeLegacyCursor(at) : encodeCursor(at)) === cursor) return at;
    }
  } catch { /* fall through */ }
  throw bad();
}

type Diff = NonNullable<Parameters<typeof createPatch>[2]>;
/**
 * rfc6902 diffs two arrays by edit distance: O(n·m) time and memory, and
 * n + m frames deep (a few thousand elements overflow the stack). Past this
 * many cells {@link boundedDiff} takes over.
 */
const ARRAY_DIFF_CELLS = 4_096;

/**
 * What a save's changelog entry keeps: its forward `patch`, and `undo`, the
 * patch back to `before` (left out when the forward patch does not replay on
 * `before`: the entry then ends the way back, never the write).
 */
function withUndo(before: JsonObject, patch: Operation[]): Record<string, unknown> {
  const undo = undoOf(before, patch as JsonPatchOp[]);
  return undo === undefined ? { patch } : { patch, undo };
}

/** An RFC 6902 patch from `before` to `after`, bounded in time and stack for long arrays. */
function diffOf(before: unknown, after: unknown): Operation[] {
  return createPatch(before, after, boundedDiff);
}

/**
 * Whether two JSON values (valid, as a stored or a checked state holds them)
 * have the same JSON text, keys in the same order: what comparing their
 * `JSON.stringify` says, without writing either.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const k = ka[i]!;
    if (k !== kb[i] || !sameJson((a as JsonObject)[k], (b as JsonObject)[k])) return false;
  }
  return true;
}

/**
 * For two long arrays: keeps the common prefix and suffix and writes the
 * middle as adds, removes, element-wise diffs (same length, up to 64), or
 * one `replace` of the array. Anything else goes to rfc6902's own diff.
 */
const boundedDiff: Diff = (input: unknown, output: unknown, ptr): Operation[] | void => {
  if (!Array.isArray(input) || !Array.isArray(output)) return;
  if (input.length * output.length <= ARRAY_DIFF_CELLS) {
    // rfc6902 finds two equal arrays equal only after diffing every element
    // pair on its way through the edit-distance table; its answer is [].
    return input.length === output.length && sameJson(input, output) ? [] : undefined;
  }
  const n = Math.min(input.length, output.length);
  let p = 0;
  while (p < n && sameJson(input[p], output[p])) p++;
  let s = 0;
  while (s < n - p && sameJson(input[input.length - 1 - s], output[output.length - 1 - s])) s++;
  const removed = input.length - p - s, added = output.length - p - s;
  const at = (i: number) => ptr.add(String(i)).toString();
  if (removed === 0) {
    return output.slice(p, p + added).map((value, i) => ({
      op: "add" as const,
      path: s === 0 ? ptr.add("-").toString() : at(p + i),
      value,
    }));
  }
  if (added === 0) {
    return Array.from({ length: removed }, () => ({ op: "remove" as const, path: at(p) }));
  }
  if (removed === added && removed <= 64) {
    return Array.from(
      { length: removed },
      (_, i) =>
        createPatch(input[p + i], output[p + i], boundedDiff)
          .map((op) => ({ ...op, path: at(p + i) + op.path })),
    ).flat();
  }
  return [{ op: "replace", path: ptr.toString(), value: output }];
};
