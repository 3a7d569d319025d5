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

/** One stored record, as a backend keeps it. */
export interface HandleRecord {
  /** The handle, `${kind}_` + random characters. */
  handle: string;
  /** The kind the handle was minted with. */
  kind: string;
  /** The state as compact JSON text. */
  state: string;
  /** Starts at 1, grows by 1 per effective write. */
  version: number;
  /** Epoch ms of the mint. */
  createdAt: number;
  /** Epoch ms of the last effective write. */
  updatedAt: number;
  /** Epoch ms of expiry, or `null` for never. */
  expiresAt: number | null;
  /** Label of the last writer, if any. */
  lastWriter: string | null;
  /**
   * The schema version of the kind (see `HandleStore.kind`) the state was
   * last written under; `null` or absent for a state written without one.
   * A backend stores it as it is given and returns it with the record
   * (listing may leave it out).
   *
   * @since 0.5.0
   */
  schemaVersion?: number | null;
  /**
   * Lineage of a fork (see `HandleStore.fork`): the handle it was forked
   * from and that handle's version at the fork; `null` or absent for a
   * handle that is no fork. Set when the record is inserted and kept, as
   * given, by every later write of the record (a backend stores it beside
   * the metadata and returns it with the record; listing may leave it out).
   *
   * @since 0.5.0
   */
  forkedFrom?: ForkPoint | null;
  /**
   * A line of at most 120 characters describing the state, computed by the
   * store on each write and kept beside the metadata, so that a listing with
   * previews never reads a state. Absent on records written before previews
   * existed. A backend stores it as given, moves it with the record (trash,
   * import) and returns it with reads; {@link Backend.list} returns it only
   * when {@link ListQuery.previews} asks.
   *
   * @since 0.5.0
   */
  preview?: string;
}

/**
 * Where a fork comes from: a handle of the same user and its version at the fork.
 *
 * @since 0.5.0
 */
export interface ForkPoint {
  /** The origin handle. */
  handle: string;
  /** The origin's version the fork started from. */
  version: number;
}

/**
 * Result of {@link Backend.transfer}: `"moved"`, or why nothing moved —
 * `"absent"` (no live record of the old owner) or `"taken"` (the new owner
 * already has a record, live or trashed, with that handle).
 *
 * @since 0.5.0
 */
export type TransferOutcome = "moved" | "absent" | "taken";

/**
 * The changelog entry that a grant change or a transfer leaves (SPEC 8.2:
 * `share`, `unshare` and `transfer` leave entries), written in the same atomic
 * step as the change it records, as the record's next version. The backend
 * numbers it when it applies it, whatever the version is then (so a stream
 * of other writes never holds it off): in that step, when the record is
 * live, it sets `version = v = version + 1` and `updatedAt = at` (state,
 * expiry, `lastWriter` and everything else kept), appends the entry
 * {@link auditEntry}`(step, v)` and trims the handle's changelog by
 * `retention`, as any write does. A record that is not live gets no entry.
 *
 * @since 0.5.0
 */
export interface AuditStep {
  /** Epoch ms of the change: the entry's `at` and the record's `updatedAt`. */
  at: number;
  /**
   * The entry's JSON text after its opening `{"version":N,`: the members
   * that follow the version, and the closing brace.
   */
  tail: string;
  /** How much changelog to keep. */
  retention: Retention;
}

/**
 * The changelog entry of an {@link AuditStep} numbered `version`: its text is
 * `{"version":` + version + `,` + tail (SQL and Lua build the same string).
 *
 * @param step The audit step.
 * @param version The version the entry takes (the record's new version).
 * @returns The entry.
 * @since 0.5.0
 */
export function auditEntry(step: AuditStep, version: number): ChangeEntry {
  return { version, at: step.at, text: `{"version":${version},${step.tail}` };
}

/**
 * What a {@link Backend.transfer} also does in its atomic step.
 *
 * @since 0.5.0
 */
export interface TransferStep {
  /** The `transfer` entry, appended under the new owner (absent: no history kept). */
  audit?: AuditStep;
  /**
   * A grant to store in the same step: the old owner's `keep` (owner `to`,
   * grantee the old owner). Grants in force on the old `(user, handle)` end
   * at `ctx.now` in the same step, whether or not one is kept.
   */
  keep?: GrantRecord;
}

/** A record without its state: what listing returns. */
export type HandleMeta = Omit<HandleRecord, "state">;

