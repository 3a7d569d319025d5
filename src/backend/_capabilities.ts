/**
 * The backend's optional capabilities, each a group of primitives that an
 * engine provides whole or not at all (see `Backend` in `backend.ts`).
 *
 * @module
 */

import type {
  AuditStep,
  GrantRecord,
  HandleRecord,
  LeaseOutcome,
  LeaseRecord,
  TransferOutcome,
  TransferStep,
  TrashedMeta,
  TrashQuery,
  Usage,
  WriteContext,
} from "./_records.ts";

/**
 * The primitives `mcpstate export`, `import` and `migrate` need: every user,
 * and a record written exactly as given.
 *
 * @since 0.5.0
 */
export interface RecordPrimitives {
  /**
   * One page of the users that have at least one handle record, expired
   * records included, in ascending order. The order is the engine's own
   * (byte order of the UTF-8 name is recommended), as long as `after` is
   * consistent with it: a page starts strictly after `query.after`, and
   * paging until a page comes back shorter than `limit` visits every user
   * exactly once.
   *
   * @since 0.3.0 (as `Backend.listUsers`)
   */
  users(query: { after?: string; limit: number }): Promise<string[]>;
  // A property rather than a method: `import(` at the start of a line reads
  // as a dynamic import to the tools that trace imports.
  /**
   * Writes `record` exactly as given — handle, kind, state text, version,
   * timestamps, expiry and writer — in one atomic step, when this user has
   * no record with that handle (`"inserted"`) or has one with a lower
   * version (`"replaced"`); otherwise it writes nothing (`"kept"`). It never
   * mints or re-versions, ignores `ctx.idempotency`, and, where the engine
   * expires records natively, expires it at `expiresAt + ctx.graceMs`. A
   * replaced record's changelog is dropped (its history is unknown).
   * Re-running an import is therefore harmless: nothing is duplicated and
   * newer data is never overwritten with older.
   *
   * Not to be confused with `HandleStore.restore`, which brings a revoked
   * handle back from the trash (see `Backend.untrash`).
   *
   * @since 0.5.0 (as `Backend.importRecord`; named `restore` in 0.3 and 0.4)
   */
  readonly import: (
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ) => Promise<"inserted" | "replaced" | "kept">;
}

/**
 * Advisory leases: who is at work on a handle, beside the record.
 *
 * @since 0.5.0
 */
export interface LeasePrimitives {
  /**
   * In one atomic step, when `(user, handle)` has no lease, or one held by
   * `lease.holder`, or one with `expiresAt <= now`, stores `lease` and
   * answers `acquired: true`; otherwise changes nothing and answers the
   * other holder's lease. It never reads or writes the record (no version
   * moves). A lease may be dropped by the engine once it lapses (native
   * expiry at `lease.expiresAt`, or `Backend.sweep`).
   *
   * @since 0.4.0 (as `Backend.acquireLease`)
   */
  acquire(user: string, handle: string, lease: LeaseRecord, now: number): Promise<LeaseOutcome>;
  /**
   * Deletes the lease of `(user, handle)` when `holder` holds it; answers
   * whether a lease with `expiresAt > now` was released.
   *
   * @since 0.4.0 (as `Backend.releaseLease`)
   */
  release(user: string, handle: string, holder: string, now: number): Promise<boolean>;
  /**
   * The leases with `expiresAt > now` among `handles` of one user, by handle
   * (handles without one are absent). One round trip.
   *
   * @since 0.4.0 (as `Backend.leases`)
   */
  of(user: string, handles: readonly string[], now: number): Promise<Map<string, LeaseRecord>>;
  /**
   * Optional fast path: `Backend.read` and {@link LeasePrimitives.of} of one
   * handle in one step (one statement, one round trip) — what every `get`
   * needs. Without it the store makes both calls at once.
   *
   * @since 0.4.0 (as `Backend.readLeased`)
   */
  readLeased?(
    user: string,
    handle: string,
    now: number,
  ): Promise<{ record: HandleRecord | null; lease: LeaseRecord | null }>;
}

/**
 * The change feed: word of writes, so that the store's `watch` need not poll.
 *
 * @since 0.5.0
 */
