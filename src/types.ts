/**
 * The public types of the store: snapshots and infos, the options and the
 * answers of every {@link HandleStore} method. The store, its feature
 * modules, the typed kinds and the wire form import them from here.
 *
 * @module
 */

import type { ForkPoint, HandleRecord, Usage } from "./backend.ts";
import type { Rights } from "./errors.ts";
import type { JsonObject } from "./json.ts";
import type { EncryptionOptions } from "./keyring.ts";
import type { PatchOp } from "./ops.ts";
import type { OutlineNode, PathsRead } from "./outline.ts";

/** Metadata of a handle, as `list` returns it. */
export interface HandleInfo {
  /** The handle. */
  handle: string;
  /** Its kind. */
  kind: string;
  /** Current version (1 after mint). */
  version: number;
  /** When it was minted. */
  createdAt: Date;
  /** When it was last written. */
  updatedAt: Date;
  /** When it expires, or `null` for never. */
  expiresAt: Date | null;
  /** Label of the last writer. */
  lastWriter: string | null;
  /**
   * The schema version of the kind (see {@link HandleStore.kind}) the state
   * was last written under; absent when it was written without one, and in
   * listings (`list`, `listPage`, `trash`), which read metadata only.
   *
   * @since 0.5.0
   */
  schemaVersion?: number;
  /**
   * Where a fork comes from (see {@link HandleStore.fork}): the origin handle
   * and its version at the fork (`forked_from` in the wire form); absent for
   * a handle that is no fork, and in listings.
   *
   * @since 0.5.0
   */
  forkedFrom?: ForkPoint;
  /**
   * Listings with `previews: true` only: a line of at most 120 characters
   * describing the state (see `previewOf`), kept beside the metadata on each
   * write. Absent for a handle last written before previews existed.
   *
   * @since 0.5.0
   */
  preview?: string;
  /**
   * Present while someone holds an advisory lease on the handle (see
   * {@link HandleStore.lease}): who is at work on it, and until when.
   *
   * @since 0.4.0
   */
  activeLease?: ActiveLease;
  /**
   * On a handle shared with the caller (an alias handle, see
   * {@link HandleStore.share}): the owner who shared it.
   *
   * @since 0.5.0
   */
  sharedBy?: string;
  /**
   * On a handle shared with the caller: the rights its grant gives.
   *
   * @since 0.5.0
   */
  rights?: Rights;
}

/**
 * An advisory lease in force: another session (or this one) says it is at
 * work on a handle. It never blocks a write.
 *
 * @since 0.4.0
 */
export interface ActiveLease {
  /** The holder's label. */
  holder: string;
  /** When the lease lapses unless renewed. */
  expiresAt: Date;
}

/**
 * Answer of {@link HandleStore.lease}: whether the caller holds the lease
 * now, and the lease in force (the caller's, or the other holder's).
 *
 * @since 0.4.0
 */
export interface LeaseResult extends ActiveLease {
  /** `true` when the caller holds it; `false` when another holder does. */
  acquired: boolean;
}

/**
 * Options of {@link HandleStore.lease}.
 *
 * @since 0.4.0
 */
export interface LeaseOptions extends UserOption {
  /** Who takes the lease (a writer label); the holder others will see. */
  writer: string;
  /** How long it lasts, 1 to 86400 seconds; taking it again renews it. */
  seconds: number;
}

/**
 * Options of {@link HandleStore.release}.
 *
 * @since 0.4.0
 */
export interface ReleaseOptions extends UserOption {
  /** The holder that took the lease. */
  writer: string;
}

/**
 * Options of {@link HandleStore.watch}.
 *
 * @since 0.4.0
 */
export interface WatchOptions extends UserOption {
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
  /**
   * Re-read at least this often, in ms, even without a change event (a
   * safety net for feeds that can drop events during a reconnect).
   * Default 5,000; at least 10.
   */
  pollMs?: number;
}

/** A handle's metadata and state. */
export type Snapshot<S = JsonObject> = HandleInfo & {
  /** The state. */
  state: S;
};

