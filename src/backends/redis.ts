/**
 * The Redis backend (`redis://`, `rediss://`, `redis+cluster://`,
 * `rediss+cluster://`): many server instances on many hosts share one Redis,
 * Valkey or Redis Cluster, which is how state follows a user across devices.
 *
 * Every write is one Lua script (EVALSHA, falling back to EVAL when the
 * server has not cached it) that touches only one user's keys, all in one
 * hash slot, so a record, its metadata and its index never disagree — not
 * even when a client dies between commands — and Redis Cluster works.
 * `read` is one `HGET`; `save` is one round trip. `update` (patch, touch)
 * runs the store's change in JavaScript on the last record seen (or a fresh
 * read) and commits it with a compare-and-set script; a conflict answers with
 * the current record, so a retry needs no extra read. Updates of one handle
 * from one process are queued, so only other processes cause retries.
 *
 * States are stored as the JSON text the store hands over, byte for byte:
 * Lua never parses them, so every number and string round-trips exactly.
 * Records expire in Redis at `expiresAt` plus the grace period, and a user's
 * index keys go with their last record; idempotency records expire after
 * 24 hours. Needs Redis 7.0 or later, or Valkey.
 *
 * A record's changelog lives in the record's own hash: the script that writes
 * the record appends the entry and trims the log, and the two expire, move to
 * the trash and are deleted together. A revoked record (with its changelog)
 * is renamed to a trash key that Redis drops at `trashUntil`; `sweep` leaves
 * the trash to that expiry.
 *
 * A lease is one string key beside the record (holder and expiry), which
 * Redis drops once it lapses. The change feed is pub/sub: every script that
 * changes a record publishes its handle on the user's channel, and `subscribe`
 * listens on a second connection, opened on first use (on a cluster, PUBLISH
 * reaches every node).
 *
 * URL forms:
 * - `redis://[user:pass@]host:port/db` — one server (`rediss://`: TLS).
 * - `redis+cluster://[user:pass@]host1:7000,host2:7001` — a Redis Cluster;
 *   list one or more nodes, the rest are discovered (`rediss+cluster://`: TLS).
 *
 * Query options:
 * - `prefix` — key prefix, default `mcpstate:`.
 * - `wait=N` — a write is acknowledged only after N replicas confirmed it
 *   (`WAIT`); otherwise it fails with `backend_error` (it was applied on the
 *   primary, but a failover could lose it). Default 0.
 * - `waitTimeout` — how long a write waits for those replicas, ms, default 1000.
 * - `connectTimeout` — ms, default 5000.
 * - `timeout` — when Redis sends nothing for this long while calls wait, the
 *   connection is dropped and they fail with `backend_error`; ms, default 5000
 *   (raised above `waitTimeout` when `wait` is on).
 *
 * @example Open by URL, or inject a client you configured yourself
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { RedisBackend } from "@mcpstate/core/redis";
 * import { Redis } from "ioredis";
 *
 * await using a = await HandleStore.fromUrl("redis://127.0.0.1:6379/0?wait=1");
 * await using b = new HandleStore(new RedisBackend(new Redis(), { prefix: "app:" }));
 * ```
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { Cluster, Redis } from "ioredis";
import type {
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  SaveOutcome,
  Step,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { BackendError, InvalidArgument, McpStateError, redact } from "../errors.ts";
import {
  ACQUIRE,
  CAS,
  CHANGES,
  INSERT,
  LIST,
  READ_LEASED,
  RELEASE,
  REMOVE,
  RESTORE,
  SAVE,
  SWEEP,
  UNTRASH,
} from "./_redis_scripts.ts";
import { Listeners } from "./_shared.ts";

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

/** Options of {@link RedisBackend}. */
export interface RedisBackendOptions {
  /** Prefix of every key. Default `mcpstate:`. Must not contain `{` or `}`. */
  prefix?: string;
  /**
   * Replicas that must confirm each write (`WAIT`) before it is
   * acknowledged. Default 0: acknowledged once the primary applied it.
   */
  waitReplicas?: number;
  /** How long a write waits for those replicas, in ms. Default 1000. */
  waitTimeoutMs?: number;
  /**
   * When calls have waited this long (ms) with no reply at all, drop the
   * connection so they fail with `backend_error` and the client reconnects.
   * Default: off for a client you pass in; `fromUrl` sets 5000 (`timeout`).
   */
  timeoutMs?: number;
  /**
   * Whether {@link RedisBackend.close} closes the client. Default `false`
   * for a client you pass in (you opened it, you close it); `fromUrl` sets it.
   */
  closeClient?: boolean;
}

type RedisClient = Redis | Cluster;

interface Script {
  lua: string;
  sha: string;
}

interface Keys {
  /** `P{T}:` — the user's key prefix. */
  base: string;
  /** The record hash. */
  rec: string;
  /** The index sorted set. */
  idx: string;
  /** The expiry sorted set. */
  exp: string;
  /** The trashed record hash. */
  trash: string;
  /** The encoded handle. */
  enc: string;
}

interface Queue {
  tail: Promise<void>;
  users: number;
}

/** A user's change channel while it has listeners: `ready` settles with its SUBSCRIBE. */
interface Channel {
  user: string;
  listeners: number;
  ready: Promise<void>;
}

type Reply = (string | null)[];

const DEFAULT_PREFIX = "mcpstate:";
const RAW_HANDLE = /^[a-z0-9_-]{1,256}$/;
const TWO_53 = 2n ** 53n;
/** Per-handle update queues of this process, by Redis and record key. */
const QUEUES = new Map<string, Queue>();
/**
 * Last records seen, by Redis and record key: guesses that save a read
 * before a compare-and-set, which alone decides.
 */
const GUESSES = new Map<string, HandleRecord>();
const GUESS_BYTES = { n: 0 };
/** Identities of injected clients (a client is its own Redis for queueing). */
const CLIENT_IDS = new WeakMap<object, string>();
const CLIENT_IDS_NEXT = { n: 0 };
const MAX_ATTEMPTS = 100;
const BACKOFF_AFTER = 8;
const LIST_CAP = 1000;
const GUESS_MAX_STATE = 65_536;
const GUESS_MAX_TOTAL = 4_194_304;
const SWEEP_BATCH = 500;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function script(lua: string): Script {
  return { lua, sha: createHash("sha1").update(lua).digest("hex") };
}

