/**
 * The backend interface: a few atomic primitives keyed by `(user, handle)`.
 *
 * A backend holds no rule of the store. It does not validate, mint, version
 * or judge expiry; it stores what `HandleStore` hands it and makes each
 * primitive atomic with its engine's own means (a transaction, a Lua script,
 * an atomic commit with versionstamp checks, a row lock). The one contract
 * suite in `tests/contract/` is how a backend proves itself.
 *
 * Times are epoch milliseconds. `state` is compact JSON text, already
 * validated and size-checked by the store: a backend stores it byte for byte.
 *
 * @module
 */

import type {
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  InsertOutcome,
  ListQuery,
  Replayed,
  SaveOutcome,
  UpdateOutcome,
  WriteContext,
} from "./backend/_records.ts";
import type {
  ContentPrimitives,
  ErasurePrimitives,
  FeedPrimitives,
  GrantPrimitives,
  KeyPrimitives,
  LeasePrimitives,
  QuotaPrimitives,
  RecordPrimitives,
  TransferPrimitives,
  TrashPrimitives,
} from "./backend/_capabilities.ts";

export type * from "./backend/_records.ts";
export { auditEntry, isReplayed, metaOf } from "./backend/_records.ts";
export type * from "./backend/_capabilities.ts";

/**
 * The primitives a storage engine provides to `HandleStore`: the core ones
 * every engine has, and optional capability groups, each provided whole or
 * not at all.
 */
export interface Backend {
  /**
   * Inserts a new record unless the handle exists for this user (any state,
   * expired, trashed or not); never overwrites. Appends `ctx.entry` with it.
   */
  insert(user: string, record: HandleRecord, ctx: WriteContext): Promise<
    InsertOutcome | Replayed
  >;
  /** Reads a record, expired or not; `null` when absent. */
  read(user: string, handle: string): Promise<HandleRecord | null>;
  /** The conditional write of `save`; see {@link ConditionalWrite}. */
  save(
    user: string,
    handle: string,
    write: ConditionalWrite,
    ctx: WriteContext,
  ): Promise<SaveOutcome | Replayed>;
  /**
   * Runs `change` against the current live record (`null` when absent or
   * trashed) and writes its {@link Step} — record and changelog entry —
   * atomically. `change` may run more than once (an engine may first try it
   * on a record it saw earlier and write only if that is still the record);
   * only the step written counts.
   */
  update(user: string, handle: string, change: Change, ctx: WriteContext): Promise<
    UpdateOutcome | Replayed
  >;
  /**
   * Deletes a live record with its changelog, or, with `ctx.trashUntil`, moves
   * both to the trash; `removed` tells whether a live record existed. A
   * trashed record is invisible to every other primitive but
   * {@link Backend.untrash}, and still blocks {@link Backend.insert} of its
   * handle.
   */
  remove(user: string, handle: string, ctx: WriteContext): Promise<{ removed: boolean } | Replayed>;
  /**
   * Moves a record (and its changelog) back from the trash when it is there
   * with `trashUntil > ctx.now`, unchanged; returns it, or `null` when there is
   * nothing to bring back.
   */
  untrash(user: string, handle: string, ctx: WriteContext): Promise<HandleRecord | null>;
  /**
   * The changelog entries of a live record with `version > afterVersion`,
   * oldest first (`[]` when there are none or no such record).
   */
  changes(user: string, handle: string, afterVersion: number): Promise<ChangeEntry[]>;
  /** Lists metadata, newest `updatedAt` first, then `handle` ascending; never reads states. */
  list(user: string, query: ListQuery): Promise<HandleMeta[]>;
  /**
   * Deletes records whose `expiresAt <= expiredAtOrBefore` (of one user, or of
   * every user when `user` is `null`) with their changelogs, trashed records
   * whose `trashUntil <= now`, and idempotency records whose expiry is at or
   * before `now`; returns how many live handle records were deleted.
   */
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number>;
  /**
   * `true` when the engine reclaims expired records by itself (native TTL at
   * `expiresAt + graceMs`), so the store need not sweep in the background.
   */
  readonly reclaimsExpired?: boolean;
  /**
   * The longest changelog entry text, in UTF-8 bytes, the engine can keep
   * (absent: no limit of its own). The store keeps a longer entry as its
   * `omitted` marker, as it does an entry over its own `maxEntryBytes`, so a
   * backend never reads or rewrites an entry's text.
   *
   * @since 0.5.0
   */
  readonly maxEntryBytes?: number;
  /**
   * Optional (needed by `mcpstate export`, `import` and `migrate`): every
   * user, and a record written exactly as given.
   *
   * @since 0.5.0 (as the methods `listUsers` and `importRecord`)
   */
  readonly records?: RecordPrimitives;
  /**
   * Optional: advisory leases. Without them the store refuses `lease` and
   * `release` and reads no lease.
   *
   * @since 0.5.0 (as the methods `acquireLease`, `releaseLease`, `leases`
   * and `readLeased`)
   */
  readonly leases?: LeasePrimitives;
  /**
   * Optional: the change feed. Without it the store's `watch` polls.
   *
   * @since 0.5.0 (as the method `subscribe`)
   */
  readonly feed?: FeedPrimitives;
  /**
   * Optional: the trash listing of `mcpstate inspect` and a handle's undo
   * window (handles found again).
   *
   * @since 0.5.0 (as the methods `listTrash` and `trashedUntil`)
   */
  readonly trash?: TrashPrimitives;
  /**
   * Optional: per-user usage, which quotas need.
   *
   * @since 0.5.0 (as the method `usage`)
   */
  readonly quotas?: QuotaPrimitives;
  /**
   * Optional: a record moved to another user in one atomic step.
   *
   * @since 0.5.0 (as the method `transfer`)
   */
  readonly transfer?: TransferPrimitives;
  /**
   * Optional: sharing (grants and their alias handles).
   *
   * @since 0.5.0 (as the methods `putGrant`, `readGrant`, `endGrant`,
   * `grantsOf` and `grantsTo`)
   */
  readonly grants?: GrantPrimitives;
  /**
   * Optional: every trace of one user erased (SPEC 9.1).
   *
   * @since 0.5.0
   */
  readonly erasure?: ErasurePrimitives;
  /**
   * Optional: the users' wrapped data keys, for encryption at rest (SPEC 9.2).
   *
   * @since 0.5.0
   */
  readonly keys?: KeyPrimitives;
  /**
   * Optional: every stored copy of state content, scanned and rewritten in
   * place (`mcpstate encrypt`, `mcpstate doctor`).
   *
   * @since 0.5.0
   */
  readonly content?: ContentPrimitives;
  /** Releases connections and files. Idempotent. */
  close(): Promise<void>;
}
