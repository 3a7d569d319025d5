/**
 * The Deno KV backend (`denokv:///…`, `denokv:///:memory:`,
 * `denokv+https://…`): a local KV file, an in-memory KV, or a KV Connect
 * endpoint (Deno Deploy, or a self-hosted `denokv` server) shared by server
 * instances on different hosts.
 *
 * Deno KV limits a value to 65,536 bytes and one atomic commit to 819,200
 * bytes of mutations and 100 checks, while a state may be 1 MiB or more. So:
 *
 * - A state of up to 62 KiB lives inside its record's head key. A larger one
 *   is written first as immutable chunks of UTF-8 (keys carry a fresh id, so
 *   no reader ever sees them before they are complete), then one small
 *   atomic commit checks the head's versionstamp and swaps the head to the
 *   new chunk set. A reader reads the head, then that chunk set; when a
 *   newer write has already released it, the reader starts over.
 * - Every chunk set is announced by an intent key written with its first
 *   chunks. The head swap deletes the intent; a writer that lost a race
 *   releases its chunks at once, and `sweep` collects the chunks of a writer
 *   that crashed (intents older than `orphanAgeMs`, 5 minutes by default).
 *   The collector and the head swap both check the intent's versionstamp,
 *   so a chunk set is either adopted by a head or collected, never both.
 * - `update` (patch, touch) and `save` are optimistic: read, compute, commit
 *   with a versionstamp check, and on a conflict retry after a bounded,
 *   jittered backoff. A conflict means nothing was written, so a patch is
 *   never applied twice or lost. Writes of one record from one backend
 *   instance take turns, so only other processes and instances race.
 *   "database is locked" from another process on the same file is retried
 *   like a conflict.
 * - Listing reads metadata-only index keys ordered by `updatedAt` (newest
 *   first), written in the same commit as the head; idempotency records are
 *   written in that commit too and carry `expireIn`.
 * - Expiry is judged by the store from `expiresAt`. Expired records are
 *   reclaimed by `sweep` (the store runs it in the background), which uses
 *   an expiry index, so {@link DenoKvBackend.reclaimsExpired} is `false`.
 * - The changelog: one key per entry, `[…, "u", user, "log", handle, logId,
 *   version]`, set in the same atomic commit as the head swap of its write,
 *   so an entry never exists without its write nor a write without its
 *   entry. The head names its log (`logId`, fresh whenever a log starts) and
 *   its first live version; entries from there to the head's version are
 *   all present, and reads never look below it. Retention trims the oldest
 *   end in that same commit: entries more than `maxEntries` behind, then
 *   those older than `maxAgeMs` (the head keeps a lower bound of its
 *   entries' ages, so the log is only read when one may be too old). Up to
 *   64 trimmed entries are deleted in the commit; a longer run (after
 *   `maxEntries` was lowered, or a long idle spell) is handed to the
 *   collector and is invisible meanwhile, so `changes` never returns an
 *   entry the last append's retention let go. Age is trimmed from the
 *   oldest end only, which keeps the log contiguous (with writers' clocks
 *   skewed, an entry just past the cutoff may wait behind a younger one);
 *   as the interface defines it, a log is trimmed when it is appended to,
 *   not while it sits idle. An entry larger than one KV value (65,280
 *   bytes; the store's default cap is 32 KiB) is stored as its
 *   `{"version","at","writer","op","omitted":true}` marker, which the store
 *   reads as a log that no longer reaches back. A write without an entry
 *   (a store with `history: false`, an imported replacement) drops the log,
 *   which could no longer be contiguous; removing or reclaiming a record
 *   drops it too.
 * - The trash: a revoke with an undo window moves the head to a trash key in
 *   one commit (chunks and changelog stay where they are, under ids no
 *   other record uses); the handle then reads as absent but cannot be
 *   minted again. Bringing it back moves the head back in one commit that
 *   checks both keys. `sweep` purges trash past its window, with its chunks
 *   and changelog, through a trash index ordered by time.
 * - Advisory leases: one key per handle, `[…, "u", user, "l", handle]`
 *   beside the head, holding `{ holder, expiresAt }`. Taking and releasing
 *   one is a commit that checks that key's versionstamp; the head, chunks
 *   and changelog are never touched. Whether a lease is in force is judged
 *   by `expiresAt` against the store's clock; the key also carries
 *   `expireIn`, so Deno KV reclaims it once it lapses (a local KV file
 *   deletes expired keys when it is opened and about once a minute after;
 *   they stay readable until then), and `sweep` of one user drops that
 *   user's lapsed ones.
 * - Change feed: `kv.watch` on the head key of every watched handle, and
 *   this object's own commits notify at once. Measured with Deno 2.9: on a
 *   local KV file, `kv.watch` hears every `Deno.Kv` of the same process
 *   (within milliseconds) but never a commit made by another OS process on
 *   the same file, not even seconds later. So a backend not opened on a KV
 *   Connect endpoint also polls the watched heads' versionstamps
 *   (`getMany`, every 100 ms while anyone listens); a KV Connect endpoint
 *   delivers other instances' commits to `kv.watch` itself.
 *
 * `Deno.openKv` needs `--unstable-kv` (or `"unstable": ["kv"]` in
 * `deno.json`); importing this module does not.
 *
 * @example An in-memory KV you open yourself
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { DenoKvBackend } from "@mcpstate/core/denokv";
 *
 * const kv = await Deno.openKv(":memory:");
 * const store = new HandleStore(new DenoKvBackend(kv));
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * await store.close();
 * kv.close(); // an injected Deno.Kv stays the caller's to close
 * ```
 *
 * @example A KV file, or a self-hosted denokv server, through a URL
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 *
 * await using local = await HandleStore.fromUrl("denokv:///~/.mcpstate/state.kv");
 * // DENO_KV_ACCESS_TOKEN must hold the server's access token:
 * await using shared = await HandleStore.fromUrl("denokv+https://kv.example.com");
 * ```
 *
 * @module
 */