const S = {
  insert: script(INSERT),
  save: script(SAVE),
  cas: script(CAS),
  remove: script(REMOVE),
  untrash: script(UNTRASH),
  changes: script(CHANGES),
  restore: script(RESTORE),
  list: script(LIST),
  sweep: script(SWEEP),
  acquire: script(ACQUIRE),
  readLeased: script(READ_LEASED),
  release: script(RELEASE),
};

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64url");
}

/**
 * Encodes any string into `[A-Za-z0-9_-]` injectively: `u` + base64url of
 * its UTF-8 when well formed, else `j` + base64url of its JSON form (which
 * spells lone surrogates out), so no two strings share a code.
 */
function encodeName(s: string): string {
  return s.isWellFormed()
    ? "u" + b64url(encoder.encode(s))
    : "j" + b64url(encoder.encode(JSON.stringify(s)));
}

function decodeName(code: string): string {
  const text = decoder.decode(Buffer.from(code.slice(1), "base64url"));
  return code[0] === "j" ? JSON.parse(text) as string : text;
}

function encodeHandle(handle: string): string {
  return RAW_HANDLE.test(handle) ? handle : "~" + encodeName(handle);
}

function decodeHandle(code: string): string {
  return code.startsWith("~") ? decodeName(code.slice(1)) : code;
}

/** The index member of a record: listing order is its byte order. */
function member(updatedAt: number, enc: string): string {
  return (TWO_53 - BigInt(Math.floor(updatedAt))).toString(16).padStart(14, "0") + enc;
}

function writerText(w: string | null): string {
  return w === null ? "" : JSON.stringify(w);
}

/** The metadata field `m`: kind, version, createdAt, updatedAt, expiresAt, writer, tab-separated. */
function metaText(r: HandleMeta): string {
  return `${r.kind}\t${r.version}\t${r.createdAt}\t${r.updatedAt}\t${
    r.expiresAt === null ? "" : r.expiresAt
  }\t${writerText(r.lastWriter)}`;
}

function metaOf(handle: string, m: string): HandleMeta {
  const [kind = "", v, c, u, e = "", w = ""] = m.split("\t");
  return {
    handle,
    kind,
    version: Number(v),
    createdAt: Number(c),
    updatedAt: Number(u),
    expiresAt: e === "" ? null : Number(e),
    lastWriter: w === "" ? null : JSON.parse(w) as string,
  };
}

function recordOf(handle: string, s: string | null | undefined, m: string): HandleRecord {
  const meta = metaOf(handle, m);
  return {
    handle,
    kind: meta.kind,
    state: s ?? "",
    version: meta.version,
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
    expiresAt: meta.expiresAt,
    lastWriter: meta.lastWriter,
  };
}

/** A record from its `d` field (metadata, newline, state), or `null` when absent. */
function recordOfD(handle: string, d: string | null | undefined): HandleRecord | null {
  if (typeof d !== "string") return null;
  const nl = d.indexOf("\n");
  return recordOf(handle, d.slice(nl + 1), d.slice(0, nl));
}

/** A lease from its stored text (expiresAt, tab, holder). */
function leaseOf(text: string): LeaseRecord {
  const tab = text.indexOf("\t");
  return { holder: text.slice(tab + 1), expiresAt: Number(text.slice(0, tab)) };
}

function expiresText(e: number | null): string {
  return e === null ? "" : String(e);
}

/**
 * The changelog fields of a script header — entry version, at, maxEntries,
 * and the cutoff below which entries are too old — empty without an entry.
 */
function logHead(entry: ChangeEntry | undefined, ctx: WriteContext): string {
  if (!entry) return "\t\t\t";
  const r = ctx.retention;
  const cutoff = r ? ctx.now - r.maxAgeMs : NaN;
  return `${entry.version}\t${entry.at}\t${r ? r.maxEntries : ""}\t${
    Number.isFinite(cutoff) ? cutoff : ""
  }`;
}

/** The script arguments after the header: the entry as stored (`at`, tab, text), if any. */
function logArgs(entry: ChangeEntry | undefined): string[] {
  return entry ? [`${entry.at}\t${entry.text}`] : [];
}

/** Milliseconds until Redis may drop a record (`-1`: never), relative to the store's clock. */
function ttlOf(expiresAt: number | null, ctx: WriteContext): number {
  if (expiresAt === null) return -1;
  return Math.max(Math.ceil(expiresAt + ctx.graceMs - ctx.now), 1);
}

/** Unicode code point order (the byte order of UTF-8). */
function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator](), ib = b[Symbol.iterator]();
  while (true) {
    const x = ia.next(), y = ib.next();
    if (x.done || y.done) return x.done ? (y.done ? 0 : -1) : 1;
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith("NOSCRIPT");
}

/**
 * A {@link Backend} on Redis, Valkey or Redis Cluster through ioredis.
 *
 * @example
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { RedisBackend } from "@mcpstate/core/redis";
 * await using store = new HandleStore(await RedisBackend.fromUrl("redis://127.0.0.1:6379"));
 * ```
 */