/** Options of {@link HandleStore}. */
export interface HandleStoreOptions {
  /** Returns the current time in epoch ms (tests inject a fake clock). Default `Date.now`. */
  clock?: () => number;
  /** The state size cap in bytes of compact JSON. Default 1,048,576. */
  maxStateBytes?: number;
  /**
   * The most ops one `patch` may hold; a longer patch is a `patch_error` with
   * reason `too_many_ops` (details `limit`, `count`) and applies nothing. Default 1,000.
   */
  maxPatchOps?: number;
  /** Days an expired handle still answers `handle_expired` before it is reclaimed. Default 7. */
  expiredGraceDays?: number;
  /** How often the background reclaim runs, in ms (backends without native TTL). Default 10 minutes; 0 turns it off. */
  reclaimIntervalMs?: number;
  /**
   * The changelog: how much to keep per handle, or `false` to keep none (then
   * `save` is a single conditional write, `changesSince` always answers
   * `truncated`, and stale writes carry no `changes`).
   */
  history?: HistoryOptions | false;
  /** Days a revoked handle stays in the trash, restorable. Default 7; 0 deletes at once. */
  trashDays?: number;
  /**
   * Per-user quotas, each a whole number ≥ 1 (absent: no limit). A write over
   * one is `QuotaExceeded` and writes nothing. Default: no quotas, and no
   * cost on writes.
   *
   * @since 0.5.0
   */
  quotas?: QuotaOptions;
  /**
   * Encryption at rest (SPEC 9.2): key-encryption keys by id, the current
   * one, and optionally a backend URL that keeps the wrapped data keys.
   * Absent: content is stored as it is, and content sealed by a store with
   * keys is refused as `no_key`.
   *
   * @since 0.5.0
   */
  encryption?: EncryptionOptions;
}

export type { EncryptionOptions } from "./keyring.ts";

/**
 * Per-user quotas (see {@link HandleStoreOptions.quotas}). They hold across
 * processes and instances sharing a backend: each backend changes a user's
 * usage in the same atomic write as the state. Deleting and shrinking are
 * never refused.
 *
 * @since 0.5.0
 */
export interface QuotaOptions {
  /** At most this many live handles per user (trashed ones do not count). */
  maxHandles?: number;
  /** At most this many UTF-8 bytes of state over a user's live handles. */
  maxBytes?: number;
  /** At most this many writes (mint, save, patch that changes something, touch, restore) per user per minute. */
  writesPerMinute?: number;
}

/**
 * A user's usage, as {@link HandleStore.usage} reports it.
 *
 * @since 0.5.0
 */
export type UsageInfo = Usage;

/** Retention of the changelog. */
export interface HistoryOptions {
  /** At most this many entries per handle. Default 100. */
  maxEntries?: number;
  /** No entry older than this many days. Default 30. */
  maxAgeDays?: number;
  /**
   * An entry larger than this (UTF-8 bytes of its JSON) is kept as a marker
   * with `omitted: true` instead of its diff. Default 32,768.
   */
  maxEntryBytes?: number;
}

/**
 * One changelog entry, in the wire form: `version`, `at` (ISO-8601 UTC),
 * `writer`, `op` (`mint`, `save`, `patch`, `touch`, `restore`, `fork` — the
 * mint of a fork, with `from` —, `merge` — a fork merged back, with
 * `from` and `base_version` —, `share` — with `grant`, `to`, `rights`,
 * `expires_at` and, for a re-share, `via` —, `unshare` — with `grant` — and
 * `transfer` — with `from`, `to` and `keep`; these three change no state),
 * and what
 * changed: `ops` (patch), `patch` (an RFC 6902 JSON Patch from the previous
 * state, mint and save), `expires_at` (touch), or `omitted: true` when the
 * entry was too large to keep.
 */
export type ChangeInfo = {
  /** The version this write produced. */
  version: number;
  /** When, ISO-8601 UTC. */
  at: string;
  /** Who wrote. */
  writer: string | null;
  /** What kind of write. */
  op:
    | "mint"
    | "save"
    | "patch"
    | "touch"
    | "restore"
    | "fork"
    | "merge"
    | "share"
    | "unshare"
    | "transfer";
} & Record<string, unknown>;

/** Answer of {@link HandleStore.changesSince}. */
export type ChangesSince<S = JsonObject> =
  | {
    /** The log reaches back far enough. */
    truncated: false;
    /** The entries after the asked version, oldest first. */
    changes: ChangeInfo[];
    /** The current version (the last entry's). */
    version: number;
  }
  | {
    /** The log no longer reaches back that far. */
    truncated: true;
    /** The current snapshot: start over from it. */
    current: Snapshot<S>;
  };