export interface FeedPrimitives {
  /**
   * Calls `listener` soon after any write to `(user, handle)` commits —
   * insert, save, update, remove, untrash, import, sweep — whether it went
   * through this backend object, another connection, another process or
   * another instance sharing the engine, until the returned function is
   * called. Calls may be spurious or coalesced, never carry data (the store
   * re-reads), and must not throw. Without the feed the store's `watch`
   * polls.
   *
   * @since 0.4.0 (as `Backend.subscribe`)
   */
  subscribe(user: string, handle: string, listener: () => void): Promise<() => void>;
}

/**
 * The trash as seen from outside: its listing (the trash view of
 * `mcpstate inspect`) and a handle's undo window (handles found again).
 *
 * @since 0.5.0
 */
export interface TrashPrimitives {
  /**
   * One page of the records of `user` that `Backend.remove` moved to the
   * trash and that the engine still holds, metadata only (never a state),
   * with each one's `trashUntil`.
   *
   * - Order: `trashUntil` descending — newest-deleted first, since a store
   *   gives every revoke the same undo window — then `handle` ascending in
   *   the engine's order (the one `Backend.list` uses).
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
   * @since 0.5.0 (as `Backend.listTrash`)
   */
  list(user: string, query: TrashQuery): Promise<TrashedMeta[]>;
  /**
   * The `trashUntil` of the record of `user` with this handle that
   * `Backend.remove` moved to the trash, or `null` when there is none (a
   * record past its window that the engine has not reclaimed yet may still
   * answer its time). One round trip; the store calls it only after a read
   * or write found no live record.
   *
   * @since 0.5.0 (as `Backend.trashedUntil`)
   */
  until(user: string, handle: string): Promise<number | null>;
}

/**
 * Per-user quotas: the usage a backend keeps exact on every write.
 *
 * @since 0.5.0
 */
export interface QuotaPrimitives {
  /**
   * The user's {@link Usage} as of `now`. A backend that has it honours
   * `WriteContext.quota` on every write; the store refuses quotas on one
   * that has not.
   *
   * @since 0.5.0 (as `Backend.usage`)
   */
  usage(user: string, now: number): Promise<Usage>;
}

/**
 * Transfer: a record moved to another user in one atomic step.
 *
 * @since 0.5.0
 */
export interface TransferPrimitives {
  /**
   * In one atomic step, moves the live record `(user, handle)` and its
   * changelog to `(to, handle)` (same handle, state, expiry, creation time),
   * drops the old owner's lease on it, ends every grant in force on
   * `(user, handle)` (`endedAt = ctx.now`), and, when given, applies
   * `step.audit` to the moved record (its next version and entry, under
   * `to`) and stores `step.keep`; the old owner keeps nothing else. When
   * `user` has no live record of that handle it answers `"absent"`, when
   * `to` has any record of it (live or in the trash) `"taken"`, and changes
   * nothing. With `step.content` the same step also checks the record is
   * still at `content.version` and replaces the moved record's state,
   * preview and changelog texts by those given (`"changed"`, nothing
   * changed, when it is not, or when an entry it would move has no text
   * there: see {@link TransferStep.content}). The usage of both users follows
   * (`ctx.quota` is checked for `to`, as a mint would be, with the state the
   * record has after the move).
   *
   * @since 0.5.0 (as `Backend.transfer`)
   */
  move(
    user: string,
    handle: string,
    to: string,
    ctx: WriteContext,
    step?: TransferStep,
  ): Promise<TransferOutcome>;
}

/**
 * Sharing: grants of a handle to other users, and their alias handles.
 *
 * @since 0.5.0
 */