export class RedisBackend implements Backend {
  /** Redis expires records itself at `expiresAt` plus the grace period. */
  readonly reclaimsExpired = true;
  readonly #client: RedisClient;
  readonly #prefix: string;
  readonly #wait: number;
  readonly #waitTimeout: number;
  readonly #closeClient: boolean;
  /** Which Redis this is, for sharing the per-handle queues of one process. */
  #scope: string;
  readonly #bases = new Map<string, string>();
  #users: { at: number; after: string | undefined; names: string[] } | undefined;
  #closed = false;
  #lastError: { message: string; at: number } | undefined;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  /** Calls waiting for Redis, and when one last completed (or the first started). */
  #pending = 0;
  #progress = 0;
  readonly #listeners = new Listeners();
  /** The subscriber connection, opened by the first `subscribe`. */
  #sub: Promise<RedisClient> | undefined;
  /** Channels subscribed (or being subscribed), by name. */
  readonly #channels = new Map<string, Channel>();
  /** Channels left while the subscriber was down (ioredis would resubscribe them). */
  readonly #stale = new Set<string>();
  /** Feed deliveries held until the client is ready (`"all"`: every listener). */
  #held: Set<string> | "all" | undefined;
  readonly #onError = (e: unknown): void => {
    this.#lastError = { message: errorText(e), at: Date.now() };
  };

  /**
   * Wraps an ioredis client or cluster client that you opened.
   *
   * @param client A `Redis` or `Cluster` from ioredis.
   * @param options Key prefix, replica wait, whether `close()` closes the client.
   */
  constructor(client: Redis | Cluster, options: RedisBackendOptions = {}) {
    const prefix = options.prefix ?? DEFAULT_PREFIX;
    if (typeof prefix !== "string" || /[{}]/.test(prefix)) {
      throw new InvalidArgument("The Redis key prefix must be a string without { or }.", {
        field: "prefix",
      });
    }
    const wait = options.waitReplicas ?? 0;
    const waitTimeout = options.waitTimeoutMs ?? 1000;
    if (!Number.isSafeInteger(wait) || wait < 0) {
      throw new InvalidArgument("wait must be a whole number of replicas, 0 or more.", {
        field: "wait",
      });
    }
    if (!Number.isSafeInteger(waitTimeout) || waitTimeout < 1) {
      throw new InvalidArgument("waitTimeout must be a whole number of milliseconds, at least 1.", {
        field: "waitTimeout",
      });
    }
    const timeout = options.timeoutMs;
    if (timeout !== undefined && (!Number.isSafeInteger(timeout) || timeout < 1)) {
      throw new InvalidArgument("timeout must be a whole number of milliseconds, at least 1.", {
        field: "timeout",
      });
    }
    this.#client = client;
    let id = CLIENT_IDS.get(client);
    if (id === undefined) CLIENT_IDS.set(client, id = `client ${CLIENT_IDS_NEXT.n++}`);
    this.#scope = id;
    client.on("error", this.#onError);
    this.#prefix = prefix;
    this.#wait = wait;
    this.#waitTimeout = waitTimeout;
    this.#closeClient = options.closeClient ?? false;
    if (timeout !== undefined) {
      // One cheap timer for the whole client instead of one per command.
      this.#watchdog = setInterval(() => {
        if (this.#pending > 0 && Date.now() - this.#progress > timeout) {
          this.#lastError = { message: `timed out: no reply for ${timeout} ms`, at: Date.now() };
          this.#progress = Date.now();
          this.#client.disconnect(true);
        }
      }, Math.max(25, Math.min(1000, Math.floor(timeout / 4))));
      Deno.unrefTimer(this.#watchdog);
    }
  }

  /**
   * Opens a backend from a URL and waits until Redis answers.
   *
   * `redis://[user:pass@]host:port/db`, `rediss://…` (TLS),
   * `redis+cluster://[user:pass@]host1:port1,host2:port2` and
   * `rediss+cluster://…`, with the query options `prefix`, `wait`,
   * `waitTimeout`, `connectTimeout` and `timeout`.
   *
   * @param url The backend URL.
   * @returns The connected backend; `close()` closes its connection.
   * @throws {InvalidArgument} for a malformed URL (credentials redacted).
   * @throws {BackendError} when Redis cannot be reached.
   */
  static async fromUrl(url: string): Promise<RedisBackend> {
    const cfg = parseRedisUrl(url);
    const common = {
      connectTimeout: cfg.connectTimeout,
      maxRetriesPerRequest: 0,
      disconnectTimeout: 0,
      autoResendUnfulfilledCommands: false,
      protocol: 2 as const,
      connectionName: "mcpstate",
      ...(cfg.username === undefined ? {} : { username: cfg.username }),
      ...(cfg.password === undefined ? {} : { password: cfg.password }),
    };
    let client: RedisClient;
    if (cfg.cluster) {
      client = new Cluster(cfg.hosts, {
        lazyConnect: true,
        enableOfflineQueue: false,
        retryDelayOnFailover: 200,
        retryDelayOnClusterDown: 200,
        retryDelayOnTryAgain: 100,
        maxRedirections: 16,
        slotsRefreshTimeout: 2000,
        clusterRetryStrategy: (times: number) => Math.min(100 * times, 1000),
        redisOptions: {
          ...common,
          ...(cfg.tls ? { tls: {} } : {}),
        },
      });
    } else {
      const h = cfg.hosts[0]!;
      client = new Redis({
        ...common,
        host: h.host,
        port: h.port,
        db: cfg.db,
        lazyConnect: true,
        enableOfflineQueue: false,
        retryStrategy: (times: number) =>
          Math.min(50 * 2 ** Math.min(times, 5), 1000) + Math.floor(Math.random() * 100),
        ...(cfg.tls ? { tls: { servername: h.host } } : {}),
      });
    }
    const quiet = () => {/* surfaced per call as backend_error */};
    client.on("error", quiet);
    try {
      await client.connect();
    } catch (e) {
      client.disconnect();
      throw new BackendError(
        `Could not connect to Redis at ${redact(url)}: ${
          errorText(e)
        }. Check that Redis is running and reachable, and the URL's host, port and password.`,
        { cause: e },
      );
    }
    client.off("error", quiet);
    const backend = new RedisBackend(client, {
      prefix: cfg.prefix,
      waitReplicas: cfg.wait,
      waitTimeoutMs: cfg.waitTimeout,
      timeoutMs: cfg.timeout,
      closeClient: true,
    });
    // Stores of one process on the same Redis queue their updates of one
    // handle together, so they never race each other's compare-and-set.
    backend.#scope = `${cfg.cluster ? "cluster" : "redis"} ${cfg.username ?? ""}@${
      cfg.hosts.map((h) => `${h.host}:${h.port}`).join(",")
    }/${cfg.db}`;
    return backend;
  }

  /**
   * The Redis key that holds a user's record of `handle`, or, without a
   * handle, the user's index key. Every key of one user shares its hash slot,
   * so `CLUSTER KEYSLOT` of this key names the node that holds the user.
   *
   * @param user The user.
   * @param handle A handle.
   * @returns The key name.
   */
  keyOf(user: string, handle?: string): string {
    const k = this.#keys(user, handle ?? "");
    return handle === undefined ? k.idx : k.rec;
  }

  #base(user: string): string {
    let base = this.#bases.get(user);
    if (base === undefined) {
      if (this.#bases.size >= 1024) this.#bases.clear();
      base = `${this.#prefix}{${encodeName(user)}}:`;
      this.#bases.set(user, base);
    }
    return base;
  }

  #keys(user: string, handle: string): Keys {
    const base = this.#base(user);
    const enc = encodeHandle(handle);
    return {
      base,
      rec: `${base}r:${enc}`,
      idx: `${base}i`,
      exp: `${base}x`,
      trash: `${base}t:${enc}`,
      enc,
    };
  }

  #leaseKey(user: string, handle: string): string {
    return `${this.#base(user)}l:${encodeHandle(handle)}`;
  }

  #idemKey(k: Keys, ctx: WriteContext): string | undefined {
    const c = ctx.idempotency;
    return c && `${k.base}d:${encodeHandle(c.scope)}:${encodeName(c.key)}`;
  }

  /** fp, till, ittl, h of the idempotency claim (empty fields without one). */
  #idemArgs(ctx: WriteContext, enc: string): string {
    const c = ctx.idempotency;
    if (!c) return "\t\t\t";
    return `${c.fingerprint}\t${c.expiresAt}\t${Math.max(c.expiresAt - ctx.now, 1)}\t${enc}`;
  }

  /**
   * Runs a script. `wrote` tells from its reply whether it wrote; with the
   * replica wait on, such a write is followed by `WAIT`, in the same
   * pipeline to the same node.
   */
  async #run(
    s: Script,
    keys: string[],
    args: string[],
    wrote?: (reply: unknown) => boolean,
  ): Promise<unknown> {
    const c = this.#client;
    return await this.#cmd(async () => {
      if (!wrote || this.#wait === 0) {
        try {
          return await c.evalsha(s.sha, keys.length, ...keys, ...args);
        } catch (e) {
          if (!isNoScript(e)) throw e;
          return await c.eval(s.lua, keys.length, ...keys, ...args);
        }
      }
      let useSha = true;
      while (true) {
        const p = c.pipeline();
        if (useSha) p.evalsha(s.sha, keys.length, ...keys, ...args);
        else p.eval(s.lua, keys.length, ...keys, ...args);
        p.call("WAIT", String(this.#wait), String(this.#waitTimeout));
        const res = await p.exec();
        if (!res) throw new Error("The pipeline was discarded.");
        const [[err, reply] = [null, null], [werr, acked] = [null, null]] = res;
        if (err) {
          if (useSha && isNoScript(err)) {
            useSha = false;
            continue;
          }
          throw err;
        }
        if (werr) throw werr;
        if (Number(acked) < this.#wait && wrote(reply)) {
          throw new BackendError(
            `The write reached the Redis primary, but only ${
              Number(acked)
            } of ${this.#wait} replicas confirmed it within ${this.#waitTimeout} ms, so a failover now could lose it. Re-read the handle before retrying; check the replicas' health.`,
            { details: { replicas_acked: Number(acked), replicas_required: this.#wait } },
          );
        }
        return reply;
      }
    });
  }

  #fail(e: unknown): McpStateError {
    if (e instanceof McpStateError) return e;
    let msg = errorText(e);
    if (/^(ERR|WRONGTYPE|OOM|NOPERM|MISCONF|NOAUTH|WRONGPASS|BUSY|NOSCRIPT)/.test(msg)) {
      return new BackendError(
        `Redis refused the operation: ${msg}. Nothing was changed by it; fix the server's state or configuration, then retry.`,
        { cause: e },
      );
    }
    // A dropped connection fails queued calls with a generic error; the
    // connection's own error (timeout, refused, reset) says more.
    const last = this.#lastError;
    if (/max retries per request|Connection is closed/i.test(msg) && last) {
      if (Date.now() - last.at < 10_000) msg = last.message;
    }
    const what = /timed out|timeout/i.test(msg)
      ? "Redis did not answer in time"
      : "Redis is unreachable or failing over";
    return new BackendError(
      `${what} (${msg}). A read can simply be retried; a write may or may not have been applied, so re-read the handle before retrying. The store reconnects by itself once Redis is back.`,
      { cause: e },
    );
  }

  /** Runs calls to Redis: maps failures to `backend_error` and tracks progress for the timeout. */
  async #cmd<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new BackendError("The Redis backend is closed; open a new store.");
    if (this.#pending++ === 0) this.#progress = Date.now();
    try {
      return await fn();
    } catch (e) {
      throw this.#fail(e);
    } finally {
      this.#pending--;
      this.#progress = Date.now();
    }
  }

  #replayOf(reply: Reply, handle: string | null): Replayed {
    // {'R', f, n, h, d}
    const fingerprint = reply[1] ?? "";
    if (reply[2] === "1") return { replayed: true, fingerprint, result: null };
    const h = reply[3] ? decodeHandle(reply[3]) : handle ?? "";
    return { replayed: true, fingerprint, result: recordOfD(h, reply[4]) };
  }

  /** {@inheritDoc Backend.insert} */
  async insert(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<{ inserted: boolean } | Replayed> {
    const k = this.#keys(user, record.handle);
    const ik = this.#idemKey(k, ctx);
    const head = `${ctx.now}\t${member(record.updatedAt, k.enc)}\t${
      expiresText(record.expiresAt)
    }\t${ttlOf(record.expiresAt, ctx)}\t${this.#idemArgs(ctx, k.enc)}\t${
      logHead(ctx.entry, ctx)
    }\t${metaText(record)}`;
    const args = [record.state, head, ...logArgs(ctx.entry)];
    const reply = await this.#run(
      S.insert,
      ik ? [k.rec, k.idx, k.exp, k.trash, ik] : [k.rec, k.idx, k.exp, k.trash],
      args,
      wroteOne,
    );
    if (Array.isArray(reply)) return this.#replayOf(reply, record.handle);
    if (reply !== 1) return { inserted: false };
    this.#guess(k.rec, { ...record });
    this.#listeners.notify(user, record.handle);
    return { inserted: true };
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<HandleRecord | null> {
    return this.#read(this.#keys(user, handle), handle);
  }

  async #read(k: Keys, handle: string): Promise<HandleRecord | null> {
    const d = await this.#cmd(() => this.#client.hget(k.rec, "d"));
    return recordOfD(handle, d);
  }

  /** {@inheritDoc Backend.save} */
  async save(
    user: string,
    handle: string,
    write: ConditionalWrite,
    ctx: WriteContext,
  ): Promise<SaveOutcome | Replayed> {
    const k = this.#keys(user, handle);
    const ik = this.#idemKey(k, ctx);
    const e = write.expiresAt === "keep" ? "keep" : expiresText(write.expiresAt);
    const head = `${ctx.now}\t${ctx.graceMs}\t${write.expectVersion}\t${write.updatedAt}\t${e}\t${
      member(write.updatedAt, k.enc)
    }\t${this.#idemArgs(ctx, k.enc)}\t${writerText(write.lastWriter)}`;
    const args = [write.state, head];
    const reply = await this.#run(
      S.save,
      ik ? [k.rec, k.idx, k.exp, ik] : [k.rec, k.idx, k.exp],
      args,
      (r) => typeof r === "string",
    ) as string | Reply;
    if (typeof reply === "string") {
      const record = recordOf(handle, write.state, reply);
      this.#guess(k.rec, record);
      this.#listeners.notify(user, handle);
      return { ok: true, record: { ...record } };
    }
    if (reply[0] === "R") {
      this.#guess(k.rec, null);
      return this.#replayOf(reply, handle);
    }
    const current = this.#guess(k.rec, recordOfD(handle, reply[1]));
    return { ok: false, current: current && { ...current } };
  }

  /** {@inheritDoc Backend.update} */
  async update(
    user: string,
    handle: string,
    change: Change,
    ctx: WriteContext,
  ): Promise<UpdateOutcome | Replayed> {
    const k = this.#keys(user, handle);
    const out = await this.#serial(k.rec, () => this.#update(k, handle, change, ctx));
    if ("written" in out && out.written) this.#listeners.notify(user, handle);
    return out;
  }

  async #update(
    k: Keys,
    handle: string,
    change: Change,
    ctx: WriteContext,
  ): Promise<UpdateOutcome | Replayed> {
    const ik = this.#idemKey(k, ctx);
    let current: HandleRecord | null;
    let confirmed: boolean;
    const guess = GUESSES.get(`${this.#scope}\n${k.rec}`);
    if (guess !== undefined) {
      current = guess;
      confirmed = false;
    } else {
      const first = await this.#readForUpdate(k, handle, ik, ctx);
      if ("replayed" in first) return first;
      current = this.#guess(k.rec, first.record);
      confirmed = true;
    }
    for (let attempt = 1;; attempt++) {
      let step: Step | null | undefined;
      try {
        step = change(current === null ? null : { ...current });
      } catch (e) {
        if (confirmed) throw e;
        step = undefined; // decided below, on a fresh read
      }
      // The step's entry was made from `current`, which the compare-and-set
      // checks: it is appended exactly when this record is written.
      const next = step && step.record;
      const entry = step ? step.entry : undefined;
      if (!confirmed && (next === undefined || (next === null && !ik))) {
        // The guess may be stale: decide on a fresh read.
        const fresh = await this.#readForUpdate(k, handle, ik, ctx);
        if ("replayed" in fresh) return fresh;
        current = this.#guess(k.rec, fresh.record);
        confirmed = true;
        continue;
      }
      if (next === undefined) continue; // unreachable: a throw on a confirmed record rethrows
      if (next === null && !ik) return { record: current && { ...current }, written: false };
      const expect = current === null ? "\t" : `${current.version}\t${current.createdAt}`;
      const write = next === null
        ? "N\t" + expect + "\t\t\t"
        : `W\t${expect}\t${member(next.updatedAt, k.enc)}\t${expiresText(next.expiresAt)}\t${
          ttlOf(next.expiresAt, ctx)
        }`;
      const head = `${ctx.now}\t${write}\t${this.#idemArgs(ctx, k.enc)}\t${logHead(entry, ctx)}\t${
        next === null ? "" : metaText(next)
      }`;
      const args = [next === null ? "" : next.state, head, ...logArgs(entry)];
      const answer = await this.#run(
        S.cas,
        ik ? [k.rec, k.idx, k.exp, ik] : [k.rec, k.idx, k.exp],
        args,
        wroteOne,
      );
      if (answer === 1) {
        const record = next ?? current;
        this.#guess(k.rec, record && { ...record });
        return { record: record && { ...record }, written: next !== null };
      }
      const reply = answer as Reply;
      if (reply[0] === "R") {
        this.#guess(k.rec, null);
        return this.#replayOf(reply, handle);
      }
      current = this.#guess(k.rec, recordOfD(handle, reply[1]));
      confirmed = true;
      if (attempt >= MAX_ATTEMPTS) {
        throw new BackendError(
          `Handle "${handle}" is changing too fast: ${attempt} attempts to apply this change each lost to another writer. Nothing was applied; retry shortly.`,
        );
      }
      // A conflict returns the current record, so an immediate retry is
      // cheap and usually wins; only a long losing streak backs off, with
      // jitter (timers are too coarse to help earlier).
      if (attempt >= BACKOFF_AFTER) {
        const cap = Math.min(2 ** (attempt - BACKOFF_AFTER), 20);
        await new Promise((r) => setTimeout(r, Math.random() * cap));
      }
    }
  }

  async #readForUpdate(
    k: Keys,
    handle: string,
    ik: string | undefined,
    ctx: WriteContext,
  ): Promise<{ record: HandleRecord | null } | Replayed> {
    if (!ik) return { record: await this.#read(k, handle) };
    const res = await this.#cmd(() =>
      this.#client.pipeline()
        .hmget(ik, "f", "t", "n", "h", "d")
        .hget(k.rec, "d")
        .exec()
    );
    if (!res) throw new BackendError("Redis discarded a read; retry.");
    const [[e1, idem] = [null, null], [e2, rec] = [null, null]] = res;
    if (e1 || e2) throw this.#fail(e1 ?? e2);
    const i = idem as Reply;
    if (i[0] !== null && Number(i[1]) > ctx.now) {
      return this.#replayOf(["R", i[0] ?? null, i[2] ?? null, ...i.slice(3)], handle);
    }
    return { record: recordOfD(handle, rec as string | null) };
  }

  /**
   * Queues calls on one key in this process (shared by every backend on the
   * same Redis), so they do not race each other's compare-and-set.
   */
  async #serial<T>(rec: string, fn: () => Promise<T>): Promise<T> {
    const key = `${this.#scope}\n${rec}`;
    let q = QUEUES.get(key);
    if (!q) {
      q = { tail: Promise.resolve(), users: 0 };
      QUEUES.set(key, q);
    }
    q.users++;
    const prev = q.tail;
    let done!: () => void;
    q.tail = new Promise<void>((r) => done = r);
    try {
      await prev;
      return await fn();
    } finally {
      done();
      if (--q.users === 0) QUEUES.delete(key);
    }
  }

  /**
   * Remembers (or, with `null`, forgets) the last record seen for a key and
   * returns it. Shared by the backends of this process on the same Redis;
   * only states up to 64 KiB are kept, 4 MiB in all, oldest out.
   */
  #guess(rec: string, record: HandleRecord | null): HandleRecord | null {
    const key = `${this.#scope}\n${rec}`;
    const old = GUESSES.get(key);
    if (old !== undefined) {
      GUESSES.delete(key);
      GUESS_BYTES.n -= old.state.length;
    }
    if (record !== null && record.state.length <= GUESS_MAX_STATE) {
      GUESSES.set(key, record);
      GUESS_BYTES.n += record.state.length;
      for (const [k, r] of GUESSES) {
        if (GUESS_BYTES.n <= GUESS_MAX_TOTAL) break;
        GUESSES.delete(k);
        GUESS_BYTES.n -= r.state.length;
      }
    }
    return record;
  }

  /** {@inheritDoc Backend.remove} */
  async remove(
    user: string,
    handle: string,
    ctx: WriteContext,
  ): Promise<{ removed: boolean } | Replayed> {
    const k = this.#keys(user, handle);
    const ik = this.#idemKey(k, ctx);
    const args = [`${ctx.now}\t${this.#idemArgs(ctx, "")}\t${ctx.trashUntil ?? ""}`];
    const reply = await this.#run(
      S.remove,
      ik ? [k.rec, k.idx, k.exp, k.trash, ik] : [k.rec, k.idx, k.exp, k.trash],
      args,
      wroteOne,
    );
    this.#guess(k.rec, null);
    if (Array.isArray(reply)) return this.#replayOf(reply, handle);
    if (reply === 1) this.#listeners.notify(user, handle);
    return { removed: reply === 1 };
  }

  /** {@inheritDoc Backend.untrash} */
  async untrash(user: string, handle: string, ctx: WriteContext): Promise<HandleRecord | null> {
    const k = this.#keys(user, handle);
    const d = await this.#run(
      S.untrash,
      [k.rec, k.idx, k.exp, k.trash],
      [`${ctx.now}\t${ctx.graceMs}`],
      (r) => r !== null,
    ) as string | null;
    const record = recordOfD(handle, d);
    if (record !== null) {
      this.#guess(k.rec, { ...record });
      this.#listeners.notify(user, handle);
    }
    return record;
  }

  /** {@inheritDoc Backend.changes} */
  async changes(user: string, handle: string, afterVersion: number): Promise<ChangeEntry[]> {
    const k = this.#keys(user, handle);
    if (Number.isNaN(afterVersion) || afterVersion === Infinity) return [];
    const after = Math.max(Math.floor(afterVersion), -1);
    const reply = await this.#run(S.changes, [k.rec], [String(after)]) as Reply;
    const out: ChangeEntry[] = [];
    const first = Number(reply[0]);
    for (let i = 1; i < reply.length; i++) {
      const e = reply[i];
      if (typeof e !== "string") break; // cannot happen: entries lo..hi all exist
      const tab = e.indexOf("\t");
      out.push({ version: first + i - 1, at: Number(e.slice(0, tab)), text: e.slice(tab + 1) });
    }
    return out;
  }

  /** {@inheritDoc Backend.list} */
  async list(user: string, q: ListQuery): Promise<HandleMeta[]> {
    const base = this.#base(user);
    const rows: HandleMeta[] = [];
    let start = q.after ? "(" + member(q.after.updatedAt, encodeHandle(q.after.handle)) : "-";
    while (rows.length < q.limit) {
      const [next, got] = await this.#run(S.list, [`${base}i`, `${base}x`], [
        start,
        String(q.limit - rows.length),
        q.kind ?? "",
        q.liveAt === undefined ? "" : String(q.liveAt),
        `${base}r:`,
        String(LIST_CAP),
      ]) as [string, Reply[]];
      for (const [x, m] of got) rows.push(metaOf(decodeHandle((x ?? "").slice(14)), m ?? ""));
      if (next === "") break;
      start = next;
    }
    return rows;
  }

  /**
   * Deletes records whose `expiresAt <= expiredAtOrBefore`, with their
   * changelogs (of one user, or of every user when `user` is `null`), and
   * returns how many. Trashed records and idempotency records need no sweep:
   * Redis drops them at their expiry.
   *
   * @param user The user, or `null` for all.
   * @param expiredAtOrBefore The expiry cutoff, epoch ms.
   * @param _now Unused: the trash and idempotency records expire natively.
   * @returns How many records were deleted.
   */
  async sweep(user: string | null, expiredAtOrBefore: number, _now: number): Promise<number> {
    if (user !== null) return await this.#sweepBase(this.#base(user), expiredAtOrBefore);
    let n = 0;
    for (const key of await this.#scanKeys("x")) {
      n += await this.#sweepBase(key.slice(0, -1), expiredAtOrBefore);
    }
    return n;
  }

  async #sweepBase(base: string, cutoff: number): Promise<number> {
    let n = 0;
    while (true) {
      const [deleted, examined] = await this.#run(S.sweep, [`${base}i`, `${base}x`], [
        String(cutoff),
        `${base}r:`,
        String(SWEEP_BATCH),
      ], (r) => Array.isArray(r) && r[0] > 0) as [number, number];
      n += deleted;
      if (examined < SWEEP_BATCH) return n;
    }
  }

  /** Every key `P{T}:<suffix>` on every primary (SCAN; on a cluster, per master). */
  async #scanKeys(suffix: string): Promise<string[]> {
    const c = this.#client;
    const nodes = c instanceof Cluster ? c.nodes("master") : [c];
    const pattern = this.#prefix.replace(/[*?[\]\\]/g, "\\$&") + "{*}:" + suffix;
    const keys = new Set<string>();
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, batch] = await this.#cmd(() =>
          node.scan(cursor, "MATCH", pattern, "COUNT", 1000)
        );
        for (const key of batch) keys.add(key);
        cursor = next;
      } while (cursor !== "0");
    }
    return [...keys];
  }

  /**
   * Users with at least one record, in Unicode code point order (the byte
   * order of their UTF-8). One page scans the keyspace once; the next page
   * reuses that scan for a minute.
   *
   * @param query Start strictly after `after`; at most `limit` users.
   * @returns The page.
   */
  async listUsers(query: { after?: string; limit: number }): Promise<string[]> {
    let names: string[];
    const cached = this.#users;
    if (cached && cached.after === query.after && Date.now() - cached.at < 60_000) {
      names = cached.names;
    } else {
      const start = this.#prefix.length + 1;
      names = (await this.#scanKeys("i")).map((key) => decodeName(key.slice(start, -3)));
      names.sort(compareCodePoints);
    }
    const after = query.after;
    const rest = after === undefined ? names : names.filter((n) => compareCodePoints(n, after) > 0);
    const page: string[] = [];
    let i = 0;
    for (; i < rest.length && page.length < query.limit; i++) {
      const user = rest[i]!;
      if ((await this.list(user, { limit: 1 })).length > 0) page.push(user);
    }
    const last = page[page.length - 1];
    this.#users = last === undefined ? undefined : { at: Date.now(), after: last, names: rest };
    return page;
  }

  /** {@inheritDoc Backend.restore} */
  async restore(
    user: string,
    record: HandleRecord,
    ctx: WriteContext,
  ): Promise<"inserted" | "replaced" | "kept"> {
    const k = this.#keys(user, record.handle);
    const args = [
      record.state,
      `${member(record.updatedAt, k.enc)}\t${expiresText(record.expiresAt)}\t${record.version}\t${
        ttlOf(record.expiresAt, ctx)
      }\t${metaText(record)}`,
    ];
    const outcome = await this.#run(S.restore, [k.rec, k.idx, k.exp], args, (r) => r !== "kept") as
      | "inserted"
      | "replaced"
      | "kept";
    if (outcome !== "kept") this.#listeners.notify(user, record.handle);
    return outcome;
  }

  /** {@inheritDoc Backend.acquireLease} */
  async acquireLease(
    user: string,
    handle: string,
    lease: LeaseRecord,
    now: number,
  ): Promise<LeaseOutcome> {
    const ttl = Math.max(Math.ceil(lease.expiresAt - now), 1);
    const reply = await this.#run(S.acquire, [this.#leaseKey(user, handle)], [
      String(now),
      String(ttl),
      String(lease.expiresAt),
      lease.holder,
    ], wroteOne);
    if (reply === 1) return { acquired: true, lease: { ...lease } };
    return { acquired: false, lease: leaseOf(reply as string) };
  }

  /** {@inheritDoc Backend.releaseLease} */
  async releaseLease(user: string, handle: string, holder: string, now: number): Promise<boolean> {
    const key = this.#leaseKey(user, handle);
    return await this.#run(S.release, [key], [String(now), holder], wroteOne) === 1;
  }

  /** {@inheritDoc Backend.readLeased} */
  async readLeased(
    user: string,
    handle: string,
    now: number,
  ): Promise<{ record: HandleRecord | null; lease: LeaseRecord | null }> {
    const k = this.#keys(user, handle);
    // One command: both keys sit in the user's slot.
    const [d, l] = await this.#run(S.readLeased, [k.rec, this.#leaseKey(user, handle)], []) as [
      string | null,
      string | null,
    ];
    const lease = typeof l === "string" ? leaseOf(l) : null;
    return {
      record: recordOfD(handle, d as string | null),
      lease: lease && lease.expiresAt > now ? lease : null,
    };
  }

  /** {@inheritDoc Backend.leases} */
  async leases(
    user: string,
    handles: readonly string[],
    now: number,
  ): Promise<Map<string, LeaseRecord>> {
    const out = new Map<string, LeaseRecord>();
    if (handles.length === 0) return out;
    const keys = handles.map((h) => this.#leaseKey(user, h));
    const values = await this.#cmd(() => this.#client.mget(...keys));
    for (const [i, v] of values.entries()) {
      const lease = typeof v === "string" ? leaseOf(v) : null;
      if (lease && lease.expiresAt > now) out.set(handles[i]!, lease);
    }
    return out;
  }

  /** {@inheritDoc Backend.subscribe} */
  async subscribe(user: string, handle: string, listener: () => void): Promise<() => void> {
    if (this.#closed) throw new BackendError("The Redis backend is closed; open a new store.");
    const name = `${this.#base(user)}c`;
    let ch = this.#channels.get(name);
    if (!ch) {
      const ready = this.#subscriber().then((sub) => sub.subscribe(name)).then(() => {});
      const made: Channel = ch = { user, listeners: 0, ready };
      this.#channels.set(name, made);
      ready.catch(() => {
        if (this.#channels.get(name) === made) this.#channels.delete(name);
      });
    }
    const channel = ch;
    channel.listeners++;
    const removeListener = this.#listeners.add(user, handle, listener);
    let live = true;
    const remove = () => {
      if (!live) return;
      live = false;
      removeListener();
      if (--channel.listeners === 0 && this.#channels.get(name) === channel) {
        this.#channels.delete(name);
        this.#sub?.then((sub) => sub.unsubscribe(name)).catch(() => this.#stale.add(name));
      }
    };
    try {
      await channel.ready;
    } catch (e) {
      remove();
      throw this.#fail(e);
    }
    return remove;
  }

  /** The subscriber connection (a duplicate of the client), opened on first use. */
  #subscriber(): Promise<RedisClient> {
    return this.#sub ??= this.#openSubscriber().catch((e) => {
      this.#sub = undefined;
      throw e;
    });
  }

  async #openSubscriber(): Promise<RedisClient> {
    const c = this.#client;
    const sub = c instanceof Cluster
      ? c.duplicate([], { lazyConnect: true })
      : c.duplicate({ lazyConnect: true });
    sub.on("error", () => {/* surfaced per call as backend_error */});
    sub.on("message", (name: string, enc: string) => {
      const ch = this.#channels.get(name);
      if (!ch) return;
      let handle: string;
      try {
        handle = decodeHandle(enc);
      } catch {
        return; // not one of ours
      }
      this.#feed(Listeners.key(ch.user, handle));
    });
    let connected = false;
    sub.on("ready", () => {
      if (connected) void this.#resync(sub);
      connected = true;
    });
    try {
      await sub.connect();
    } catch (e) {
      sub.disconnect();
      throw e;
    }
    return sub;
  }

  /**
   * After the subscriber reconnected (ioredis resubscribes by itself): once
   * the channels are live again, every listener is called once, so watchers
   * re-read what they may have missed meanwhile.
   */
  async #resync(sub: RedisClient): Promise<void> {
    const stale = [...this.#stale].filter((name) => !this.#channels.has(name));
    this.#stale.clear();
    if (stale.length > 0) sub.unsubscribe(...stale).catch(() => {});
    try {
      // Answered after ioredis's own resubscription, on the same connection.
      const names = [...this.#channels.keys()];
      if (names.length > 0) await sub.subscribe(...names);
    } catch {
      return; // dropped again: the next reconnect resyncs
    }
    this.#feed("all");
  }

  /**
   * Calls the listeners of a registry key (or all) from the feed, at once
   * when the client is ready, else once it is: their re-reads need it.
   */
  #feed(key: string | "all"): void {
    if (this.#closed) return;
    if (this.#held === undefined && this.#client.status === "ready") {
      if (key === "all") this.#listeners.notifyAll();
      else this.#listeners.notifyKey(key);
      return;
    }
    if (this.#held === undefined) {
      this.#held = new Set();
      this.#client.once("ready", () => {
        const held = this.#held;
        this.#held = undefined;
        if (held === "all") this.#listeners.notifyAll();
        else for (const k of held ?? []) this.#listeners.notifyKey(k);
      });
    }
    if (key === "all") this.#held = "all";
    else if (this.#held !== "all") this.#held.add(key);
  }

  /** Closes the connection if this backend opened it (see {@link RedisBackendOptions.closeClient}). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#watchdog);
    this.#client.off("error", this.#onError);
    const sub = this.#sub;
    this.#sub = undefined;
    await sub?.then((s) => s.disconnect(), () => {});
    if (!this.#closeClient) return;
    const c = this.#client;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      c.quit().catch(() => {}),
      new Promise<void>((r) => timer = setTimeout(r, 1000)),
    ]);
    clearTimeout(timer);
    c.disconnect();
  }
}

const wroteOne = (reply: unknown): boolean => reply === 1;

interface UrlConfig {
  cluster: boolean;
  tls: boolean;
  hosts: { host: string; port: number }[];
  username: string | undefined;
  password: string | undefined;
  db: number;
  prefix: string;
  wait: number;
  waitTimeout: number;
  connectTimeout: number;
  timeout: number;
}

const OPTIONS = ["prefix", "wait", "waitTimeout", "connectTimeout", "timeout"];

/** Parses a Redis backend URL; throws `invalid_argument` naming what is wrong, credentials redacted. */
function parseRedisUrl(url: string): UrlConfig {
  const bad = (why: string) =>
    new InvalidArgument(
      `Malformed Redis URL "${
        redact(url)
      }": ${why}. Write redis://[user:pass@]host:port/db, rediss://…, or redis+cluster://[user:pass@]host1:port1,host2:port2, with options such as ?wait=1&waitTimeout=1000.`,
      { field: "backend" },
    );
  const m = /^(rediss?)(\+cluster)?:\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/i
    .exec(url);
  if (!m) throw bad("it does not have the form scheme://host:port");
  const [, scheme = "", clusterPart, userinfo, hostPart = "", path = "", query = ""] = m;
  const cluster = clusterPart !== undefined;
  let username: string | undefined, password: string | undefined;
  try {
    if (userinfo !== undefined && userinfo !== "") {
      const colon = userinfo.indexOf(":");
      if (colon < 0) username = decodeURIComponent(userinfo);
      else {
        const u = decodeURIComponent(userinfo.slice(0, colon));
        if (u !== "") username = u;
        password = decodeURIComponent(userinfo.slice(colon + 1));
      }
    }
  } catch {
    throw bad("the credentials are not valid percent-encoding");
  }
  const hosts: { host: string; port: number }[] = [];
  for (const part of hostPart.split(",")) {
    const hm = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part);
    if (!hm) throw bad(`"${part}" is not a host[:port]`);
    const port = hm[2] === undefined ? 6379 : Number(hm[2]);
    if (port < 1 || port > 65535) throw bad(`port ${port} is out of range`);
    hosts.push({ host: hm[1]!.replace(/^\[|\]$/g, ""), port });
  }
  if (!cluster && hosts.length !== 1) {
    throw bad("list several nodes only with redis+cluster://");
  }
  let db = 0;
  const dbText = path.replace(/^\//, "");
  if (dbText !== "") {
    if (!/^\d{1,5}$/.test(dbText)) throw bad(`the database "${dbText}" is not a number`);
    db = Number(dbText);
    if (cluster && db !== 0) throw bad("Redis Cluster has only database 0");
  }
  const params = new URLSearchParams(query);
  for (const key of params.keys()) {
    if (!OPTIONS.includes(key)) {
      throw bad(`unknown option "${key}" (known: ${OPTIONS.join(", ")})`);
    }
  }
  const int = (name: string, def: number, min: number): number => {
    const v = params.get(name);
    if (v === null) return def;
    if (!/^\d+$/.test(v) || Number(v) < min || !Number.isSafeInteger(Number(v))) {
      throw bad(`${name} must be a whole number, at least ${min}`);
    }
    return Number(v);
  };
  const wait = int("wait", 0, 0);
  const waitTimeout = int("waitTimeout", 1000, 1);
  const prefix = params.get("prefix") ?? DEFAULT_PREFIX;
  if (/[{}]/.test(prefix)) throw bad("the prefix must not contain { or }");
  return {
    cluster,
    tls: scheme.toLowerCase() === "rediss",
    hosts,
    username,
    password,
    db,
    prefix,
    wait,
    waitTimeout,
    connectTimeout: int("connectTimeout", 5000, 1),
    timeout: Math.max(int("timeout", 5000, 1), wait > 0 ? waitTimeout + 1000 : 0),
  };
}