/**
 * Which optional operations a store can run: those that need a primitive a
 * backend may lack. Every built-in backend has them all.
 *
 * @since 0.5.0
 */
export interface HandleStoreCapabilities {
  /** {@link HandleStore.users} works: the backend lists its users. */
  users: boolean;
  /** {@link HandleStore.importRecord} writes: the backend imports records as given. */
  importRecord: boolean;
  /**
   * {@link HandleStore.share}, `unshare` and `grants` work: the backend keeps
   * grants and checks them inside the writes they govern.
   *
   * @since 0.5.0
   */
  grants: boolean;
}

/**
 * Options of {@link HandleStore.users}.
 *
 * @since 0.5.0
 */
export interface UsersOptions {
  /** Start after this user: the last one of the previous page. */
  after?: string;
  /** Page size, 1 to 10,000; default 1,000. A shorter page is the last. */
  limit?: number;
}

/**
 * Options of {@link HandleStore.importRecord}.
 *
 * @since 0.5.0
 */
export interface ImportRecordOptions {
  /** Check the record and compare it with what the store holds, but write nothing. */
  dryRun?: boolean;
}

/**
 * Answer of {@link HandleStore.importRecord}: what it did (with `dryRun`,
 * what it would do) and the record the store holds under that handle
 * afterwards, expired or not (`null`: none).
 *
 * - `inserted`: the store had no record with that handle.
 * - `replaced`: it held an older version, now overwritten (its changelog is dropped).
 * - `kept`: it held the same or a newer version, left as it was.
 * - `expired`: the record expired longer ago than the grace period (by the
 *   store's clock), so nothing of it is written or read.
 *
 * @since 0.5.0
 */
export type ImportResult =
  | {
    /** What happened: written, or left as it was. */
    outcome: "inserted" | "replaced" | "kept";
    /** The record the store holds under the handle now; `null` when none. */
    current: HandleRecord | null;
  }
  | {
    /** The record was past its grace period: skipped. */
    outcome: "expired";
  };

/** Who is calling: every read and write is scoped to a user. */
export interface UserOption {
  /** The user the state belongs to. */
  user: string;
}

/**
 * Options of {@link HandleStore.fork} and {@link HandleStore.mergeBack}.
 *
 * @since 0.5.0
 */
export interface ForkOptions extends UserOption {
  /** The writer label of the write (the fork's mint, or the origin's merge). */
  writer?: string;
}

/**
 * Answer of {@link HandleStore.mergeBack}: the origin's snapshot after the
 * merge, and which fork version was merged into it.
 *
 * @since 0.5.0
 */
export type MergeResult<S = JsonObject> = Snapshot<S> & {
  /** The fork and its version whose changes were merged. */
  mergedFrom: ForkPoint;
};

/**
 * Options of {@link HandleStore.transfer}.
 *
 * @since 0.5.0
 */
export interface TransferOptions extends UserOption {
  /** The user who gets the handle. */
  to: string;
  /**
   * Rights the old owner keeps through a grant of the new owner (`"read"`,
   * `"append"`, `"patch"` or `"write"`), stored in the same atomic step as
   * the move; its alias shows in the old owner's `list` (with `sharedBy`)
   * and in the new owner's `grants`. Absent: the old owner keeps nothing.
   */
  keep?: string;
}

/**
 * The advisory lease a write takes for its writer (see
 * {@link HandleStore.lease}), in the same step as the write on every
 * built-in backend: one round trip with the write instead of two after it.
 * It is taken only when the write lands; another holder's lease in force is
 * left alone and answered as the result's `activeLease`. It never fails a
 * write that landed.
 *
 * @since 0.5.0
 */
export interface WriteLeaseOption {
  /** How long the lease lasts: more than 0 and at most 86,400 seconds. */
  seconds: number;
  /** Who holds it; default the write's `writer` (one of the two is needed). */
  holder?: string;
}