import { createHash } from "node:crypto";
import { dirname } from "node:path";
import type {
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  Retention,
  SaveOutcome,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { BackendError, InvalidArgument, McpStateError, redact } from "../errors.ts";
import { filePathOf } from "./_file_url.ts";
import { compareListOrder, Listeners } from "./_shared.ts";

export type {
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  Retention,
  SaveOutcome,
  Step,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";

/** Largest state (bytes) kept inside the head key; larger states are chunked. */
const INLINE_MAX = 63_488;
/** Bytes per chunk: Deno KV's value limit. */
const CHUNK_BYTES = 65_536;
/** Chunks per commit: 12 × 64 KiB plus keys stays under the 819,200-byte commit limit. */
const CHUNKS_PER_COMMIT = 12;
/** Superseded chunks deleted inside a head commit; more are handed to the collector. */
const DELETE_IN_COMMIT = 48;
/** Keys deleted per commit when collecting a large chunk set. */
const DELETE_BATCH = 100;
/** Changelog entries deleted inside a write's commit; a longer run is handed to the collector. */
const LOG_DELETE_IN_COMMIT = 64;
/**
 * Largest changelog entry text (bytes) kept as it is: one entry is one KV
 * value. A larger one is stored as an `omitted` marker.
 */
const ENTRY_MAX = 65_280;
/** Changelog entries read per batch when retention looks for the first one young enough. */
const AGE_SCAN_BATCH = 16;
/** A user name longer than this (UTF-8 bytes) is keyed by its SHA-256. */
const USER_PART_MAX = 400;
/** A handle or idempotency key longer than this (UTF-8 bytes) is keyed by its SHA-256. */
const NAME_PART_MAX = 200;
/** Keys per `getMany` call: Deno KV's limit. */
const GET_MANY_MAX = 10;
/** How often (ms) the heads of watched handles are polled for other processes' commits. */
const FEED_POLL_MS = 100;
const LOCKED_RE = /database (table )?is locked|SQLITE_BUSY|database is busy/i;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Options of {@link DenoKvBackend}. */
export interface DenoKvBackendOptions {
  /**
   * Key prefix under which every key of this backend lives, so one Deno KV
   * can hold other data too. At most 4 parts of at most 64 characters or
   * bytes each. Default `["mcpstate"]`.
   */
  prefix?: Deno.KvKey;
  /**
   * Age (ms of wall-clock time) after which `sweep` collects the chunks of a
   * write that never swapped its head in (a crashed writer's). Default
   * 300,000 (5 minutes).
   */
  orphanAgeMs?: number;
  /**
   * How long (ms) one call keeps retrying when other writers keep winning
   * the same record, or another process keeps the KV file locked, before it
   * gives up with `backend_error`. Default 30,000.
   */
  contentionTimeoutMs?: number;
  /**
   * Whether {@link DenoKvBackend.close} also closes the `Deno.Kv`. Default
   * `false`: an injected `Deno.Kv` stays the caller's;
   * {@link DenoKvBackend.fromUrl} sets it.
   */
  closeKv?: boolean;
}

/** What a `denokv` URL points at, as {@link parseDenoKvUrl} reads it. */
export interface DenoKvTarget {
  /** `"memory"` for `denokv:///:memory:`, `"file"` for a local file, `"remote"` for KV Connect. */
  kind: "memory" | "file" | "remote";
  /** The argument for `Deno.openKv`: `:memory:`, a file path, or an `https://`/`http://` URL. */
  path: string;
}

/** The head of a record: its metadata and its state (inline or a chunk set). */
interface Head {
  /** Kind. */
  k: string;
  /** Version. */
  v: number;
  /** createdAt. */
  c: number;
  /** updatedAt. */
  u: number;
  /** expiresAt. */
  e: number | null;
  /** lastWriter. */
  l: string | null;
  /** Id of the write that produced this head (to recognise our own commit). */
  w: string;
  /** The state, inline. */
  b?: Uint8Array;
  /** Id of the chunk set holding the state. */
  d?: string;
  /** Number of chunks. */
  n?: number;
  /** Size of the state in bytes. */
  z: number;
  /** The bytes are UTF-16LE (the text was not well-formed Unicode), not UTF-8. */
  x?: true;
  /**
   * Id of the changelog: entries `g`…`v` all exist under it. Absent: no
   * changelog. A fresh id starts every new log, so a dropped one is collected
   * without ever touching a later one.
   */
  L?: string;
  /** First live changelog version (entries below it are being collected). */
  g?: number;
  /** No live entry is older than this (epoch ms), up to clock skew between writers. */
  ga?: number;
}

/** A trashed record: its head as it was, and the end of its undo window. */
interface Trashed {
  /** The head, unchanged (its chunks and changelog stay where they are). */
  h: Head;
  /** Epoch ms until which it can be brought back. */
  t: number;
}

/** One changelog entry's value (its version is the last key part). */
interface LogValue {
  /** Epoch ms of the write. */
  a: number;
  /** The entry text. */
  b: Uint8Array;
  /** The bytes are UTF-16LE, not UTF-8. */
  x?: true;
}

/** A list index entry: metadata only. */
interface IndexEntry {
  h: string;
  k: string;
  v: number;
  c: number;
  u: number;
  e: number | null;
  l: string | null;
}

/** An idempotency record. */
interface IdemValue {
  /** Fingerprint of the first call. */
  f: string;
  /** Expiry (store clock). */
  t: number;
  /** The first call's result (metadata), `null` for a removal. */
  r: IndexEntry | null;
  /** Its state, inline. */
  b?: Uint8Array;
  /** Or the id and size of a chunk copy under the idempotency subspace. */
  d?: string;
  n?: number;
  z?: number;
  x?: true;
}

/**
 * An intent: a chunk set that no head has adopted yet, or keys to collect —
 * `n` chunks, or, with `l`, the changelog entries `f`…`f + n - 1` of log `l`.
 */
interface Intent {
  n: number;
  dead?: true;
  l?: string;
  f?: number;
}

/** What a write does to the changelog: the head's log fields after it, and the keys to write or drop. */
interface LogPlan {
  L?: string;
  g?: number;
  ga?: number;
  /** The entry to append. */
  entry?: { version: number; value: LogValue };
  /** Runs of entries to drop: `[log id, first version, last version]`. */
  drops: [string, number, number][];
}

/** Encoded state text. */
interface Encoded {
  bytes: Uint8Array;
  utf16: boolean;
}

/** A chunk set written and announced by an intent, not yet adopted. */
interface ChunkSet {
  d: string;
  n: number;
  intent: Deno.KvKey;
  intentVs: string;
}

/** Where a head's state lives after a commit. */
type BodyRef =
  | { inline: Uint8Array; z: number; utf16: boolean }
  | { d: string; n: number; z: number; utf16: boolean; set?: ChunkSet };

/** The idempotency part of a write: its mutations and the chunk copy of a large result. */
interface IdemPart {
  add: (op: Deno.AtomicOperation) => void;
  copy: { d: string; n: number } | null;
}

/** A watched head: its key, the last versionstamp seen, and the `kv.watch` stream on it. */
interface Watched {
  key: Deno.KvKey;
  /** The last versionstamp seen (`null`: no head); `undefined` until the first read. */
  vs?: string | null;
  /** Settles once `vs` is first read. */
  ready: Promise<void>;
  /** Cancels the stream. */
  stop: () => Promise<void>;
}

/** Signals that a read raced a newer write and must start over. */
class Raced extends Error {}

/**
 * Stores handle records in Deno KV with atomic, versionstamp-checked commits.
 *
 * @example With a key prefix of its own
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { DenoKvBackend } from "@mcpstate/core/denokv";
 *
 * const kv = await Deno.openKv(":memory:");
 * const store = new HandleStore(new DenoKvBackend(kv, { prefix: ["agents"] }));
 * const h = await store.mint("note", { text: "hi" }, { user: "alice" });
 * await store.close();
 * kv.close();
 * ```
 */
export class DenoKvBackend implements Backend {
  /** Expiry is judged by the store and reclaimed by `sweep`: always `false`. */
  readonly reclaimsExpired: boolean = false;
  readonly #kv: Deno.Kv;
  readonly #p: Deno.KvKeyPart[];
  readonly #orphanAgeMs: number;
  readonly #timeoutMs: number;
  readonly #closeKv: boolean;
  #secret: string | undefined;
  #closed = false;
  /** Per-record queues: writers in this process take turns instead of racing. */
  readonly #queues = new Map<string, Promise<void>>();
  readonly #listeners = new Listeners();
  /** Watched heads, by {@link Listeners.key}. */
  readonly #watched = new Map<string, Watched>();
  /** Whether watched heads are polled (not on KV Connect, whose `kv.watch` sees every instance). */
  #pollFeed = true;
  #feedTimer: ReturnType<typeof setInterval> | undefined;
  #feedPoll: Promise<void> | undefined;

  /**
   * Wraps an open `Deno.Kv`.
   *
   * @param kv The KV to store in (from `Deno.openKv`).
   * @param options Key prefix, orphan age, contention timeout, ownership.
   */
  constructor(kv: Deno.Kv, options: DenoKvBackendOptions = {}) {
    if (typeof kv !== "object" || kv === null || typeof kv.atomic !== "function") {
      throw new InvalidArgument("DenoKvBackend needs an open Deno.Kv, from Deno.openKv().");
    }
    this.#kv = kv;
    this.#p = checkPrefix(options.prefix ?? ["mcpstate"]);
    this.#orphanAgeMs = checkMs(options.orphanAgeMs ?? 300_000, "orphanAgeMs");
    this.#timeoutMs = checkMs(options.contentionTimeoutMs ?? 30_000, "contentionTimeoutMs");
    this.#closeKv = options.closeKv ?? false;
  }

  /**
   * Opens the Deno KV a URL names: `denokv:///~/file.kv` (under the home
   * directory), `denokv:////abs/path.kv`, `denokv:///rel/path.kv`,
   * `denokv:///:memory:`, or `denokv+https://host/…` / `denokv+http://…` for
   * a KV Connect endpoint, whose access token is read from
   * `DENO_KV_ACCESS_TOKEN`. The backend owns the KV and closes it.
   *
   * @param url The URL.
   * @param options Backend options (`closeKv` is always `true` here).
   * @returns The open backend.
   * @throws {InvalidArgument} for a malformed URL, a missing token, or a Deno
   *   run without `--unstable-kv`.
   * @throws {BackendError} when the KV cannot be opened.
   */
  static async fromUrl(url: string, options: DenoKvBackendOptions = {}): Promise<DenoKvBackend> {
    const target = parseDenoKvUrl(url);
    const openKv = (Deno as { openKv?: typeof Deno.openKv }).openKv;
    if (typeof openKv !== "function") {
      throw new InvalidArgument(
        `Deno KV is not enabled in this Deno process, so "${
          redact(url).slice(0, 200)
        }" cannot be opened. Run deno with --unstable-kv (e.g. deno run --unstable-kv …), or add "unstable": ["kv"] to deno.json, then try again.`,
        { field: "backend" },
      );
    }
    let token: string | undefined;
    if (target.kind === "remote") {
      try {
        token = Deno.env.get("DENO_KV_ACCESS_TOKEN");
      } catch {
        throw new InvalidArgument(
          "Reading DENO_KV_ACCESS_TOKEN was not allowed: run deno with --allow-env=DENO_KV_ACCESS_TOKEN.",
          { field: "backend" },
        );
      }
      if (!token) {
        throw new InvalidArgument(
          `The KV Connect endpoint ${
            displayUrl(target.path)
          } needs an access token: set the environment variable DENO_KV_ACCESS_TOKEN (the token of your denokv server or Deno Deploy database) and try again.`,
          { field: "backend" },
        );
      }
    } else if (target.kind === "file") {
      try {
        await Deno.mkdir(dirname(target.path), { recursive: true });
      } catch { /* Deno.openKv reports the real problem. */ }
    }
    let kv: Deno.Kv;
    try {
      // Two processes creating one new file at once: the loser finds it locked.
      const deadline = Date.now() + 10_000;
      for (let attempt = 0;; attempt++) {
        try {
          kv = await openKv(target.path);
          break;
        } catch (e) {
          const msg = e instanceof Error ? e.message : String(e);
          if (!LOCKED_RE.test(msg) || Date.now() >= deadline) throw e;
          await backoff(attempt);
        }
      }
    } catch (e) {
      const where = target.kind === "remote" ? displayUrl(target.path) : `"${target.path}"`;
      let raw = scrub(e instanceof Error ? e.message : String(e), token);
      // Deno's message repeats the endpoint URL: show it without its query string.
      if (target.kind === "remote") raw = raw.replaceAll(target.path, where);
      const refused = target.kind === "remote" && /status (401|403)\b/.test(raw);
      throw new BackendError(
        refused
          ? `The Deno KV endpoint ${where} refused the access token (${raw}). Check DENO_KV_ACCESS_TOKEN.`
          : `Could not open Deno KV at ${where}: ${raw}`,
        { cause: e },
      );
    }
    const backend = new DenoKvBackend(kv, { ...options, closeKv: true });
    backend.#secret = token;
    backend.#pollFeed = target.kind !== "remote";
    return backend;
  }

  // ---------------------------------------------------------------- keys

  #user(user: string): Deno.KvKeyPart {
    return keyPart(user, USER_PART_MAX);
  }

  #headKey(u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.#p, "u", u, "h", h];
  }

  #indexKey(u: Deno.KvKeyPart, updatedAt: number, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.#p, "u", u, "i", 0 - updatedAt, h];
  }

  #chunkKey(u: Deno.KvKeyPart, h: Deno.KvKeyPart, d: string, i: number): Deno.KvKey {
    return [...this.#p, "u", u, "c", h, d, i];
  }

  #idemKey(u: Deno.KvKeyPart, c: IdempotencyClaim): Deno.KvKey {
    return [
      ...this.#p,
      "u",
      u,
      "k",
      keyPart(c.scope, NAME_PART_MAX),
      keyPart(c.key, NAME_PART_MAX),
    ];
  }

  #copyKey(u: Deno.KvKeyPart, d: string, i: number): Deno.KvKey {
    return [...this.#p, "u", u, "q", d, i];
  }

  #expiryKey(at: number, u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.#p, "xh", at, u, h];
  }

  #idemExpiryKey(at: number, idemKey: Deno.KvKey): Deno.KvKey {
    const n = this.#p.length;
    return [...this.#p, "xk", at, idemKey[n + 1]!, idemKey[n + 3]!, idemKey[n + 4]!];
  }

  #intentKey(at: number, u: Deno.KvKeyPart, h: Deno.KvKeyPart, d: string): Deno.KvKey {
    return [...this.#p, "xw", at, u, h, d];
  }

  #userNameKey(u: Deno.KvKeyPart): Deno.KvKey {
    return [...this.#p, "n", u];
  }

  #logKey(u: Deno.KvKeyPart, h: Deno.KvKeyPart, log: string, version: number): Deno.KvKey {
    return [...this.#p, "u", u, "log", h, log, version];
  }

  #trashKey(u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.#p, "u", u, "t", h];
  }

  #trashExpiryKey(at: number, u: Deno.KvKeyPart, h: Deno.KvKeyPart): Deno.KvKey {
    return [...this.#p, "xt", at, u, h];
  }

  #leaseKey(user: string, handle: string): Deno.KvKey {
    return [...this.#p, "u", this.#user(user), "l", keyPart(handle, NAME_PART_MAX)];
  }

  // ---------------------------------------------------------------- I/O

  /** Runs one KV call, retrying "database is locked" with a jittered backoff. */
  async #io<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      try {
        return await fn();
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        if (LOCKED_RE.test(msg)) {
          if (Date.now() < deadline) {
            await backoff(attempt);
            continue;
          }
          throw new BackendError(
            `Deno KV stayed locked by another process for ${this.#timeoutMs} ms. Nothing was changed by this call; try again.`,
            { cause: e },
          );
        }
        if (e instanceof McpStateError || e instanceof Raced) throw e;
        if (this.#secret && msg.includes(this.#secret)) {
          throw new BackendError(scrub(msg, this.#secret), { cause: e });
        }
        throw e;
      }
    }
  }

  /** Builds and commits an atomic operation (built afresh for every lock retry). */
  #commit(
    build: (op: Deno.AtomicOperation) => void,
  ): Promise<Deno.KvCommitResult | Deno.KvCommitError> {
    return this.#io(() => {
      const op = this.#kv.atomic();
      build(op);
      return op.commit();
    });
  }

  #get<T>(key: Deno.KvKey): Promise<Deno.KvEntryMaybe<T>> {
    return this.#io(() => this.#kv.get<T>(key));
  }

  /** Reads a whole range; `stop` ends it early (the first entry it refuses is dropped). */
  #range<T>(
    selector: Deno.KvListSelector,
    options: { batchSize?: number; limit?: number } = {},
    stop?: (entry: Deno.KvEntry<T>) => boolean,
  ): Promise<Deno.KvEntry<T>[]> {
    return this.#io(async () => {
      const out: Deno.KvEntry<T>[] = [];
      for await (const e of this.#kv.list<T>(selector, options)) {
        if (stop?.(e)) break;
        out.push(e);
      }
      return out;
    });
  }

  /**
   * Runs the writes of one record in this process one after another. Other
   * processes still race optimistically; this only spares the writers of one
   * process from conflicting with each other.
   */
  async #turn<T>(user: string, handle: string, fn: () => Promise<T>): Promise<T> {
    const key = JSON.stringify([user, handle]);
    const prev = this.#queues.get(key) ?? Promise.resolve();
    const run = prev.then(fn);
    const tail = run.then(() => {}, () => {});
    this.#queues.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#queues.get(key) === tail) this.#queues.delete(key);
    }
  }

  /** Waits before the next optimistic attempt, or gives up after the contention timeout. */
  async #again(attempt: number, deadline: number, handle: string): Promise<void> {
    if (Date.now() >= deadline) {
      throw new BackendError(
        `Too many concurrent writers on "${handle}": gave up after ${this.#timeoutMs} ms. Nothing was applied by this call; try again.`,
      );
    }
    await backoff(attempt);
  }

  // ---------------------------------------------------------------- bodies

  /** Writes `enc` as a new chunk set announced by an intent; `null` when another process collected it meanwhile. */
  async #writeChunks(u: Deno.KvKeyPart, h: Deno.KvKeyPart, enc: Encoded): Promise<ChunkSet | null> {
    const d = newId();
    const n = Math.max(1, Math.ceil(enc.bytes.length / CHUNK_BYTES));
    const intent = this.#intentKey(Date.now(), u, h, d);
    let intentVs = "";
    for (let first = 0; first < n; first += CHUNKS_PER_COMMIT) {
      const res = await this.#commit((op) => {
        if (first === 0) op.set(intent, { n } satisfies Intent);
        else op.check({ key: intent, versionstamp: intentVs });
        for (let i = first; i < Math.min(n, first + CHUNKS_PER_COMMIT); i++) {
          op.set(
            this.#chunkKey(u, h, d, i),
            enc.bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
          );
        }
      });
      if (!res.ok) return null;
      if (first === 0) intentVs = res.versionstamp;
    }
    return { d, n, intent, intentVs };
  }

  /** Turns a state into where it will live: inline, or a fresh chunk set. */
  async #body(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    text: string,
    reuse?: { head: Head; text: string },
  ): Promise<BodyRef | null> {
    if (reuse && reuse.text === text && reuse.head.d !== undefined) {
      const { d, n = 0, z, x } = reuse.head;
      return { d, n, z, utf16: x === true };
    }
    const enc = encodeText(text);
    if (enc.bytes.length <= INLINE_MAX) {
      return { inline: enc.bytes, z: enc.bytes.length, utf16: enc.utf16 };
    }
    const set = await this.#writeChunks(u, h, enc);
    if (!set) return null;
    return { d: set.d, n: set.n, z: enc.bytes.length, utf16: enc.utf16, set };
  }

  /** Reads a head's state text; throws {@link Raced} when its chunks are gone. */
  async #text(u: Deno.KvKeyPart, h: Deno.KvKeyPart, head: Head): Promise<string> {
    if (head.b instanceof Uint8Array) return decodeBytes(head.b, head.x === true);
    if (typeof head.d !== "string" || typeof head.n !== "number") {
      throw new BackendError(
        "A stored Deno KV record is malformed: it has neither a state nor chunks.",
      );
    }
    return await this.#readChunks(
      [...this.#p, "u", u, "c", h, head.d],
      head.n,
      head.z,
      head.x === true,
    );
  }

  async #readChunks(prefix: Deno.KvKey, n: number, z: number, utf16: boolean): Promise<string> {
    const entries = await this.#range<Uint8Array>({ prefix }, {
      batchSize: Math.min(1000, Math.max(1, n)),
    });
    if (entries.length !== n) throw new Raced();
    const bytes = new Uint8Array(z);
    let at = 0;
    for (const [i, e] of entries.entries()) {
      const idx = e.key[e.key.length - 1];
      if (idx !== i || !(e.value instanceof Uint8Array) || at + e.value.length > z) {
        throw new Raced();
      }
      bytes.set(e.value, at);
      at += e.value.length;
    }
    if (at !== z) throw new Raced();
    return decodeBytes(bytes, utf16);
  }

  /** Reads a record and its state, starting over when a newer write released its chunks. */
  async #load(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    handle: string,
    first?: Deno.KvEntryMaybe<Head>,
  ): Promise<{ entry: Deno.KvEntryMaybe<Head>; record: HandleRecord | null; text: string | null }> {
    const deadline = Date.now() + this.#timeoutMs;
    let entry = first ?? await this.#get<Head>(this.#headKey(u, h));
    for (let attempt = 0;; attempt++) {
      if (entry.value === null) return { entry, record: null, text: null };
      try {
        const text = await this.#text(u, h, entry.value);
        return { entry, record: recordOf(handle, entry.value, text), text };
      } catch (e) {
        if (!(e instanceof Raced)) throw e;
      }
      const again = await this.#get<Head>(this.#headKey(u, h));
      if (again.versionstamp === entry.versionstamp) {
        throw new BackendError(
          `The state of "${handle}" is incomplete in Deno KV (chunks are missing). Restore it from a backup or revoke the handle.`,
        );
      }
      if (Date.now() >= deadline) {
        throw new BackendError(
          `"${handle}" changed faster than it could be read for ${this.#timeoutMs} ms; try again.`,
        );
      }
      entry = again;
      await backoff(attempt);
    }
  }

  /**
   * Deletes what an intent still at `vs` stands for (a chunk set, or a run of
   * changelog entries); `false` when someone else owns it now.
   */
  async #collect(intent: Deno.KvKey, vs: string, it: Intent): Promise<boolean> {
    const base = this.#p.length;
    const u = intent[base + 2]!, h = intent[base + 3]!, d = intent[base + 4] as string;
    const n = it.n;
    const keyOf = (i: number): Deno.KvKey =>
      it.l !== undefined ? this.#logKey(u, h, it.l, (it.f ?? 0) + i) : this.#chunkKey(u, h, d, i);
    if (n <= DELETE_IN_COMMIT) {
      const res = await this.#commit((op) => {
        op.check({ key: intent, versionstamp: vs }).delete(intent);
        for (let i = 0; i < n; i++) op.delete(keyOf(i));
      });
      return res.ok;
    }
    // Too many for one commit: mark the intent dead first (a writer checking
    // it can no longer adopt the set), then delete the keys, then the intent.
    const res = await this.#commit((op) => {
      op.check({ key: intent, versionstamp: vs }).set(
        intent,
        { ...it, dead: true } satisfies Intent,
      );
    });
    if (!res.ok) return false;
    for (let i = 0; i < n; i += DELETE_BATCH) {
      await this.#commit((op) => {
        for (let j = i; j < Math.min(n, i + DELETE_BATCH); j++) op.delete(keyOf(j));
      });
    }
    await this.#commit((op) => {
      op.check({ key: intent, versionstamp: res.versionstamp }).delete(intent);
    });
    return true;
  }

  /** Releases a chunk set this call wrote but did not get adopted. Errors are left to `sweep`. */
  async #release(body: BodyRef | null | undefined): Promise<void> {
    if (!body || !("set" in body) || !body.set) return;
    await this.#collect(body.set.intent, body.set.intentVs, { n: body.set.n }).catch(() => false);
  }

  /**
   * Adds the mutations that make `next` the head: head, list index, expiry
   * index, adoption of its chunk set, release of the superseded one, and the
   * changelog as `log` plans it. Returns the intents to collect after the
   * commit (a large superseded chunk set, a long run of dropped entries).
   */
  #putHead(
    op: Deno.AtomicOperation,
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    old: Head | null,
    next: HandleRecord,
    body: BodyRef,
    w: string,
    log: LogPlan,
  ): Deno.KvKey[] {
    const after: Deno.KvKey[] = [];
    const head: Head = {
      k: next.kind,
      v: next.version,
      c: next.createdAt,
      u: next.updatedAt,
      e: next.expiresAt,
      l: next.lastWriter,
      w,
      z: body.z,
    };
    if ("inline" in body) head.b = body.inline;
    else {
      head.d = body.d;
      head.n = body.n;
    }
    if (body.utf16) head.x = true;
    if (log.L !== undefined) {
      head.L = log.L;
      head.g = log.g!;
      head.ga = log.ga!;
    }
    op.set(this.#headKey(u, h), head);
    if (log.entry) op.set(this.#logKey(u, h, log.L!, log.entry.version), log.entry.value);
    for (const [l, from, to] of log.drops) {
      const intent = this.#dropLog(op, u, h, l, from, to);
      if (intent) after.push(intent);
    }
    op.set(this.#indexKey(u, next.updatedAt, h), indexOf(next));
    if (old && old.u !== next.updatedAt) op.delete(this.#indexKey(u, old.u, h));
    if (old && old.e !== null && old.e !== next.expiresAt) {
      op.delete(this.#expiryKey(old.e, u, h));
    }
    if (next.expiresAt !== null && old?.e !== next.expiresAt) {
      op.set(this.#expiryKey(next.expiresAt, u, h), 0);
    }
    if ("set" in body && body.set) {
      op.check({ key: body.set.intent, versionstamp: body.set.intentVs }).delete(body.set.intent);
    }
    if (old?.d !== undefined && !("d" in body && body.d === old.d)) {
      const intent = this.#dropChunks(op, u, h, old);
      if (intent) after.push(intent);
    }
    return after;
  }

  /**
   * Adds the deletion of a live head with its keys (list and expiry index,
   * chunks, changelog); returns the intents to collect after the commit.
   */
  #dropHead(
    op: Deno.AtomicOperation,
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    old: Head,
  ): Deno.KvKey[] {
    op.delete(this.#headKey(u, h));
    op.delete(this.#indexKey(u, old.u, h));
    if (old.e !== null) op.delete(this.#expiryKey(old.e, u, h));
    return this.#dropBody(op, u, h, old);
  }

  /** Adds the deletion of a head's chunks and changelog; returns the intents to collect after the commit. */
  #dropBody(
    op: Deno.AtomicOperation,
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    old: Head,
  ): Deno.KvKey[] {
    const after: Deno.KvKey[] = [];
    if (old.d !== undefined) {
      const intent = this.#dropChunks(op, u, h, old);
      if (intent) after.push(intent);
    }
    if (old.L !== undefined && old.g !== undefined && old.g <= old.v) {
      const intent = this.#dropLog(op, u, h, old.L, old.g, old.v);
      if (intent) after.push(intent);
    }
    return after;
  }

  /**
   * Adds the deletion of the changelog entries `from`…`to` of log `l`: in
   * this commit when few, else through a dead intent the collector empties
   * (nobody reads them meanwhile: reads start at the head's `g`, or the log
   * id is no longer any head's). Returns that intent.
   */
  #dropLog(
    op: Deno.AtomicOperation,
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    l: string,
    from: number,
    to: number,
  ): Deno.KvKey | null {
    const n = to - from + 1;
    if (n <= 0) return null;
    if (n <= LOG_DELETE_IN_COMMIT) {
      for (let v = from; v <= to; v++) op.delete(this.#logKey(u, h, l, v));
      return null;
    }
    const intent = this.#intentKey(0, u, h, `${l}.${from}`);
    op.set(intent, { n, dead: true, l, f: from } satisfies Intent);
    return intent;
  }

  /**
   * What a write producing `next` does to the changelog. With an entry: the
   * entry continues the head's log (or starts a new one), and retention trims
   * the log from its oldest end — entries more than `maxEntries` behind, then
   * entries older than `maxAgeMs` (read only when the head's `ga` says one
   * may be). Without one: a log that would now have a gap is dropped.
   */
  async #plan(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    old: Head | null,
    entry: ChangeEntry | undefined,
    ctx: WriteContext,
  ): Promise<LogPlan> {
    const live = old?.L !== undefined && old.g !== undefined ? old : null;
    if (!entry) {
      return { drops: live ? [[live.L!, live.g!, live.v]] : [] };
    }
    const value = logValueOf(entry);
    if (!live || entry.version !== live.v + 1 || live.g! > live.v) {
      return {
        L: newId(),
        g: entry.version,
        ga: entry.at,
        entry: { version: entry.version, value },
        drops: live ? [[live.L!, live.g!, live.v]] : [],
      };
    }
    const l = live.L!, oldG = live.g!;
    let g = oldG, ga = live.ga ?? entry.at;
    const r: Retention | undefined = ctx.retention;
    if (r) {
      g = Math.max(g, entry.version - r.maxEntries + 1);
      const cutoff = ctx.now - r.maxAgeMs;
      if (ga < cutoff && g < entry.version) {
        const young = await this.#firstYoung(u, h, l, g, live.v, cutoff);
        g = young?.version ?? entry.version;
        ga = young?.at ?? entry.at;
      }
    }
    if (g >= entry.version) ga = entry.at;
    ga = Math.min(ga, entry.at);
    return {
      L: l,
      g,
      ga,
      entry: { version: entry.version, value },
      drops: g > oldG ? [[l, oldG, g - 1]] : [],
    };
  }

  /** The first changelog entry of `from`…`to` written at or after `cutoff`, if any. */
  async #firstYoung(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    l: string,
    from: number,
    to: number,
    cutoff: number,
  ): Promise<{ version: number; at: number } | null> {
    let found: { version: number; at: number } | null = null;
    await this.#range<LogValue>(
      { start: this.#logKey(u, h, l, from), end: this.#logKey(u, h, l, to + 1) },
      { batchSize: AGE_SCAN_BATCH },
      (e) => {
        if (e.value.a < cutoff) return false;
        found = { version: e.key[e.key.length - 1] as number, at: e.value.a };
        return true;
      },
    );
    return found;
  }

  #dropChunks(
    op: Deno.AtomicOperation,
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    old: Head,
  ): Deno.KvKey | null {
    const n = old.n ?? 0, d = old.d!;
    if (n <= DELETE_IN_COMMIT) {
      for (let i = 0; i < n; i++) op.delete(this.#chunkKey(u, h, d, i));
      return null;
    }
    const intent = this.#intentKey(0, u, h, d);
    op.set(intent, { n, dead: true } satisfies Intent);
    return intent;
  }

  /** Collects what a head commit handed to the collector, right after it (else `sweep` will). */
  async #afterCommit(intents: readonly Deno.KvKey[], vs: string): Promise<void> {
    for (const intent of intents) {
      const it = (await this.#get<Intent>(intent).catch(() => null))?.value;
      if (it) await this.#collect(intent, vs, it).catch(() => false);
    }
  }

  // ---------------------------------------------------------------- idempotency

  /** Reads the head and, when the call carries a claim, its idempotency record, in one snapshot. */
  async #heads(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    ctx: WriteContext,
  ): Promise<[Deno.KvEntryMaybe<Head>, Deno.KvEntryMaybe<IdemValue> | null]> {
    const c = ctx.idempotency;
    if (!c) return [await this.#get<Head>(this.#headKey(u, h)), null];
    const [head, idem] = await this.#io(() =>
      this.#kv.getMany<[Head, IdemValue]>([this.#headKey(u, h), this.#idemKey(u, c)])
    );
    return [head, idem];
  }

  /** Like {@link DenoKvBackend.#heads}, with the trash entry of the handle in the same snapshot. */
  async #headsAndTrash(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    ctx: WriteContext,
  ): Promise<
    [Deno.KvEntryMaybe<Head>, Deno.KvEntryMaybe<IdemValue> | null, Deno.KvEntryMaybe<Trashed>]
  > {
    const c = ctx.idempotency;
    if (!c) {
      const [head, trash] = await this.#io(() =>
        this.#kv.getMany<[Head, Trashed]>([this.#headKey(u, h), this.#trashKey(u, h)])
      );
      return [head, null, trash];
    }
    const [head, trash, idem] = await this.#io(() =>
      this.#kv.getMany<[Head, Trashed, IdemValue]>([
        this.#headKey(u, h),
        this.#trashKey(u, h),
        this.#idemKey(u, c),
      ])
    );
    return [head, idem, trash];
  }

  /** The replay answer when a live idempotency record exists. */
  async #replay(
    u: Deno.KvKeyPart,
    idem: Deno.KvEntryMaybe<IdemValue> | null,
    ctx: WriteContext,
  ): Promise<Replayed | null> {
    const v = idem?.value;
    if (!v || v.t <= ctx.now) return null;
    if (!v.r) return { replayed: true, fingerprint: v.f, result: null };
    let text: string;
    if (v.b instanceof Uint8Array) text = decodeBytes(v.b, v.x === true);
    else {
      try {
        text = await this.#readChunks(
          [...this.#p, "u", u, "q", v.d ?? ""],
          v.n ?? 0,
          v.z ?? 0,
          v.x === true,
        );
      } catch (e) {
        if (!(e instanceof Raced)) throw e;
        throw new BackendError(
          "The stored result of this idempotency key is incomplete; retry with a new key after checking the handle's state.",
        );
      }
    }
    const r = v.r;
    return {
      replayed: true,
      fingerprint: v.f,
      result: {
        handle: r.h,
        kind: r.k,
        state: text,
        version: r.v,
        createdAt: r.c,
        updatedAt: r.u,
        expiresAt: r.e,
        lastWriter: r.l,
      },
    };
  }

  /**
   * Prepares the idempotency record of a write: a copy of a large result's
   * state is written first (with `expireIn`, so a crash leaves nothing for
   * long). Returns the mutation builder and the copy (to delete on a lost race).
   */
  async #idem(
    u: Deno.KvKeyPart,
    ctx: WriteContext,
    prev: Deno.KvEntryMaybe<IdemValue> | null,
    result: HandleRecord | null,
    resultBody: BodyRef | null,
  ): Promise<IdemPart> {
    const c = ctx.idempotency;
    if (!c || !prev) return { add: () => {}, copy: null };
    const key = this.#idemKey(u, c);
    const expireIn = Math.max(1, Math.round(c.expiresAt - ctx.now));
    const value: IdemValue = { f: c.fingerprint, t: c.expiresAt, r: result && indexOf(result) };
    let copy: { d: string; n: number } | null = null;
    if (result) {
      const enc = resultBody && "inline" in resultBody
        ? { bytes: resultBody.inline, utf16: resultBody.utf16 }
        : encodeText(result.state);
      if (enc.utf16) value.x = true;
      if (enc.bytes.length <= INLINE_MAX) value.b = enc.bytes;
      else {
        const d = newId(), n = Math.ceil(enc.bytes.length / CHUNK_BYTES);
        for (let first = 0; first < n; first += CHUNKS_PER_COMMIT) {
          await this.#commit((op) => {
            for (let i = first; i < Math.min(n, first + CHUNKS_PER_COMMIT); i++) {
              op.set(
                this.#copyKey(u, d, i),
                enc.bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
                { expireIn },
              );
            }
          });
        }
        Object.assign(value, { d, n, z: enc.bytes.length });
        copy = { d, n };
      }
    }
    const old = prev.value;
    const add = (op: Deno.AtomicOperation) => {
      op.check(prev);
      op.set(key, value, { expireIn });
      op.set(this.#idemExpiryKey(c.expiresAt, key), 0, { expireIn });
      if (old) {
        if (old.t !== c.expiresAt) op.delete(this.#idemExpiryKey(old.t, key));
        if (old.d !== undefined && (old.n ?? 0) <= DELETE_IN_COMMIT) {
          for (let i = 0; i < (old.n ?? 0); i++) op.delete(this.#copyKey(u, old.d, i));
        }
      }
    };
    return { add, copy };
  }

  async #dropCopy(u: Deno.KvKeyPart, copy: { d: string; n: number } | null): Promise<void> {
    if (!copy) return;
    for (let i = 0; i < copy.n; i += DELETE_BATCH) {
      await this.#commit((op) => {
        for (let j = i; j < Math.min(copy.n, i + DELETE_BATCH); j++) {
          op.delete(this.#copyKey(u, copy.d, j));
        }
      }).catch(() => null);
    }
  }

  /** Whether the head now carries write `w` (a commit whose answer was lost still landed). */
  async #landed(u: Deno.KvKeyPart, h: Deno.KvKeyPart, w: string): Promise<boolean> {
    return (await this.#get<Head>(this.#headKey(u, h))).value?.w === w;
  }

  // ---------------------------------------------------------------- primitives

  /** {@inheritDoc Backend.insert} */
  async insert(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<{ inserted: boolean } | Replayed> {
    const u = this.#user(user), h = keyPart(record.handle, NAME_PART_MAX);
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      const [head, idem, trash] = await this.#headsAndTrash(u, h, ctx);
      const replay = await this.#replay(u, idem, ctx);
      if (replay) return replay;
      // A trashed handle stays taken until it is restored or purged.
      if (head.value !== null || trash.value !== null) return { inserted: false };
      const w = newId();
      const body = await this.#body(u, h, record.state);
      const log = await this.#plan(u, h, null, ctx.entry, ctx);
      let idemPart: IdemPart | undefined;
      let ok = false;
      try {
        if (body) {
          idemPart = await this.#idem(u, ctx, idem, record, body);
          const res = await this.#commit((op) => {
            op.check(head).check(trash);
            this.#putHead(op, u, h, null, record, body, w, log);
            op.set(this.#userNameKey(u), user);
            idemPart?.add(op);
          });
          ok = res.ok || await this.#landed(u, h, w);
          if (ok) this.#changed(user, record.handle, res);
        }
      } finally {
        if (!ok) {
          await this.#release(body);
          await this.#dropCopy(u, idemPart?.copy ?? null);
        }
      }
      if (ok) return { inserted: true };
      await this.#again(attempt, deadline, record.handle);
    }
  }

  /** {@inheritDoc Backend.read} */
  async read(user: string, handle: string): Promise<HandleRecord | null> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    return (await this.#load(u, h, handle)).record;
  }

  /** {@inheritDoc Backend.readLeased} */
  async readLeased(
    user: string,
    handle: string,
    now: number,
  ): Promise<{ record: HandleRecord | null; lease: LeaseRecord | null }> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    // The head and the lease in one read; the state's chunks (if any) follow.
    const [head, l] = await this.#io(() =>
      this.#kv.getMany<[Head, LeaseRecord]>([this.#headKey(u, h), this.#leaseKey(user, handle)])
    );
    const { record } = await this.#load(u, h, handle, head);
    const lease = l.value && l.value.expiresAt > now
      ? { holder: l.value.holder, expiresAt: l.value.expiresAt }
      : null;
    return { record, lease };
  }

  /** {@inheritDoc Backend.save} */
  save(
    user: string,
    handle: string,
    write: ConditionalWrite,
    ctx: WriteContext,
  ): Promise<SaveOutcome | Replayed> {
    return this.#turn(user, handle, () => this.#save(user, handle, write, ctx));
  }

  async #save(
    user: string,
    handle: string,
    write: ConditionalWrite,
    ctx: WriteContext,
  ): Promise<SaveOutcome | Replayed> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    const deadline = Date.now() + this.#timeoutMs;
    let body: BodyRef | null = null;
    try {
      for (let attempt = 0;; attempt++) {
        const [first, idem] = await this.#heads(u, h, ctx);
        const replay = await this.#replay(u, idem, ctx);
        if (replay) return replay;
        const cur = first.value;
        if (
          !cur || cur.v !== write.expectVersion || (cur.e !== null && cur.e <= ctx.now)
        ) {
          return { ok: false, current: (await this.#load(u, h, handle, first)).record };
        }
        const next: HandleRecord = {
          handle,
          kind: cur.k,
          state: write.state,
          version: cur.v + 1,
          createdAt: cur.c,
          updatedAt: write.updatedAt,
          expiresAt: write.expiresAt === "keep" ? cur.e : write.expiresAt,
          lastWriter: write.lastWriter,
        };
        // One chunk set serves every attempt of this call: the state is the same.
        body ??= await this.#body(u, h, write.state);
        if (!body) {
          await this.#again(attempt, deadline, handle);
          continue;
        }
        const w = newId();
        const idemPart = await this.#idem(u, ctx, idem, next, body);
        // A write without an entry would leave a gap: the log is dropped.
        const log = await this.#plan(u, h, cur, undefined, ctx);
        let after: Deno.KvKey[] = [];
        const res = await this.#commit((op) => {
          op.check(first);
          after = this.#putHead(op, u, h, cur, next, body!, w, log);
          idemPart.add(op);
        });
        if (res.ok || await this.#landed(u, h, w)) {
          body = null;
          this.#changed(user, handle, res);
          if (res.ok) await this.#afterCommit(after, res.versionstamp);
          return { ok: true, record: next };
        }
        await this.#dropCopy(u, idemPart.copy);
        if ("set" in body && body.set) {
          // The intent may have been collected meanwhile; check before reuse.
          const still = await this.#get<Intent>(body.set.intent);
          if (still.versionstamp !== body.set.intentVs) {
            await this.#release(body);
            body = null;
          }
        }
        await this.#again(attempt, deadline, handle);
      }
    } finally {
      await this.#release(body);
    }
  }

  /** {@inheritDoc Backend.update} */
  update(
    user: string,
    handle: string,
    change: Change,
    ctx: WriteContext,
  ): Promise<UpdateOutcome | Replayed> {
    return this.#turn(user, handle, () => this.#update(user, handle, change, ctx));
  }

  async #update(
    user: string,
    handle: string,
    change: Change,
    ctx: WriteContext,
  ): Promise<UpdateOutcome | Replayed> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      const [read, idem] = await this.#heads(u, h, ctx);
      const replay = await this.#replay(u, idem, ctx);
      if (replay) return replay;
      // The head whose state was read; the commit checks it.
      const loaded = await this.#load(u, h, handle, read);
      const first = loaded.entry;
      const current = loaded.record;
      const step = change(current && { ...current });
      const next = step?.record ?? null;
      if (!next && !ctx.idempotency) return { record: current, written: false };
      const w = newId();
      let body: BodyRef | null = null;
      let copy: { d: string; n: number } | null = null;
      let ok = false;
      try {
        if (next) {
          body = await this.#body(
            u,
            h,
            next.state,
            first.value && loaded.text !== null
              ? { head: first.value, text: loaded.text }
              : undefined,
          );
        }
        if (!next || body) {
          const result = next ?? current;
          const idemPart = await this.#idem(u, ctx, idem, result, next ? body : null);
          copy = idemPart.copy;
          // Read under the same head versionstamp the commit checks.
          const log = next ? await this.#plan(u, h, first.value, step?.entry, ctx) : null;
          let after: Deno.KvKey[] = [];
          const res = await this.#commit((op) => {
            op.check(first);
            if (next) after = this.#putHead(op, u, h, first.value, next, body!, w, log!);
            idemPart.add(op);
          });
          ok = res.ok || (next !== null && await this.#landed(u, h, w));
          if (ok) {
            if (next) this.#changed(user, handle, res);
            if (res.ok) await this.#afterCommit(after, res.versionstamp);
            return { record: result && { ...result }, written: next !== null };
          }
        }
      } finally {
        if (!ok) {
          await this.#release(body);
          await this.#dropCopy(u, copy);
        }
      }
      await this.#again(attempt, deadline, handle);
    }
  }

  /** {@inheritDoc Backend.remove} */
  async remove(
    user: string,
    handle: string,
    ctx: WriteContext,
  ): Promise<{ removed: boolean } | Replayed> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    const deadline = Date.now() + this.#timeoutMs;
    const until = ctx.trashUntil;
    for (let attempt = 0;; attempt++) {
      let head: Deno.KvEntryMaybe<Head>, idem: Deno.KvEntryMaybe<IdemValue> | null;
      let trash: Deno.KvEntryMaybe<Trashed> | null = null;
      if (until === undefined) [head, idem] = await this.#heads(u, h, ctx);
      else [head, idem, trash] = await this.#headsAndTrash(u, h, ctx);
      const replay = await this.#replay(u, idem, ctx);
      if (replay) return replay;
      const old = head.value;
      if (!old) return { removed: false };
      const idemPart = await this.#idem(u, ctx, idem, null, null);
      let after: Deno.KvKey[] = [];
      const res = await this.#commit((op) => {
        op.check(head);
        if (until === undefined || trash === null) after = this.#dropHead(op, u, h, old);
        else {
          // Into the trash: the head moves, its chunks and changelog stay.
          op.check(trash);
          const prev = trash.value;
          if (prev) {
            // An older trashed copy (a restore() imported the handle meanwhile) gives way.
            op.delete(this.#trashExpiryKey(prev.t, u, h));
            after = this.#dropBody(op, u, h, prev.h);
          }
          op.delete(this.#headKey(u, h));
          op.delete(this.#indexKey(u, old.u, h));
          if (old.e !== null) op.delete(this.#expiryKey(old.e, u, h));
          op.set(this.#trashKey(u, h), { h: old, t: until } satisfies Trashed);
          op.set(this.#trashExpiryKey(until, u, h), 0);
        }
        idemPart.add(op);
      });
      if (res.ok) {
        this.#changed(user, handle, null);
        await this.#afterCommit(after, res.versionstamp);
        return { removed: true };
      }
      await this.#again(attempt, deadline, handle);
    }
  }

  /** {@inheritDoc Backend.untrash} */
  async untrash(user: string, handle: string, ctx: WriteContext): Promise<HandleRecord | null> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      const [head, trash] = await this.#io(() =>
        this.#kv.getMany<[Head, Trashed]>([this.#headKey(u, h), this.#trashKey(u, h)])
      );
      const t = trash.value;
      if (!t || t.t <= ctx.now || head.value !== null) return null;
      // The state is read before the commit: its chunks stay while the trash entry does.
      let text: string;
      try {
        text = await this.#text(u, h, t.h);
      } catch (e) {
        if (!(e instanceof Raced)) throw e;
        const again = await this.#get<Trashed>(this.#trashKey(u, h));
        if (again.versionstamp === trash.versionstamp) {
          throw new BackendError(
            `The state of the trashed "${handle}" is incomplete in Deno KV (chunks are missing); it cannot be restored.`,
          );
        }
        await this.#again(attempt, deadline, handle);
        continue;
      }
      const record = recordOf(handle, t.h, text);
      const res = await this.#commit((op) => {
        op.check(head).check(trash);
        op.delete(this.#trashKey(u, h));
        op.delete(this.#trashExpiryKey(t.t, u, h));
        op.set(this.#headKey(u, h), t.h);
        op.set(this.#indexKey(u, t.h.u, h), indexOf(record));
        if (t.h.e !== null) op.set(this.#expiryKey(t.h.e, u, h), 0);
        op.set(this.#userNameKey(u), user);
      });
      if (res.ok) {
        this.#changed(user, handle, res);
        return record;
      }
      await this.#again(attempt, deadline, handle);
    }
  }

  /** {@inheritDoc Backend.changes} */
  async changes(user: string, handle: string, afterVersion: number): Promise<ChangeEntry[]> {
    const u = this.#user(user), h = keyPart(handle, NAME_PART_MAX);
    const head = (await this.#get<Head>(this.#headKey(u, h))).value;
    if (!head || head.L === undefined || head.g === undefined) return [];
    const from = Math.max(afterVersion + 1, head.g);
    if (from > head.v) return [];
    // Up to the head's version only: an entry is never seen before its write.
    const rows = await this.#range<LogValue>({
      start: this.#logKey(u, h, head.L, from),
      end: this.#logKey(u, h, head.L, head.v + 1),
    }, { batchSize: Math.min(1000, head.v - from + 1) });
    return rows.map((e) => ({
      version: e.key[e.key.length - 1] as number,
      at: e.value.a,
      text: decodeBytes(e.value.b, e.value.x === true),
    }));
  }

  /** {@inheritDoc Backend.list} */
  async list(user: string, q: ListQuery): Promise<HandleMeta[]> {
    const u = this.#user(user);
    const prefix: Deno.KvKey = [...this.#p, "u", u, "i"];
    const selector: Deno.KvListSelector = q.after
      ? { prefix, start: [...prefix, 0 - q.after.updatedAt] }
      : { prefix };
    const batchSize = Math.min(1000, Math.max(16, q.limit + 1));
    return await this.#io(async () => {
      const out: HandleMeta[] = [];
      if (q.limit <= 0) return out;
      for await (const e of this.#kv.list<IndexEntry>(selector, { batchSize })) {
        const m = metaOfIndex(e.value);
        if (q.after && compareListOrder(m, q.after) <= 0) continue;
        if (q.kind !== undefined && m.kind !== q.kind) continue;
        if (q.liveAt !== undefined && m.expiresAt !== null && m.expiresAt <= q.liveAt) continue;
        out.push(m);
        if (out.length >= q.limit) break;
      }
      return out;
    });
  }

  /** {@inheritDoc Backend.sweep} */
  async sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    const n = this.#p.length;
    const u = user === null ? null : this.#user(user);
    let count = 0;
    // 1. Expired records.
    if (u !== null) {
      const rows = await this.#range<IndexEntry>({ prefix: [...this.#p, "u", u, "i"] });
      for (const row of rows) {
        const e = row.value.e;
        if (e !== null && e <= expiredAtOrBefore) {
          if (await this.#reclaim(u, row.key[n + 4]!, expiredAtOrBefore, null)) count++;
        }
      }
    } else {
      const due = await this.#range<number>(
        { prefix: [...this.#p, "xh"] },
        { batchSize: 500 },
        (e) => (e.key[n + 1] as number) > expiredAtOrBefore,
      );
      for (const row of due) {
        if (await this.#reclaim(row.key[n + 2]!, row.key[n + 3]!, expiredAtOrBefore, row)) count++;
      }
    }
    // 2. Idempotency records past their expiry.
    const idems = u !== null
      ? (await this.#range<IdemValue>({ prefix: [...this.#p, "u", u, "k"] }))
        .filter((e) => e.value.t <= now)
        .map((e) => ({ key: e.key, t: e.value.t }))
      : (await this.#range<number>(
        { prefix: [...this.#p, "xk"] },
        { batchSize: 500 },
        (e) => (e.key[n + 1] as number) > now,
      )).map((e) => ({
        key: [...this.#p, "u", e.key[n + 2]!, "k", e.key[n + 3]!, e.key[n + 4]!],
        t: e.key[n + 1] as number,
      }));
    for (const { key, t } of idems) await this.#dropIdem(key, t, now);
    // 3. Trashed records past their undo window, with their chunks and changelogs.
    if (u !== null) {
      const rows = await this.#range<Trashed>({ prefix: [...this.#p, "u", u, "t"] });
      for (const row of rows) {
        if (row.value.t <= now) await this.#purge(u, row.key[n + 3]!, now, null);
      }
    } else {
      const due = await this.#range<number>(
        { prefix: [...this.#p, "xt"] },
        { batchSize: 500 },
        (e) => (e.key[n + 1] as number) > now,
      );
      for (const row of due) await this.#purge(row.key[n + 2]!, row.key[n + 3]!, now, row);
    }
    // 4. Chunk sets of writers that crashed before their head swap, and
    //    collections (chunks, changelog runs) a commit handed over.
    const cutoff = Date.now() - this.#orphanAgeMs;
    const intents = await this.#range<Intent>(
      { prefix: [...this.#p, "xw"] },
      { batchSize: 500 },
      (e) => (e.key[n + 1] as number) > cutoff,
    );
    for (const e of intents) {
      if (u !== null && !samePart(e.key[n + 2]!, u)) continue;
      await this.#collect(e.key, e.versionstamp, e.value);
    }
    // 5. Lapsed leases of one user (every lease key also expires by itself).
    if (u !== null) {
      const rows = await this.#range<LeaseRecord>({ prefix: [...this.#p, "u", u, "l"] });
      for (const row of rows) {
        if (row.value.expiresAt <= now) await this.#commit((op) => op.check(row).delete(row.key));
      }
    }
    return count;
  }

  /** Deletes one record if it is still expired at `before`; drops a stale expiry-index row. */
  async #reclaim(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    before: number,
    dueRow: Deno.KvEntry<number> | null,
  ): Promise<boolean> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const head = await this.#get<Head>(this.#headKey(u, h));
      const old = head.value;
      if (!old || old.e === null || old.e > before) {
        if (dueRow && old?.e !== dueRow.key[this.#p.length + 1]) {
          await this.#commit((op) => {
            op.check(head).check(dueRow).delete(dueRow.key);
          });
        }
        return false;
      }
      let after: Deno.KvKey[] = [];
      const res = await this.#commit((op) => {
        op.check(head);
        after = this.#dropHead(op, u, h, old);
      });
      if (res.ok) {
        await this.#afterCommit(after, res.versionstamp);
        return true;
      }
      await backoff(attempt);
    }
    return false;
  }

  /** Purges one trashed record if its undo window ended by `now`; drops a stale trash-index row. */
  async #purge(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    now: number,
    dueRow: Deno.KvEntry<number> | null,
  ): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const trash = await this.#get<Trashed>(this.#trashKey(u, h));
      const t = trash.value;
      if (!t || t.t > now) {
        if (dueRow && t?.t !== dueRow.key[this.#p.length + 1]) {
          await this.#commit((op) => {
            op.check(trash).check(dueRow).delete(dueRow.key);
          });
        }
        return;
      }
      let after: Deno.KvKey[] = [];
      const res = await this.#commit((op) => {
        op.check(trash);
        op.delete(this.#trashKey(u, h));
        op.delete(this.#trashExpiryKey(t.t, u, h));
        after = this.#dropBody(op, u, h, t.h);
      });
      if (res.ok) {
        await this.#afterCommit(after, res.versionstamp);
        return;
      }
      await backoff(attempt);
    }
  }

  async #dropIdem(key: Deno.KvKey, t: number, now: number): Promise<void> {
    const entry = await this.#get<IdemValue>(key);
    const v = entry.value;
    const u = key[this.#p.length + 1]!;
    if (v && v.t > now) return;
    const copyN = v?.n ?? 0;
    await this.#commit((op) => {
      op.check(entry).delete(this.#idemExpiryKey(t, key));
      if (v) {
        op.delete(key);
        if (v.t !== t) op.delete(this.#idemExpiryKey(v.t, key));
        if (v.d !== undefined && copyN <= DELETE_IN_COMMIT) {
          for (let i = 0; i < copyN; i++) op.delete(this.#copyKey(u, v.d, i));
        }
      }
    });
    if (v?.d !== undefined && copyN > DELETE_IN_COMMIT) {
      await this.#dropCopy(u, { d: v.d, n: copyN });
    }
  }

  /**
   * One page of the users that have at least one record, in the order of
   * their keys (UTF-8 byte order; users whose name is too long for a key,
   * or not well-formed Unicode, come first).
   *
   * @param query `after`: the last user of the previous page; `limit`: page size.
   * @returns Up to `limit` user names.
   */
  async listUsers(query: { after?: string; limit: number }): Promise<string[]> {
    const prefix: Deno.KvKey = [...this.#p, "n"];
    const startKey = query.after === undefined ? undefined : [...prefix, this.#user(query.after)];
    const out: string[] = [];
    let cursor: Deno.KvKey | undefined = startKey;
    let skipFirst = startKey !== undefined;
    while (out.length < query.limit) {
      const rows: Deno.KvEntry<string>[] = await this.#range<string>(
        cursor ? { prefix, start: cursor } : { prefix },
        { limit: Math.min(1000, query.limit - out.length + 1), batchSize: 1000 },
      );
      let progressed = false;
      for (const row of rows) {
        if (skipFirst && cursor && sameKey(row.key, cursor)) continue;
        progressed = true;
        cursor = row.key;
        const u = row.key[this.#p.length + 1]!;
        const any = await this.#range({ prefix: [...this.#p, "u", u, "h"] }, { limit: 1 });
        if (any.length > 0 && typeof row.value === "string") out.push(row.value);
        if (out.length >= query.limit) break;
      }
      skipFirst = true;
      if (!progressed) break;
    }
    return out;
  }

  /**
   * Writes `record` exactly as given when this user has no record with that
   * handle, or an older version of it (whose changelog is then dropped);
   * otherwise writes nothing.
   *
   * @param user The user.
   * @param record The record to restore.
   * @param ctx The write context (idempotency is ignored).
   * @returns What happened.
   */
  async restore(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<"inserted" | "replaced" | "kept"> {
    const u = this.#user(user), h = keyPart(record.handle, NAME_PART_MAX);
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      const head = await this.#get<Head>(this.#headKey(u, h));
      const old = head.value;
      if (old && old.v >= record.version) return "kept";
      const w = newId();
      const body = await this.#body(u, h, record.state);
      let ok = false;
      try {
        if (body) {
          // A replaced record's changelog is dropped: its history is unknown.
          const log = await this.#plan(u, h, old, undefined, ctx);
          let after: Deno.KvKey[] = [];
          const res = await this.#commit((op) => {
            op.check(head);
            after = this.#putHead(op, u, h, old, record, body, w, log);
            op.set(this.#userNameKey(u), user);
          });
          ok = res.ok || await this.#landed(u, h, w);
          if (ok) this.#changed(user, record.handle, res);
          if (res.ok) await this.#afterCommit(after, res.versionstamp);
        }
      } finally {
        if (!ok) await this.#release(body);
      }
      if (ok) return old ? "replaced" : "inserted";
      await this.#again(attempt, deadline, record.handle);
    }
  }

  /** {@inheritDoc Backend.acquireLease} */
  async acquireLease(
    user: string,
    handle: string,
    lease: LeaseRecord,
    now: number,
  ): Promise<LeaseOutcome> {
    const key = this.#leaseKey(user, handle);
    const value: LeaseRecord = { holder: lease.holder, expiresAt: lease.expiresAt };
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      const cur = await this.#get<LeaseRecord>(key);
      const l = cur.value;
      if (l && l.holder !== value.holder && l.expiresAt > now) {
        return { acquired: false, lease: { holder: l.holder, expiresAt: l.expiresAt } };
      }
      const res = await this.#commit((op) => {
        op.check(cur).set(key, value, { expireIn: Math.max(1, Math.round(value.expiresAt - now)) });
      });
      if (res.ok) return { acquired: true, lease: { ...value } };
      await this.#again(attempt, deadline, handle);
    }
  }

  /** {@inheritDoc Backend.releaseLease} */
  async releaseLease(user: string, handle: string, holder: string, now: number): Promise<boolean> {
    const key = this.#leaseKey(user, handle);
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0;; attempt++) {
      const cur = await this.#get<LeaseRecord>(key);
      if (cur.value?.holder !== holder) return false;
      const res = await this.#commit((op) => op.check(cur).delete(key));
      if (res.ok) return cur.value.expiresAt > now;
      await this.#again(attempt, deadline, handle);
    }
  }

  /** {@inheritDoc Backend.leases} */
  async leases(
    user: string,
    handles: readonly string[],
    now: number,
  ): Promise<Map<string, LeaseRecord>> {
    const batches: string[][] = [];
    for (let i = 0; i < handles.length; i += GET_MANY_MAX) {
      batches.push(handles.slice(i, i + GET_MANY_MAX));
    }
    const out = new Map<string, LeaseRecord>();
    await Promise.all(batches.map(async (batch) => {
      const keys = batch.map((h) => this.#leaseKey(user, h));
      const rows = await this.#io(() => this.#kv.getMany<LeaseRecord[]>(keys));
      rows.forEach(({ value: l }, i) => {
        if (l && l.expiresAt > now) {
          out.set(batch[i]!, { holder: l.holder, expiresAt: l.expiresAt });
        }
      });
    }));
    return out;
  }

  /**
   * {@inheritDoc Backend.subscribe}
   *
   * Writes through this object are heard of once they commit; those of other
   * `Deno.Kv`s through `kv.watch` on the handle's head key and, except on a
   * KV Connect endpoint, a poll of the watched heads' versionstamps every
   * 100 ms while anyone listens (`kv.watch` on a local file does not hear
   * other processes).
   */
  async subscribe(user: string, handle: string, listener: () => void): Promise<() => void> {
    if (this.#closed) throw new BackendError("The Deno KV backend is closed; open a new one.");
    const id = Listeners.key(user, handle);
    const remove = this.#listeners.add(user, handle, listener);
    const w = this.#watched.get(id) ?? this.#watch(id, user, handle);
    const unsubscribe = () => {
      remove();
      if (!this.#listeners.has(user, handle) && this.#watched.get(id) === w) this.#unwatch(id);
    };
    try {
      await w.ready;
    } catch (e) {
      unsubscribe();
      throw e;
    }
    return unsubscribe;
  }

  /** Starts watching the head of `(user, handle)`: its versionstamp now, then its `kv.watch` stream. */
  #watch(id: string, user: string, handle: string): Watched {
    const key = this.#headKey(this.#user(user), keyPart(handle, NAME_PART_MAX));
    let reader: ReadableStreamDefaultReader<Deno.KvEntryMaybe<unknown>[]> | undefined;
    let stopped = false;
    const w: Watched = {
      key,
      ready: this.#get(key).then((e) => {
        w.vs = e.versionstamp;
        if (stopped) return;
        reader = this.#kv.watch([key]).getReader();
        (async () => {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) return;
            this.#seen(id, w, value[0]!.versionstamp);
          }
        })().catch(() => {/* the KV closed, or the stream broke: the store's poll remains */});
      }),
      stop: async () => {
        stopped = true;
        await reader?.cancel().catch(() => {});
      },
    };
    this.#watched.set(id, w);
    if (this.#pollFeed && this.#feedTimer === undefined) {
      const timer = setInterval(() => {
        this.#feedPoll ??= this.#pollHeads().finally(() => this.#feedPoll = undefined);
      }, FEED_POLL_MS);
      Deno.unrefTimer(timer);
      this.#feedTimer = timer;
    }
    return w;
  }

  #unwatch(id: string): void {
    const w = this.#watched.get(id);
    this.#watched.delete(id);
    void w?.stop();
    if (this.#watched.size === 0) this.#stopFeed();
  }

  #stopFeed(): void {
    clearInterval(this.#feedTimer);
    this.#feedTimer = undefined;
  }

  /** Reads the watched heads' versionstamps, 10 keys a call, all calls at once. */
  async #pollHeads(): Promise<void> {
    const ws = [...this.#watched].filter(([, w]) => w.vs !== undefined);
    const calls: Promise<void>[] = [];
    for (let i = 0; i < ws.length; i += GET_MANY_MAX) {
      const batch = ws.slice(i, i + GET_MANY_MAX);
      calls.push(
        this.#kv.getMany(batch.map(([, w]) => w.key)).then(
          (rows) => rows.forEach((e, j) => this.#seen(batch[j]![0], batch[j]![1], e.versionstamp)),
          () => {/* locked by another process, or closing: the next poll tries again */},
        ),
      );
    }
    await Promise.all(calls);
  }

  /** Notifies the listeners of a watched head whose versionstamp moved. */
  #seen(id: string, w: Watched, vs: string | null): void {
    if (w.vs === vs) return;
    w.vs = vs;
    this.#listeners.notifyKey(id);
  }

  /**
   * Notifies the listeners of `(user, handle)` of this object's own commit to
   * its head: `res` is the commit (`null`: the head was deleted), so the feed
   * does not report the same versionstamp again.
   */
  #changed(
    user: string,
    handle: string,
    res: Deno.KvCommitResult | Deno.KvCommitError | null,
  ): void {
    if (this.#listeners.size === 0) return;
    const w = this.#watched.get(Listeners.key(user, handle));
    if (w && w.vs !== undefined && res?.ok !== false) w.vs = res ? res.versionstamp : null;
    this.#listeners.notify(user, handle);
  }

  /** {@inheritDoc Backend.close} */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopFeed();
    const watched = [...this.#watched.values()];
    this.#watched.clear();
    await Promise.all(watched.map((w) => w.stop()));
    await this.#feedPoll;
    if (this.#closeKv) {
      try {
        this.#kv.close();
      } catch { /* already closed */ }
    }
  }
}