/**
 * An idempotency claim that travels with a write. The backend looks the key
 * up in the same atomic step as the write: when a record for
 * `(user, scope, key)` exists, it applies nothing and returns
 * {@link Replayed}; otherwise it writes and, in the same atomic step, stores
 * `{ fingerprint, result }` where `result` is the record it returns (`null`
 * for removals), kept at least until `expiresAt`.
 */
export interface IdempotencyClaim {
  /** The caller's key. */
  key: string;
  /** The handle the write targets, or `""` for a mint. */
  scope: string;
  /** A digest of the call's arguments. */
  fingerprint: string;
  /** Epoch ms after which the record may be dropped. */
  expiresAt: number;
}

/** Answer of a write whose idempotency key was seen before: nothing was applied. */
export interface Replayed {
  /** Marks the replay. */
  replayed: true;
  /** The fingerprint stored with the first attempt. */
  fingerprint: string;
  /** The first attempt's result. */
  result: HandleRecord | null;
}

/**
 * One changelog entry. `text` is the entry's JSON, opaque to the backend; a
 * backend keeps entries per `(user, handle)` ordered by `version`.
 */
export interface ChangeEntry {
  /** The version the write produced. */
  version: number;
  /** Epoch ms of the write. */
  at: number;
  /** The entry as JSON text. */
  text: string;
}

/**
 * How much of a handle's changelog to keep. On every append a backend deletes,
 * in the same atomic step, the handle's entries with
 * `version <= entry.version - maxEntries` or `at < ctx.now - maxAgeMs`.
 */
export interface Retention {
  /** At most this many entries per handle. */
  maxEntries: number;
  /** No entry older than this. */
  maxAgeMs: number;
}

/**
 * Per-user limits a write carries (see {@link WriteContext.quota}); an
 * absent field is no limit.
 *
 * @since 0.5.0
 */
export interface QuotaLimits {
  /** At most this many live handles. */
  maxHandles?: number;
  /** At most this many UTF-8 bytes of state over the live handles. */
  maxBytes?: number;
  /** At most this many writes in one minute of the store clock (`floor(now / 60000)`). */
  writesPerMinute?: number;
}

/**
 * A user's usage: what {@link Backend.usage} answers.
 *
 * `handles` counts the user's records that are not in the trash, expired ones
 * included until they are reclaimed (swept, or dropped by the engine's TTL);
 * `bytes` is the sum of their states' UTF-8 lengths; `writesThisMinute`
 * counts the writes made with a {@link WriteContext.quota} in the current
 * minute of the store clock.
 *
 * @since 0.5.0
 */
export interface Usage {
  /** Live (not trashed, not yet reclaimed) handles. */
  handles: number;
  /** UTF-8 bytes of their states. */
  bytes: number;
  /** Writes counted in the current minute. */
  writesThisMinute: number;
}

/** What every write receives from the store. */
export interface WriteContext {
  /** The store's clock, epoch ms. */
  now: number;
  /**
   * How long after `expiresAt` an expired record must stay readable (so the
   * store can answer `handle_expired`). Backends with native TTL expire the
   * record at `expiresAt + graceMs`; others rely on {@link Backend.sweep}.
   */
  graceMs: number;
  /** Present when the caller passed an idempotency key. */
  idempotency?: IdempotencyClaim;
  /**
   * {@link Backend.insert}: the changelog entry of the mint, appended in the
   * same atomic step as the record. Absent: the store keeps no history.
   */
  entry?: ChangeEntry;
  /** How much changelog to keep; present whenever an entry is appended. */
  retention?: Retention;
  /**
   * {@link Backend.remove}: keep the record (and its changelog) in the trash
   * until this epoch ms instead of deleting it, so {@link Backend.untrash}
   * can bring it back. Absent: delete at once.
   */
  trashUntil?: number;
  /**
   * {@link Backend.insert}, {@link Backend.save}, {@link Backend.update}
   * (when it writes) and {@link Backend.untrash}: the user's limits. In the
   * same atomic step as the write, the backend runs `checkQuota` of
   * `backends/_quota.ts` against the user's usage before the write (a new
   * handle adds 1 handle, a state adds its size minus the old one's), which
   * throws `QuotaExceeded` and writes nothing; otherwise it writes, updates
   * the usage and counts one write in the current minute. On
   * {@link Backend.remove} it is never a refusal; a backend may use it to
   * keep the usage exact. Absent: no check and no count (the usage of
   * handles and bytes stays right regardless).
   *
   * @since 0.5.0
   */
  quota?: QuotaLimits;
  /**
   * {@link Backend.insert}, {@link Backend.save} and {@link Backend.update}:
   * an advisory lease for the writer, to take in the same atomic step as the
   * write, only when the write lands (`inserted`, `ok`, `written`), by the
   * rule of {@link Backend.acquireLease} with `now` = {@link WriteContext.now}.
   * A backend that does answers the outcome as the result's `lease`; one
   * that leaves `lease` out of its answer (it did not take it, or the write
   * did not land) lets the store call {@link Backend.acquireLease} after.
   * A replay takes no lease.
   *
   * @since 0.5.0
   */
  lease?: LeaseRecord;
  /**
   * {@link Backend.save} and {@link Backend.update}: the write goes through a
   * grant (see {@link GrantRecord}). In the same atomic step as the write, the
   * backend reads the grant `grant.grant` and, when it is absent, ended
   * (`endedAt !== null`) or expired (`expiresAt <= now`), throws the error
   * `grantEnded(grant, reason)` of `backends/_grants.ts` makes and writes
   * nothing: once {@link Backend.endGrant} returned, no write through the
   * grant lands.
   *
   * @since 0.5.0
   */
  grant?: GrantCheck;
}

