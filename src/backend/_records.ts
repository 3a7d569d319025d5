/**
 * The records, entries, outcomes and write context the backend interface
 * speaks of (see `backend.ts`), and the few pure helpers over them.
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
 * Result of {@link TransferPrimitives.move}: `"moved"`, or why nothing moved —
 * `"absent"` (no live record of the old owner), `"taken"` (the new owner
 * already has a record, live or trashed, with that handle) or `"changed"`
 * (a move with {@link TransferStep.content} found the record no longer the
 * one that content was made from).
 *
 * @since 0.5.0
 */
export type TransferOutcome = "moved" | "absent" | "taken" | "changed";

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
 * What a {@link TransferPrimitives.move} also does in its atomic step.
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
  /**
   * The record's content as the new owner is to hold it (encryption at
   * rest re-encrypts it under the new owner's key and binding): see
   * {@link TransferContent}. Absent: the content moves as it is.
   */
  content?: TransferContent;
}

/**
 * What a {@link TransferPrimitives.move} writes in place of the moved
 * record's content, in its atomic step: when the live record's version is
 * still `version`, the moved record holds `state` and `preview` (absent:
 * none), and each changelog entry it moves holds the text given for its
 * version (`at` kept). When the version differs, or an entry the move would
 * carry has no text here, the move answers `"changed"` and changes nothing,
 * so no entry keeps content made for the old owner. Texts of versions the
 * changelog no longer holds are ignored. The audit step's entry is appended
 * after, as given.
 *
 * @since 0.5.0
 */
export interface TransferContent {
  /** The version of the record the content was made from. */
  version: number;
  /** The state text. */
  state: string;
  /** The preview text; absent: the moved record has none. */
  preview?: string;
  /** The text of every changelog entry, by version. */
  entries: { version: number; text: string }[];
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
 * A user's usage: what {@link QuotaPrimitives.usage} answers.
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
   * rule of {@link LeasePrimitives.acquire} with `now` = {@link WriteContext.now}.
   * A backend that does answers the outcome as the result's `lease`; one
   * that leaves `lease` out of its answer (it did not take it, or the write
   * did not land) lets the store call {@link LeasePrimitives.acquire} after.
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
   * nothing: once {@link GrantPrimitives.end} returned, no write through the
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
 * A record in the trash, as {@link TrashPrimitives.list} returns it: its
 * metadata as it was when it was revoked, and the end of its undo window.
 *
 * @since 0.5.0
 */
export interface TrashedMeta extends HandleMeta {
  /** Epoch ms (store clock) until which {@link Backend.untrash} brings it back. */
  trashUntil: number;
}

/**
 * A page request for {@link TrashPrimitives.list}.
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
 * Result of {@link LeasePrimitives.acquire}.
 *
 * @since 0.4.0
 */
export interface LeaseOutcome {
  /** Whether the caller now holds the lease. */
  acquired: boolean;
  /** The lease in force after the call: the caller's, or the other holder's. */
  lease: LeaseRecord;
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