/**
 * Reads a `denokv` URL without opening anything.
 *
 * @param url `denokv:///~/file.kv`, `denokv:////abs/path.kv`,
 *   `denokv:///rel/path.kv`, `denokv:///:memory:`, `denokv+https://host/…`
 *   or `denokv+http://host/…`.
 * @returns What the URL points at and the argument for `Deno.openKv`.
 * @throws {InvalidArgument} for anything else (credentials redacted). A KV
 *   Connect URL must not carry credentials: the token goes in
 *   `DENO_KV_ACCESS_TOKEN`.
 *
 * @example
 * ```ts
 * import { parseDenoKvUrl } from "@mcpstate/core/denokv";
 * parseDenoKvUrl("denokv+https://kv.example.com/db"); // { kind: "remote", path: "https://kv.example.com/db" }
 * parseDenoKvUrl("denokv:///:memory:"); // { kind: "memory", path: ":memory:" }
 * ```
 */
export function parseDenoKvUrl(url: string): DenoKvTarget {
  const forms =
    "denokv:///~/file.kv, denokv:////absolute/path.kv, denokv:///:memory:, denokv+https://host/… or denokv+http://host/…";
  if (typeof url !== "string") {
    throw new InvalidArgument(`A Deno KV URL must be a string: ${forms}.`, { field: "backend" });
  }
  const scheme = /^(denokv(?:\+https?)?):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === "denokv") {
    const { path, params } = filePathOf(url, url.slice(0, "denokv".length));
    if ([...params.keys()].length > 0) {
      throw new InvalidArgument(
        `The Deno KV URL "${
          redact(url).slice(0, 200)
        }" has query parameters, which it does not take. Use ${forms}.`,
        { field: "backend" },
      );
    }
    return path === ":memory:" ? { kind: "memory", path } : { kind: "file", path };
  }
  if (scheme === "denokv+https" || scheme === "denokv+http") {
    let parsed: URL;
    try {
      parsed = new URL(url.slice("denokv+".length));
    } catch {
      throw new InvalidArgument(
        `Malformed Deno KV URL "${redact(url).slice(0, 200)}". Use ${forms}.`,
        { field: "backend" },
      );
    }
    if (parsed.username !== "" || parsed.password !== "") {
      throw new InvalidArgument(
        `The Deno KV URL "${
          redact(url).slice(0, 200)
        }" carries credentials. Remove them from the URL and put the access token in the environment variable DENO_KV_ACCESS_TOKEN instead.`,
        { field: "backend" },
      );
    }
    if (parsed.hostname === "") {
      throw new InvalidArgument(
        `The Deno KV URL "${redact(url).slice(0, 200)}" names no host. Use ${forms}.`,
        { field: "backend" },
      );
    }
    return { kind: "remote", path: parsed.href };
  }
  throw new InvalidArgument(
    `"${redact(String(url)).slice(0, 200)}" is not a Deno KV URL. Use ${forms}.`,
    { field: "backend" },
  );
}