/**
 * The grant a write goes through: what {@link WriteContext.grant} carries.
 *
 * @since 0.5.0
 */
export interface GrantCheck {
  /** The grant id. */
  grant: string;
  /** Its alias handle (for the error a caller reads). */
  alias: string;
}

/**
 * One grant, as a backend keeps it: the owner's handle shared with `to`
 * (a user, or `"*"` for anyone holding `alias`). Opaque to the backend but
 * for the fields its primitives read: `grant`, `alias`, `owner`, `handle`,
 * `parent`, `expiresAt`, `endedAt`.
 *
 * @since 0.5.0
 */
export interface GrantRecord {
  /** The grant id. */
  grant: string;
  /** The alias handle the grantee uses; unique across users. */
  alias: string;
  /** The user who owns the handle. */
  owner: string;
  /** The owner's handle. */
  handle: string;
  /** The grantee: a user id, or `"*"`. */
  to: string;
  /** `"read"`, `"append"`, `"patch"` or `"write"`. */
  rights: string;
  /** Who made the grant: the owner, or the grantee of `parent` re-sharing. */
  by: string;
  /** The grant this one re-shares, or `null` for the owner's own. */
  parent: string | null;
  /** Epoch ms of the share. */
  createdAt: number;
  /** Epoch ms after which the grant no longer holds, or `null`. */
  expiresAt: number | null;
  /** Epoch ms of its `unshare` (or of an ancestor's), or `null` while in force. */
  endedAt: number | null;
}

/**
 * The one-shot conditional write behind `save`: it applies only when the
 * stored version equals `expectVersion` and the record is not expired
 * (`expiresAt` is `null` or greater than `ctx.now`). The new version is
 * `expectVersion + 1`; `kind` and `createdAt` are kept.
 *
 * This is the one place where a backend applies rules of the store (the
 * version check, the expiry check, `version + 1`), and it does so on
 * purpose: those rules are what lets a save be a single engine step — one
 * `UPDATE … WHERE version = ?` on SQLite and PostgreSQL, one script on
 * Redis, a check-and-set of the head alone on Deno KV — where the same write
 * through {@link Backend.update} is a read, a change in JavaScript and a
 * write: a transaction of four round trips on PostgreSQL, a read and a
 * rewrite of the whole row on SQLite (several times slower at 256 KiB), two
 * round trips on Redis once another process wrote last, a read of a chunked
 * state it does not need on Deno KV. Measured against such a derived save in
 * the same run, the single step wins on those engines, so they keep it; the
 * memory backend, where it does not, derives `save` from `update`. A backend
 * is free to do the same.
 */
export interface ConditionalWrite {
  /** The version the writer read. */
  expectVersion: number;
  /** New state text. */
  state: string;
  /** New `updatedAt`. */
  updatedAt: number;
  /** New expiry, or `"keep"` to keep the stored one. */
  expiresAt: number | null | "keep";
  /** New writer label. */
  lastWriter: string | null;
  /**
   * New schema version of the record; absent: keep the stored one.
   *
   * @since 0.5.0
   */
  schemaVersion?: number;
  /**
   * The preview of the new state (see {@link HandleRecord.preview}); absent:
   * keep the stored one.
   *
   * @since 0.5.0
   */
  preview?: string;
}