export interface GrantPrimitives {
  /**
   * Stores a new grant in one atomic step. When `grant.parent` is set, the
   * parent must be in force at `now` in that same step (else the error of
   * `grantEnded` of `backends/_grants.ts`, nothing stored), so a re-share
   * never outlives an `unshare` of its parent that returned first. With
   * `audit`, the same step applies it to the record
   * `(grant.owner, grant.handle)` ({@link AuditStep}), and answers
   * `"absent"`, storing nothing, when that record is not live (it was
   * deleted or moved since the store looked).
   *
   * @since 0.5.0 (as `Backend.putGrant`)
   */
  put(grant: GrantRecord, now: number, audit?: AuditStep): Promise<void | "absent">;
  /**
   * The grant whose id or alias handle is `idOrAlias` (ended and expired
   * ones included), or `null`.
   *
   * @since 0.5.0 (as `Backend.readGrant`)
   */
  read(idOrAlias: string): Promise<GrantRecord | null>;
  /**
   * In one atomic step, sets `endedAt = now` on the grant `grant` and on
   * every grant under it (re-shares, and theirs) that is not ended yet;
   * returns those it ended. With `audit`, when it ends any, the same step
   * applies it to the grant's record `(owner, handle)` if that is live
   * ({@link AuditStep}); a record deleted or moved gets no entry.
   *
   * @since 0.5.0 (as `Backend.endGrant`)
   */
  end(grant: string, now: number, audit?: AuditStep): Promise<GrantRecord[]>;
  /**
   * The grants of `(owner, handle)`, ended ones included, oldest first.
   *
   * @since 0.5.0 (as `Backend.grantsOf`)
   */
  of(owner: string, handle: string): Promise<GrantRecord[]>;
  /**
   * The grants to the user `to` (never those to `"*"`) that are not ended,
   * oldest first.
   *
   * @since 0.5.0 (as `Backend.grantsTo`)
   */
  to(to: string): Promise<GrantRecord[]>;
  /**
   * Deletes every grant whose `endedAt` or `expiresAt` is at or before
   * `before`, with its alias and every index entry that names it (its alias
   * then reads as absent, {@link GrantPrimitives.read} `null`); answers how
   * many went. A re-share never outlives its parent (it ends with it, and
   * expires no later), so no grant in force loses its parent.
   *
   * @since 0.5.0
   */
  sweep(before: number): Promise<number>;
}

/**
 * What an erase of one user removed, or would remove (SPEC 9.1).
 *
 * @since 0.5.0
 */
export interface ErasureCounts {
  /** Handle records: live, expired and in the trash. */
  handles: number;
  /**
   * Grant records: those on the user's handles (re-shares under them
   * included), those made to the user, and those the user made of others'
   * handles (with the re-shares under them); ended ones included.
   */
  grants: number;
}

/**
 * Optional (erase a user, SPEC 9.1): every trace of one user, gone.
 *
 * @since 0.5.0
 */
export interface ErasurePrimitives {
  /**
   * Counts what {@link ErasurePrimitives.erase} would remove now. Reads only.
   *
   * @param user The user.
   * @param now Epoch ms.
   * @returns The counts.
   */
  count(user: string, now: number): Promise<ErasureCounts>;
  /**
   * Removes every trace of `user`: its records live, expired and in the
   * trash with their changelogs, previews and state chunks, its idempotency
   * records, leases and usage, and the grants {@link ErasureCounts.grants}
   * names (their aliases answer as absent at once). Entries the user left in
   * other users' changelogs (`writer`, `via`) stay. A write of the user that
   * races the erase either lands before it and is removed, or fails; one
   * that starts after the erase returned begins anew. Idempotent: a second
   * call removes nothing and answers zeros.
   *
   * @param user The user.
   * @param now Epoch ms.
   * @returns What was removed.
   */
  erase(user: string, now: number): Promise<ErasureCounts>;
}

/**
 * A user's data key as a backend keeps it: wrapped by the key-encryption
 * key `keyId` (SPEC 9.2). Opaque to the backend.
 *
 * @since 0.5.0
 */
export interface StoredKey {
  /** The id of the key-encryption key that wrapped it. */
  keyId: string;
  /** The wrapped key (base64 text). */
  wrapped: string;
}

/**
 * Optional (encryption at rest, SPEC 9.2): the users' wrapped data keys.
 * A backend keeps at most one per user; the data backend, or another one
 * given as the store's `keyStore`, holds them.
 *
 * @since 0.5.0
 */