// ------------------------------------------------------------------ helpers

/** A key part for a user-supplied name: the name itself, or a SHA-256 digest (bytes) when it is too long or not well-formed Unicode. */
function keyPart(name: string, maxBytes: number): Deno.KvKeyPart {
  if (
    name.isWellFormed() && (name.length * 3 <= maxBytes || encoder.encode(name).length <= maxBytes)
  ) {
    return name;
  }
  // JSON.stringify escapes lone surrogates, so distinct names hash distinct texts.
  return new Uint8Array(createHash("sha256").update(JSON.stringify(name)).digest());
}

function samePart(a: Deno.KvKeyPart, b: Deno.KvKeyPart): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }
  return a === b;
}

function sameKey(a: Deno.KvKey, b: Deno.KvKey): boolean {
  return a.length === b.length && a.every((x, i) => samePart(x, b[i]!));
}

function encodeText(text: string): Encoded {
  if (text.isWellFormed()) return { bytes: encoder.encode(text), utf16: false };
  const bytes = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    bytes[2 * i] = c & 0xff;
    bytes[2 * i + 1] = c >> 8;
  }
  return { bytes, utf16: true };
}

function decodeBytes(bytes: Uint8Array, utf16: boolean): string {
  if (!utf16) return decoder.decode(bytes);
  let out = "";
  for (let i = 0; i + 1 < bytes.length; i += 2) {
    out += String.fromCharCode(bytes[i]! | (bytes[i + 1]! << 8));
  }
  return out;
}