/** Result of {@link Backend.save}: the written record, or the current one (`null`: none). */
export type SaveOutcome =
  | { ok: true; record: HandleRecord; lease?: LeaseOutcome }
  | { ok: false; current: HandleRecord | null };

/**
 * Result of {@link Backend.insert}: whether the record went in and, when it
 * did and the backend took `ctx.lease` with it, the lease's outcome.
 *
 * @since 0.5.0
 */
export interface InsertOutcome {
  /** Whether the record was inserted. */
  inserted: boolean;
  /** The outcome of `ctx.lease`, when it was taken in the same step. */
  lease?: LeaseOutcome;
}

/**
 * What a {@link Change} asks to write: the next record (same handle, `version`
 * one more) and, when the store keeps history, its changelog entry, appended
 * in the same atomic step (retention as in `ctx.retention`).
 */
export interface Step {
  /** The record to write. */
  record: HandleRecord;
  /** The changelog entry of this write. */
  entry?: ChangeEntry;
}

/**
 * A read-modify-write step run by {@link Backend.update} against the current
 * record: it returns the {@link Step} to write or `null` to write nothing, and
 * throws to abort. It is pure and may run more than once when a backend
 * retries an optimistic commit.
 */
export type Change = (current: HandleRecord | null) => Step | null;

/** Result of {@link Backend.update}. */
export interface UpdateOutcome {
  /** The record after the step (the current one when nothing was written). */
  record: HandleRecord | null;
  /** Whether anything was written. */
  written: boolean;
  /**
   * The outcome of `ctx.lease`, when it was taken in the same step (only
   * with `written: true`).
   *
   * @since 0.5.0
   */
  lease?: LeaseOutcome;
}

/** A page request for {@link Backend.list}. */
export interface ListQuery {
  /** Only records of this kind. */
  kind?: string;
  /** Leave out records with `expiresAt <= liveAt`; absent: include expired ones. */
  liveAt?: number;
  /** At most this many rows. */
  limit: number;
  /** Start after this position of the order (`updatedAt` desc, then `handle` asc). */
  after?: { updatedAt: number; handle: string };
  /**
   * Return each row's {@link HandleRecord.preview} (when it has one); absent
   * or `false`: rows carry none, and the engine need not read it.
   *
   * @since 0.5.0
   */
  previews?: boolean;
}

/**
 * A record in the trash, as {@link Backend.listTrash} returns it: its
 * metadata as it was when it was revoked, and the end of its undo window.
 *
 * @since 0.5.0
 */
export interface TrashedMeta extends HandleMeta {
  /** Epoch ms (store clock) until which {@link Backend.untrash} brings it back. */
  trashUntil: number;
}

/**
 * A page request for {@link Backend.listTrash}.
 *
 * @since 0.5.0
 */
export interface TrashQuery {
  /** At most this many rows. */
  limit: number;
  /** Start after this position of the order (`trashUntil` desc, then `handle` asc). */
  after?: { trashUntil: number; handle: string };
}

/**
 * An advisory lease on a handle, as a backend keeps it: who is at work on it
 * and until when. It lives beside the record and never touches it.
 *
 * @since 0.4.0
 */
export interface LeaseRecord {
  /** The holder's label (a writer label such as `laptop/claude-code`). */
  holder: string;
  /** Epoch ms when the lease lapses. */
  expiresAt: number;
}

/**
 * Result of {@link Backend.acquireLease}.
 *
 * @since 0.4.0
 */
export interface LeaseOutcome {
  /** Whether the caller now holds the lease. */
  acquired: boolean;
  /** The lease in force after the call: the caller's, or the other holder's. */
  lease: LeaseRecord;
}

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

/**
 * Whether a backend answer is a {@link Replayed} idempotent replay.
 *
 * @param x A backend answer.
 * @returns `true` for a replay.
 */
export function isReplayed(x: unknown): x is Replayed {
  return typeof x === "object" && x !== null && (x as Replayed).replayed === true;
}

/**
 * The metadata of a record (drops the state).
 *
 * @param r A record.
 * @returns Its metadata.
 */
export function metaOf(r: HandleRecord): HandleMeta {
  return {
    handle: r.handle,
    kind: r.kind,
    version: r.version,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    expiresAt: r.expiresAt,
    lastWriter: r.lastWriter,
    ...(r.schemaVersion == null ? {} : { schemaVersion: r.schemaVersion }),
    ...(r.forkedFrom == null ? {} : { forkedFrom: r.forkedFrom }),
    ...(r.preview === undefined ? {} : { preview: r.preview }),
  };
}