/** Options of {@link HandleStore.mint}. */
export interface MintOptions extends UserOption {
  /** Lifetime in days (0 < ttlDays ≤ 36525); absent or `null`: never expires. */
  ttlDays?: number | null;
  /** Label of the writer (`laptop/claude-code`). */
  writer?: string;
  /** A retry with the same key returns the first result and applies nothing twice. */
  idempotencyKey?: string;
  /** Random characters after `${kind}_`: 8 (default) to 64. 26 gives 130 bits. */
  randomChars?: number;
  /**
   * Take this lease on the new handle with the mint (a new handle has no
   * other holder, so it is always taken).
   *
   * @since 0.5.0
   */
  lease?: WriteLeaseOption;
}

/** Options of {@link HandleStore.save}. */
export interface SaveOptions extends UserOption {
  /** The version the new state was based on. */
  expectVersion: number;
  /** Label of the writer. */
  writer?: string;
  /** `undefined` keeps the stored expiry, `null` clears it, a number renews it from now. */
  ttlDays?: number | null;
  /** See {@link MintOptions.idempotencyKey}. */
  idempotencyKey?: string;
  /**
   * What a stale `expectVersion` does. `"fail"` (default, as mcpstate 0.2):
   * `StaleWrite`, nothing written. `"merge"`: when the caller's changes since
   * `expectVersion` and everyone else's touch disjoint places, both are kept
   * and the save succeeds with `merged: true`; otherwise `StaleWrite` whose
   * details add `conflicts` (the JSON Pointers both sides changed), or
   * `reason: "history_unavailable"` when the changelog no longer reaches
   * back to `expectVersion`. See `merge.ts` for what "disjoint" means.
   *
   * @since 0.5.0
   */
  onConflict?: "fail" | "merge";
  /** See {@link PatchOptions.lease}. */
  lease?: WriteLeaseOption;
}

/**
 * Answer of {@link HandleStore.save}: the new snapshot. A save with
 * `onConflict: "merge"` that merged its changes with others' carries
 * `merged: true` and `baseVersion` (its `expectVersion`), and its `state` is
 * the merged state.
 *
 * @since 0.5.0
 */
export type SaveResult<S = JsonObject> = Snapshot<S> & {
  /** Present (`true`) when the caller's changes were merged with writes made since `baseVersion`. */
  merged?: true;
  /** The version the merged changes were based on: the save's `expectVersion`. */
  baseVersion?: number;
};

/** Options of {@link HandleStore.patch}. */
export interface PatchOptions extends UserOption {
  /** Label of the writer. */
  writer?: string;
  /** See {@link MintOptions.idempotencyKey}. */
  idempotencyKey?: string;
  /**
   * Take this lease with the write; the result's `activeLease` is then the
   * lease in force after it (the caller's, or another holder's).
   *
   * @since 0.5.0
   */
  lease?: WriteLeaseOption;
}

/** Options of {@link HandleStore.touch}. */
export interface TouchOptions extends UserOption {
  /** New lifetime in days from now, or `null` for never. */
  ttlDays: number | null;
  /** Label of the writer. */
  writer?: string;
  /** See {@link MintOptions.idempotencyKey}. */
  idempotencyKey?: string;
  /** See {@link PatchOptions.lease}. */
  lease?: WriteLeaseOption;
}

/** Options of {@link HandleStore.revoke}. */
export interface RevokeOptions extends UserOption {
  /** See {@link MintOptions.idempotencyKey}. */
  idempotencyKey?: string;
}

/** Options of {@link HandleStore.list}. */
export interface ListOptions {
  /** Only handles of this kind. */
  kind?: string;
  /** Include expired handles still in their grace period. */
  includeExpired?: boolean;
  /**
   * Give each handle its `preview` (see {@link HandleInfo.preview}); read
   * from beside the metadata, never from the state.
   *
   * @since 0.5.0
   */
  previews?: boolean;
}

/** Options of {@link HandleStore.listPage}. */
export interface ListPageOptions extends ListOptions {
  /** Page size, 1 to 500; default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string | null;
  /**
   * A budget for the page in its wire form: the compact JSON (UTF-8) of
   * `{"handles": [...], "next_cursor": ...}`, each handle as {@link toPayload}
   * renders it, stays within it. A page that would be larger holds fewer
   * handles and ends with a `nextCursor` after its last one; it always holds
   * at least one handle, however large. A whole number, at least 1.
   *
   * @since 0.5.0
   */
  maxBytes?: number;
}