/**
 * The stored value of a changelog entry: its text byte for byte, or, when
 * that is more than one KV value holds, an `omitted` marker built from it
 * (the store reads a marker as a log that no longer reaches back).
 */
function logValueOf(entry: ChangeEntry): LogValue {
  let enc = encodeText(entry.text);
  if (enc.bytes.length > ENTRY_MAX) enc = encodeText(markerOf(entry));
  const value: LogValue = { a: entry.at, b: enc.bytes };
  if (enc.utf16) value.x = true;
  return value;
}

/** `{"version","at","writer","op","omitted":true}` from an entry's JSON (from its fields when that is not JSON). */
function markerOf(entry: ChangeEntry): string {
  let o: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(entry.text);
    if (typeof parsed === "object" && parsed !== null) o = parsed as Record<string, unknown>;
  } catch { /* opaque text: fall back to the entry's own fields */ }
  return JSON.stringify({
    version: o.version ?? entry.version,
    at: o.at ?? new Date(entry.at).toISOString(),
    writer: o.writer ?? null,
    op: o.op ?? null,
    omitted: true,
  });
}

function recordOf(handle: string, head: Head, state: string): HandleRecord {
  return {
    handle,
    kind: head.k,
    state,
    version: head.v,
    createdAt: head.c,
    updatedAt: head.u,
    expiresAt: head.e,
    lastWriter: head.l,
  };
}