export interface KeyPrimitives {
  /**
   * The user's data key, or `null` when it has none.
   *
   * @param user The user.
   * @returns The stored key.
   */
  get(user: string): Promise<StoredKey | null>;
  /**
   * Stores `key` as the user's data key unless one is stored already, in one
   * atomic step, and answers the one stored after the call (the caller's,
   * or the one another process stored first).
   *
   * @param user The user.
   * @param key The new key.
   * @param now Epoch ms.
   * @returns The user's key.
   */
  create(user: string, key: StoredKey, now: number): Promise<StoredKey>;
  /**
   * Replaces the user's data key `from` by `to` (the same key wrapped anew,
   * by `keys rotate`) when `from` is still the stored one, in one atomic
   * step; answers whether it did.
   *
   * @param user The user.
   * @param from The key the caller read.
   * @param to Its new wrapping.
   * @returns Whether it was replaced.
   */
  rewrap(user: string, from: StoredKey, to: StoredKey): Promise<boolean>;
  /**
   * Deletes the user's data key (crypto-shredding, with `erase`); answers
   * whether one was there.
   *
   * @param user The user.
   * @returns Whether a key was deleted.
   */
  delete(user: string): Promise<boolean>;
  /**
   * One page of the stored keys, users in the engine's order, starting
   * strictly after `query.after`; paging until a page comes back shorter
   * than `limit` visits every user exactly once.
   *
   * @param query The page.
   * @returns The page's users with their keys.
   */
  list(query: { after?: string; limit: number }): Promise<{ user: string; key: StoredKey }[]>;
}

/**
 * One stored copy of state content, as {@link ContentPrimitives.scan} finds
 * it (SPEC 9.2, `mcpstate encrypt`).
 *
 * @since 0.5.0
 */
export interface StoredContent {
  /**
   * What it is: a record's state and preview, live or expired (`record`) or
   * in the trash (`trash`); a changelog entry (`entry`); or the record kept
   * as an idempotency key's result (`result`).
   */
  kind: "record" | "trash" | "entry" | "result";
  /** The user whose content it is. */
  user: string;
  /** The handle it belongs to (for a kept result, the handle of the record it holds). */
  handle: string;
  /**
   * Its texts: `[state]` or `[state, preview]` for a record, a trashed
   * record or a kept result; `[text]` for a changelog entry.
   */
  texts: string[];
  /**
   * Where the engine keeps it, in the engine's own terms: opaque to the
   * store, which hands it back to {@link ContentPrimitives.replace} as it is.
   */
  ref: unknown;
}

/**
 * One page of {@link ContentPrimitives.scan}.
 *
 * @since 0.5.0
 */
export interface ContentPage {
  /** The copies of the page (possibly none, when `next` is not `null`). */
  items: StoredContent[];
  /** Where the next page starts; `null` after the last page. */
  next: string | null;
}

/**
 * Optional (encryption at rest in place, SPEC 9.2): every stored copy of
 * state content, read and rewritten where it lies, so that `mcpstate
 * encrypt` can seal a store's plaintext while its servers keep running.
 *
 * @since 0.5.0
 */
export interface ContentPrimitives {
  /**
   * One page of every stored copy of state content, of every user: records
   * live, expired and in the trash, changelog entries (those a read no
   * longer returns but the engine still keeps included), and the records
   * kept for idempotency keys. Pages follow the engine's own order from
   * `query.after` (a `next` of an earlier page; absent: the start); a page
   * holds about `query.limit` copies. Paging until `next` is `null` visits
   * every copy stored for the whole of the scan at least once; a copy
   * written, moved or removed meanwhile may be visited or not. Reads only.
   *
   * @param query Where to start, and about how many copies.
   * @returns The page.
   */
  scan(query: { after?: string; limit: number }): Promise<ContentPage>;
  /**
   * In one atomic step, when the copy `item` names still holds exactly
   * `item.texts`, writes `texts` (as many) in their place and changes
   * nothing else: no version, time, listing order, expiry or changelog
   * moves, and no write is counted; the user's usage follows the state's new
   * size. Otherwise it writes nothing and answers the copy as it is now.
   *
   * @param item A copy, as {@link ContentPrimitives.scan} or an earlier
   *   `replace` answered it.
   * @param texts The new texts.
   * @returns Whether it replaced them, and otherwise the copy as it is now
   *   (`null`: gone).
   */
  replace(
    item: StoredContent,
    texts: string[],
  ): Promise<{ replaced: boolean; current: StoredContent | null }>;
}