/** One page of {@link HandleStore.listPage}. */
export interface HandlePage {
  /** The handles of this page, newest `updatedAt` first. */
  handles: HandleInfo[];
  /** Pass back to get the next page; `null` on the last page. */
  nextCursor: string | null;
}

/**
 * Options of {@link HandleStore.trash}.
 *
 * @since 0.5.0
 */
export interface TrashOptions {
  /** Page size, 1 to 500; default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string | null;
}

/**
 * A revoked handle in the trash: its metadata as it was revoked, and until
 * when {@link HandleStore.restore} brings it back.
 *
 * @since 0.5.0
 */
export interface TrashedInfo extends HandleInfo {
  /** The end of its undo window; after it the handle is gone for good. */
  restorableUntil: Date;
}

/**
 * One page of {@link HandleStore.trash}.
 *
 * @since 0.5.0
 */
export interface TrashPage {
  /** The trashed handles of this page, newest-deleted first. */
  handles: TrashedInfo[];
  /** Pass back to get the next page; `null` on the last page. */
  nextCursor: string | null;
}

/**
 * Options of {@link HandleStore.read}.
 */
export interface ReadOptions extends UserOption {
  /**
   * The budget: the most bytes of compact JSON (UTF-8) the state, or the
   * values of `paths`, may take; a whole number, at least 256. Absent: no limit.
   */
  maxBytes?: number;
  /**
   * Up to 32 paths, dotted (`"profile.tags"`) or JSON Pointers
   * (`"/sources/0"`), to read instead of the whole state.
   */
  paths?: readonly string[];
}

/**
 * Answer of {@link HandleStore.read} without `paths`: the handle's metadata
 * and either the whole `state` (`truncated: false`) or, when it is over
 * `maxBytes`, an `outline` of it (`truncated: true`). `sizeBytes` is the
 * size of the whole state either way.
 */
export type StateRead<S = JsonObject> =
  & HandleInfo
  & (
    | {
      /** The whole state. */
      state: S;
      /** Nothing was left out. */
      truncated: false;
      /** The UTF-8 size of the state's compact JSON. */
      sizeBytes: number;
    }
    | {
      /** An outline of the state, within the budget. */
      outline: OutlineNode;
      /** Something was left out: read the paths the outline names. */
      truncated: true;
      /** The UTF-8 size of the whole state's compact JSON. */
      sizeBytes: number;
    }
  );

/**
 * Answer of {@link HandleStore.read} with `paths`: the handle's metadata and
 * the `values` of the paths, the `outline` of each value over its share of
 * the budget and the `missing` paths, as {@link readPaths} gives them.
 */
export type PathsReadResult = HandleInfo & PathsRead;

/** Answer of {@link HandleStore.read}. */
export type ReadResult<S = JsonObject> = StateRead<S> | PathsReadResult;

/**
 * Answer of {@link HandleStore.stateAt}: a handle's state at an earlier version.
 *
 * @since 0.5.0
 */
export interface StateAt<S = JsonObject> {
  /** The handle. */
  handle: string;
  /** Its kind. */
  kind: string;
  /** The version asked for. */
  version: number;
  /** The state at that version. */
  state: S;
}

/**
 * What a typed kind ({@link Kind}) needs of the store it is bound to: the
 * reads and writes it types. {@link HandleStore} is one.
 *
 * @internal
 */
export interface KindStore {
  /** As {@link HandleStore.mint}. */
  mint(kind: string, state: JsonObject, options: MintOptions): Promise<string>;
  /** As {@link HandleStore.get}. */
  get<S = JsonObject>(handle: string, options: UserOption): Promise<Snapshot<S>>;
  /** As {@link HandleStore.read}. */
  read<S = JsonObject>(handle: string, options: ReadOptions): Promise<ReadResult<S>>;
  /** As {@link HandleStore.save}. */
  save<S extends JsonObject = JsonObject>(
    handle: string,
    state: S,
    options: SaveOptions,
  ): Promise<SaveResult<S>>;
  /** As {@link HandleStore.patch}. */
  patch<S = JsonObject>(
    handle: string,
    ops: readonly PatchOp[],
    options: PatchOptions,
  ): Promise<Snapshot<S>>;
}