function indexOf(r: HandleRecord): IndexEntry {
  return {
    h: r.handle,
    k: r.kind,
    v: r.version,
    c: r.createdAt,
    u: r.updatedAt,
    e: r.expiresAt,
    l: r.lastWriter,
  };
}

function metaOfIndex(i: IndexEntry): HandleMeta {
  return {
    handle: i.h,
    kind: i.k,
    version: i.v,
    createdAt: i.c,
    updatedAt: i.u,
    expiresAt: i.e,
    lastWriter: i.l,
  };
}

function newId(): string {
  const b = crypto.getRandomValues(new Uint8Array(10));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** Full jitter: a random wait up to 2 ms × 2^attempt, at most 100 ms. */
function backoff(attempt: number): Promise<void> {
  const cap = Math.min(100, 2 * 2 ** Math.min(attempt, 6));
  return new Promise((resolve) => setTimeout(resolve, Math.random() * cap));
}

function scrub(text: string, secret: string | undefined): string {
  const out = secret ? text.replaceAll(secret, "***") : text;
  return redact(out);
}

/** A KV Connect URL for messages: credentials and query string removed. */
function displayUrl(href: string): string {
  try {
    const u = new URL(href);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "(malformed URL)";
  }
}

function checkPrefix(prefix: Deno.KvKey): Deno.KvKeyPart[] {
  const ok = Array.isArray(prefix) && prefix.length <= 4 &&
    prefix.every((p) =>
      (typeof p === "string" && p.length <= 64) ||
      (typeof p === "number" && Number.isFinite(p)) ||
      typeof p === "boolean" || typeof p === "bigint" ||
      (p instanceof Uint8Array && p.length <= 64)
    );
  if (!ok) {
    throw new InvalidArgument(
      'prefix must be a Deno KV key of at most 4 parts (strings of at most 64 characters, numbers, booleans, bigints or Uint8Arrays of at most 64 bytes), e.g. ["mcpstate"].',
      { field: "prefix" },
    );
  }
  return [...prefix];
}

function checkMs(ms: number, field: string): number {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidArgument(`${field} must be a number of milliseconds, 0 or more.`, { field });
  }
  return ms;
}
