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
  AuditStep,
  Change,
  ChangeEntry,
  ConditionalWrite,
  GrantRecord,
  HandleMeta,
  HandleRecord,
  InsertOutcome,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  SaveOutcome,
  TransferOutcome,
  TransferStep,
  TrashedMeta,
  TrashQuery,
  UpdateOutcome,
  Usage,
  WriteContext,
} from "./backend/_records.ts";

export type {
  AuditStep,
  Change,
  ChangeEntry,
  ConditionalWrite,
  ForkPoint,
  GrantCheck,
  GrantRecord,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  InsertOutcome,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  QuotaLimits,
  Replayed,
  Retention,
  SaveOutcome,
  Step,
  TransferOutcome,
  TransferStep,
  TrashedMeta,
  TrashQuery,
  UpdateOutcome,
  Usage,
  WriteContext,
} from "./backend/_records.ts";
export { auditEntry, isReplayed, metaOf } from "./backend/_records.ts";

/** The primitives a storage engine provides to `HandleStore`. */
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
   * Optional (needed by `mcpstate export` and `migrate`): one page of the users
   * that have at least one handle record, expired records included, in
   * ascending order. The order is the engine's own (byte order of the UTF-8
   * name is recommended), as long as `after` is consistent with it: a page
   * starts strictly after `query.after`, and paging until a page comes back
   * shorter than `limit` visits every user exactly once.
   *
   * @since 0.3.0
   */
  listUsers?(query: { after?: string; limit: number }): Promise<string[]>;
  /**
   * Optional (needed by `mcpstate import` and `migrate`): writes `record`
   * exactly as given — handle, kind, state text, version, timestamps, expiry
   * and writer — in one atomic step, when this user has no record with that
   * handle (`"inserted"`) or has one with a lower version (`"replaced"`);
   * otherwise it writes nothing (`"kept"`). It never mints or re-versions,
   * ignores `ctx.idempotency`, and, where the engine expires records natively,
   * expires it at `expiresAt + ctx.graceMs`. A replaced record's changelog is
   * dropped (its history is unknown). Re-running an import is
   * therefore harmless: nothing is duplicated and newer data is never
   * overwritten with older.
   *
   * Not to be confused with `HandleStore.restore`, which brings a revoked
   * handle back from the trash (see {@link Backend.untrash}).
   *
   * @since 0.5.0 (named `restore` in 0.3 and 0.4)
   */
  importRecord?(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<"inserted" | "replaced" | "kept">;
  /**
   * Optional (leases): in one atomic step, when `(user, handle)` has no lease,
   * or one held by `lease.holder`, or one with `expiresAt <= now`, stores
   * `lease` and answers `acquired: true`; otherwise changes nothing and
   * answers the other holder's lease. It never reads or writes the record
   * (no version moves). A lease may be dropped by the engine once it lapses
   * (native expiry at `lease.expiresAt`, or {@link Backend.sweep}).
   *
   * @since 0.4.0
   */
  acquireLease?(
    user: string,
    handle: string,
    lease: LeaseRecord,
    now: number,
  ): Promise<LeaseOutcome>;
  /**
   * Optional (leases): deletes the lease of `(user, handle)` when `holder`
   * holds it; answers whether a lease with `expiresAt > now` was released.
   *
   * @since 0.4.0
   */
  releaseLease?(user: string, handle: string, holder: string, now: number): Promise<boolean>;
  /**
   * Optional (leases): the leases with `expiresAt > now` among `handles` of
   * one user, by handle (handles without one are absent). One round trip.
   *
   * @since 0.4.0
   */
  leases?(user: string, handles: readonly string[], now: number): Promise<Map<string, LeaseRecord>>;
  /**
   * Optional (leases): {@link Backend.read} and {@link Backend.leases} of one
   * handle in one step (one statement, one round trip) — what every `get`
   * needs. Without it the store makes both calls at once.
   *
   * @since 0.4.0
   */
  readLeased?(
    user: string,
    handle: string,
    now: number,
  ): Promise<{ record: HandleRecord | null; lease: LeaseRecord | null }>;
  /**
   * Optional (change feed): calls `listener` soon after any write to
   * `(user, handle)` commits — insert, save, update, remove, untrash,
   * importRecord, sweep — whether it went through this backend object, another connection,
   * another process or another instance sharing the engine, until the
   * returned function is called. Calls may be spurious or coalesced, never
   * carry data (the store re-reads), and must not throw. Without it the
   * store's `watch` polls.
   *
   * @since 0.4.0
   */
  subscribe?(user: string, handle: string, listener: () => void): Promise<() => void>;
  /**
   * Optional (the trash view of `mcpstate inspect`): one page of the records
   * of `user` that {@link Backend.remove} moved to the trash and that the
   * engine still holds, metadata only (never a state), with each one's
   * `trashUntil`.
   *
   * - Order: `trashUntil` descending — newest-deleted first, since a store
   *   gives every revoke the same undo window — then `handle` ascending in
   *   the engine's order (the one {@link Backend.list} uses).
   * - Paging: at most `query.limit` rows, starting strictly after
   *   `query.after`; paging from the last row of each page until a page comes
   *   back shorter than `limit` visits every trashed record exactly once.
   * - Records past their window (`trashUntil <= now`) that the engine has not
   *   reclaimed yet may be listed; they sort last, and the store leaves them
   *   out by its own clock. A handle that is live again (an import wrote it
   *   while its old record sat in the trash) is listed as well.
   * - Reads only; changes nothing, and never blocks a writer for longer than
   *   a read does.
   *
   * @since 0.5.0
   */
  listTrash?(user: string, query: TrashQuery): Promise<TrashedMeta[]>;
  /**
   * Optional (handles found again): the `trashUntil` of the record of `user`
   * with this handle that {@link Backend.remove} moved to the trash, or
   * `null` when there is none (a record past its window that the engine has
   * not reclaimed yet may still answer its time). One round trip; the store
   * calls it only after a read or write found no live record.
   *
   * @since 0.5.0
   */
  trashedUntil?(user: string, handle: string): Promise<number | null>;
  /**
   * Optional (quotas): the user's {@link Usage} as of `now`. A backend that
   * has it honours {@link WriteContext.quota} on every write; the store
   * refuses quotas on one that has not.
   *
   * @since 0.5.0
   */
  usage?(user: string, now: number): Promise<Usage>;
  /**
   * Optional (transfer): in one atomic step, moves the live record
   * `(user, handle)` and its changelog to `(to, handle)` (same handle, state,
   * expiry, creation time), drops the old owner's lease on it, ends every
   * grant in force on `(user, handle)` (`endedAt = ctx.now`), and, when
   * given, applies `step.audit` to the moved record (its next version and
   * entry, under `to`) and stores `step.keep`; the old owner keeps nothing
   * else. When `user` has no live record of that handle it answers
   * `"absent"`, when `to` has any record of it (live or in the trash)
   * `"taken"`, and changes nothing. The usage of both users follows
   * (`ctx.quota` is checked for `to`, as a mint would be).
   *
   * @since 0.5.0
   */
  transfer?(
    user: string,
    handle: string,
    to: string,
    ctx: WriteContext,
    step?: TransferStep,
  ): Promise<TransferOutcome>;
  /**
   * Optional (sharing): stores a new grant in one atomic step. When
   * `grant.parent` is set, the parent must be in force at `now` in that same
   * step (else the error of `grantEnded` of `backends/_grants.ts`, nothing
   * stored), so a re-share never outlives an `unshare` of its parent that
   * returned first. With `audit`, the same step applies it to the record
   * `(grant.owner, grant.handle)` ({@link AuditStep}), and answers
   * `"absent"`, storing nothing, when that record is not live (it was
   * deleted or moved since the store looked).
   *
   * @since 0.5.0
   */
  putGrant?(grant: GrantRecord, now: number, audit?: AuditStep): Promise<void | "absent">;
  /**
   * Optional (sharing): the grant whose id or alias handle is `idOrAlias`
   * (ended and expired ones included), or `null`.
   *
   * @since 0.5.0
   */
  readGrant?(idOrAlias: string): Promise<GrantRecord | null>;
  /**
   * Optional (sharing): in one atomic step, sets `endedAt = now` on the grant
   * `grant` and on every grant under it (re-shares, and theirs) that is not
   * ended yet; returns those it ended. With `audit`, when it ends any, the
   * same step applies it to the grant's record `(owner, handle)` if that is
   * live ({@link AuditStep}); a record deleted or moved gets no entry.
   *
   * @since 0.5.0
   */
  endGrant?(grant: string, now: number, audit?: AuditStep): Promise<GrantRecord[]>;
  /**
   * Optional (sharing): the grants of `(owner, handle)`, ended ones included,
   * oldest first.
   *
   * @since 0.5.0
   */
  grantsOf?(owner: string, handle: string): Promise<GrantRecord[]>;
  /**
   * Optional (sharing): the grants to the user `to` (never those to `"*"`)
   * that are not ended, oldest first.
   *
   * @since 0.5.0
   */
  grantsTo?(to: string): Promise<GrantRecord[]>;
  /** Releases connections and files. Idempotent. */
  close(): Promise<void>;
}
