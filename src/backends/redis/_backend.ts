/**
 * The Redis backend's class: its primitives over the Lua scripts, the
 * connection, the change feed and the grant and move helpers.
 *
 * @module
 */
import type { Cluster, Redis } from "ioredis";
import type * as B from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { ByteCappedCache } from "../_cache.ts";
import { compareTrashOrder } from "../_shared.ts";
import { KeyedQueue } from "../_queue.ts";
import { AGAIN, backoff, optimistic } from "../_retry.ts";
import { writesAt } from "../_quota.ts";
import {
  auditArgs,
  decodeHandle,
  encodeHandle,
  expiresText,
  idemArgs,
  leaseOf,
  logArgs,
  logHead,
  member,
  metaOf,
  metaText,
  quotaArgs,
  recordOf,
  recordOfBytes,
  recordOfD,
  refuseQuota,
  replayOf,
  type Reply,
  ttlOf,
  writerText,
  wroteOne,
} from "./_codec.ts";
import { closedError, Connection } from "./_connection.ts";
import { RedisErasure } from "./_erase.ts";
import { Feed } from "./_feed.ts";
import { RedisGrants } from "./_grants.ts";
import { contentArgs, RedisMoves } from "./_move.ts";
import { type Keys, KeySpace } from "./_keys.ts";
import { RedisDataKeys } from "./_data_keys.ts";
import { RedisContent } from "./_content.ts";
import { checkOptions, type RedisBackendOptions } from "./_options.ts";
import { heldOf, leaseArg, refuseGrant, withLease, wroteLeased } from "./_replies.ts";
import { S } from "./_scripts.ts";
import { listUsers, type UsersScan } from "./_users.ts";
import { openClient, parseRedisUrl, scopeOf } from "./_url.ts";

/** Per-handle update queues of this process, by Redis and record key. */
const QUEUES = new KeyedQueue();
/**
 * Last records seen, by Redis and record key: guesses that save a read
 * before a compare-and-set, which alone decides. Only states up to 64 KiB
 * are kept, 4 MiB in all, oldest out.
 */
const GUESSES = new ByteCappedCache<B.HandleRecord>(65_536, 4_194_304, (r) => r.state.length);
/** Identities of injected clients (a client is its own Redis for queueing). */
const CLIENT_IDS = new WeakMap<object, string>();
const CLIENT_IDS_NEXT = { n: 0 };
const MAX_ATTEMPTS = 100;
const BACKOFF_AFTER = 8;
const LIST_CAP = 1000;
const SWEEP_BATCH = 500;

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
export class RedisBackend implements B.Backend {
  /** Redis expires records itself at `expiresAt` plus the grace period. */
  readonly reclaimsExpired = true;
  readonly #conn: Connection;
  readonly #feed: Feed;
  readonly #k: KeySpace;
  readonly #grants: RedisGrants;
  /** Transfer across hash slots, on a Redis Cluster only. */
  readonly #moves: RedisMoves | undefined;
  readonly #closeClient: boolean;
  /** Which Redis this is, for sharing the per-handle queues of one process. */
  #scope: string;
  #users: UsersScan | undefined;
  readonly #erasure: RedisErasure;
  /** {@inheritDoc Backend.erasure} */
  readonly erasure: B.ErasurePrimitives;
  /** {@inheritDoc Backend.keys} */
  readonly keys: B.KeyPrimitives;
  /** {@inheritDoc Backend.content} */
  readonly content: B.ContentPrimitives;

  /**
   * Wraps an ioredis client or cluster client that you opened.
   *
   * @param client A `Redis` or `Cluster` from ioredis.
   * @param options Key prefix, replica wait, whether `close()` closes the client.
   */
  constructor(client: Redis | Cluster, options: RedisBackendOptions = {}) {
    const { prefix, wait, waitTimeout, timeout } = checkOptions(options);
    let id = CLIENT_IDS.get(client);
    if (id === undefined) CLIENT_IDS.set(client, id = `client ${CLIENT_IDS_NEXT.n++}`);
    this.#scope = id;
    this.#conn = new Connection(client, wait, waitTimeout, timeout);
    this.#feed = new Feed(this.#conn);
    this.#k = new KeySpace(prefix);
    this.#grants = new RedisGrants(this.#conn, this.#k);
    this.erasure = this.#erasure = new RedisErasure(this.#conn, this.#k);
    this.keys = new RedisDataKeys(this.#conn, this.#k);
    this.content = new RedisContent(this.#conn, this.#k, (rec) => this.#guess(rec, null));
    this.#closeClient = options.closeClient ?? false;
    if ((client as { isCluster?: boolean }).isCluster) {
      this.#moves = new RedisMoves(this.#conn, this.#k, this.#grants);
    }
  }

  /** {@inheritDoc Backend.transfer} */
  readonly transfer: B.TransferPrimitives = {
    /**
     * On one server, one script over the keys of both users, which Redis runs
     * atomically. On a Redis Cluster the two users' keys sit in two hash slots,
     * which no script can span: there the move is five scripts, each atomic in
     * one slot, that keep the record live in one place at a time, and that any
     * miss on the handle of either user finishes after a crash (see
     * `redis/_move.ts`).
     */
    move: async (user, handle, to, ctx, step = {}) => {
      const k = this.#k.of(user, handle), t = this.#k.of(to, handle);
      const keep = step.keep;
      let out: B.TransferOutcome | Reply;
      if (this.#moves) {
        out = await this.#moves.transfer(user, handle, to, ctx, step.audit, keep, step.content);
      } else {
        const keys = [k.rec, k.idx, k.exp, k.lease, this.#k.grantsOf(user, handle)];
        keys.push(t.rec, t.idx, t.exp, t.trash);
        const names = keep ? await this.#grants.name(keep) : undefined;
        if (keep) keys.push(this.#k.grantsOf(to, handle), this.#k.grant(to, keep.grant));
        const reply = await this.#conn.run(
          S.transfer,
          keys,
          [
            `${ctx.now}\t${ctx.graceMs}\t${keep ? encodeHandle(keep.grant) : ""}\t${
              keep ? expiresText(keep.expiresAt) : ""
            }`,
            ...auditArgs(step.audit, t.enc),
            keep ? JSON.stringify({ ...keep, endedAt: null }) : "",
            ...await contentArgs(this.#conn, k.rec, step.content),
            ...quotaArgs(ctx),
          ],
          wroteOne,
        ) as number | Reply;
        if (reply !== 1) await names?.unname();
        out = Array.isArray(reply)
          ? reply
          : reply === 1
          ? "moved"
          : reply === -1
          ? "taken"
          : reply === -2
          ? "changed"
          : "absent";
      }
      if (Array.isArray(out)) {
        refuseQuota(out, ctx);
        throw new BackendError(`Unexpected reply of the transfer script: ${JSON.stringify(out)}`);
      }
      if (out !== "moved") return out;
      this.#guess(k.rec, null);
      this.#guess(t.rec, null);
      this.#feed.notify(user, handle);
      this.#feed.notify(to, handle);
      return "moved";
    },
  };

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
    const client = await openClient(url, cfg);
    const backend = new RedisBackend(client, {
      prefix: cfg.prefix,
      waitReplicas: cfg.wait,
      waitTimeoutMs: cfg.waitTimeout,
      timeoutMs: cfg.timeout,
      closeClient: true,
    });
    backend.#scope = scopeOf(cfg);
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
    const k = this.#k.of(user, handle ?? "");
    return handle === undefined ? k.idx : k.rec;
  }

  /** {@inheritDoc Backend.insert} */
  async insert(
    user: string,
    record: B.HandleRecord,
    ctx: B.WriteContext,
  ): Promise<B.InsertOutcome | B.Replayed> {
    const k = this.#k.of(user, record.handle);
    const ik = this.#k.idem(k, ctx);
    const lk = k.lease;
    const m = metaText(record);
    const head = `${ctx.now}\t${member(record.updatedAt, k.enc)}\t${
      expiresText(record.expiresAt)
    }\t${ttlOf(record.expiresAt, ctx)}\t${idemArgs(ctx, k.enc)}\t${logHead(ctx.entry, ctx)}\t${m}`;
    const d = `${m}\n${record.state}`;
    const args = [d, head, leaseArg(ctx), ...logArgs(ctx.entry), ...quotaArgs(ctx)];
    const reply = await this.#conn.run(
      S.insert,
      ik ? [k.rec, k.idx, k.exp, k.trash, lk, ik] : [k.rec, k.idx, k.exp, k.trash, lk],
      args,
      wroteLeased,
    );
    if (Array.isArray(reply)) refuseQuota(reply as Reply, ctx);
    const held = heldOf(reply);
    if (held === undefined && Array.isArray(reply)) return replayOf(reply, record.handle);
    if (held === undefined && reply !== 1) return { inserted: false };
    this.#guess(k.rec, { ...record });
    this.#feed.notify(user, record.handle);
    return withLease({ inserted: true }, ctx, held);
  }

  /** {@inheritDoc Backend.trash} */
  readonly trash: B.TrashPrimitives = {
    /**
     * Trashed records are not indexed, so a call scans the keyspace for the
     * user's trash keys (`SCAN … MATCH`; on a cluster, on every master), then
     * reads each one's metadata and `trashUntil` in one pipeline (never the
     * state) and sorts them: its cost grows with the whole keyspace, which
     * suits an inspector, not a hot path.
     *
     * @param user The user.
     * @param q Page size and position.
     * @returns The page.
     */
    list: async (user, q) => {
      const keys = await this.#conn.scanKeys(this.#k.trashPattern(user));
      if (keys.length === 0) return [];
      const client = this.#conn.client;
      // Every key of the user sits in one hash slot: one pipeline, also on a cluster.
      const replies = await this.#conn.cmd(async () => {
        const got = await client.pipeline(keys.map((key) => ["hmget", key, "m", "u"])).exec();
        return (got ?? []).map(([err, fields]) => {
          if (err) throw err;
          return fields as (string | null)[];
        });
      });
      const skip = this.#k.base(user).length + 2;
      const out: B.TrashedMeta[] = [];
      for (const [i, [m, u]] of replies.entries()) {
        if (typeof m !== "string" || typeof u !== "string") continue; // dropped meanwhile
        const row = { ...metaOf(decodeHandle(keys[i]!.slice(skip)), m), trashUntil: Number(u) };
        if (!q.after || compareTrashOrder(row, q.after) > 0) out.push(row);
      }
      return out.sort(compareTrashOrder).slice(0, q.limit);
    },
    until: async (user, handle) => {
      // On a cluster, a miss also finishes a move of the handle that a crash left unfinished.
      if (this.#moves) return await this.#moves.trashedUntil(user, handle);
      const key = this.#k.of(user, handle).trash;
      const client = this.#conn.client;
      const u = await this.#conn.cmd(() => client.hget(key, "u"));
      return u == null ? null : Number(u);
    },
  };

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<B.HandleRecord | null> {
    return this.#read(this.#k.of(user, handle), handle);
  }

  async #read(k: Keys, handle: string): Promise<B.HandleRecord | null> {
    const d = await this.#conn.cmd(() => this.#conn.client.hget(k.rec, "d"));
    return recordOfD(handle, d);
  }

  /** {@inheritDoc Backend.save} */
  async save(
    user: string,
    handle: string,
    write: B.ConditionalWrite,
    ctx: B.WriteContext,
  ): Promise<B.SaveOutcome | B.Replayed> {
    const k = this.#k.of(user, handle);
    const ik = this.#k.idem(k, ctx);
    const lk = k.lease;
    const e = write.expiresAt === "keep" ? "keep" : expiresText(write.expiresAt);
    const head = `${ctx.now}\t${ctx.graceMs}\t${write.expectVersion}\t${write.updatedAt}\t${e}\t${
      member(write.updatedAt, k.enc)
    }\t${idemArgs(ctx, k.enc)}\t${writerText(write.lastWriter)}\t${
      write.schemaVersion ?? "keep"
    }\t${write.preview === undefined ? "keep" : `P${write.preview.replace(/[\t\n]/g, " ")}`}`;
    const args = [write.state, head, leaseArg(ctx), ...quotaArgs(ctx)];
    const reply = await this.#conn.run(
      S.save,
      this.#withGrant(user, ik ? [k.rec, k.idx, k.exp, lk, ik] : [k.rec, k.idx, k.exp, lk], ctx),
      args,
      (r) => typeof r === "string" || (Array.isArray(r) && r[0] === "L"),
    ) as string | Reply;
    if (typeof reply === "string" || reply[0] === "L") {
      const m = typeof reply === "string" ? reply : reply[1]!;
      const held = typeof reply === "string" ? null : reply[2]!;
      const record = recordOf(handle, write.state, m);
      this.#guess(k.rec, record);
      this.#feed.notify(user, handle);
      return withLease({ ok: true as const, record: { ...record } }, ctx, held);
    }
    if (reply[0] === "R") {
      this.#guess(k.rec, null);
      return replayOf(reply, handle);
    }
    refuseGrant(reply, ctx);
    refuseQuota(reply, ctx);
    const current = this.#guess(k.rec, recordOfD(handle, reply[1]));
    return { ok: false, current: current && { ...current } };
  }

  /** {@inheritDoc Backend.update} */
  async update(
    user: string,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    const k = this.#k.of(user, handle);
    const out = await this.#serial(k.rec, () => this.#update(user, k, handle, change, ctx));
    if ("written" in out && out.written) this.#feed.notify(user, handle);
    return out;
  }

  async #update(
    user: string,
    k: Keys,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    const ik = this.#k.idem(k, ctx);
    let current: B.HandleRecord | null = null;
    let confirmed = false;
    /** Reads the record afresh: `current` is then confirmed (a replay ends the update). */
    const refresh = async (): Promise<B.Replayed | undefined> => {
      const fresh = await this.#readForUpdate(k, handle, ik, ctx);
      if ("replayed" in fresh) return fresh;
      current = this.#guess(k.rec, fresh.record);
      confirmed = true;
      return undefined;
    };
    // After a backoff the record the last conflict returned is likely stale.
    let reread = false;
    const guess = GUESSES.get(`${this.#scope}\n${k.rec}`);
    if (guess !== undefined) current = guess;
    else {
      const replayed = await refresh();
      if (replayed) return replayed;
    }
    return await optimistic(async () => {
      if (reread) {
        reread = false;
        const replayed = await refresh();
        if (replayed) return replayed;
      }
      let step: B.Step | null | undefined;
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
        return await refresh() ?? AGAIN;
      }
      if (next === undefined) return AGAIN; // unreachable: a throw on a confirmed record rethrows
      if (next === null && !ik) return { record: current && { ...current }, written: false };
      const expect = current === null ? "\t" : `${current.version}\t${current.createdAt}`;
      const write = next === null
        ? "N\t" + expect + "\t\t\t"
        : `W\t${expect}\t${member(next.updatedAt, k.enc)}\t${expiresText(next.expiresAt)}\t${
          ttlOf(next.expiresAt, ctx)
        }`;
      const m = next === null ? "" : metaText(next);
      const head = `${ctx.now}\t${write}\t${idemArgs(ctx, k.enc)}\t${logHead(entry, ctx)}\t${m}`;
      const lease = next === null ? "" : leaseArg(ctx);
      const args = [
        next === null ? "" : `${m}\n${next.state}`,
        head,
        lease,
        ...logArgs(entry),
        ...(next === null ? [] : quotaArgs(ctx)),
      ];
      const lk = k.lease;
      const answer = await this.#conn.run(
        S.cas,
        this.#withGrant(user, ik ? [k.rec, k.idx, k.exp, lk, ik] : [k.rec, k.idx, k.exp, lk], ctx),
        args,
        wroteLeased,
      );
      const held = heldOf(answer);
      if (answer === 1 || held !== undefined) {
        const record = next ?? current;
        this.#guess(k.rec, record && { ...record });
        // `next` is the caller's own (its step); `current` is the cache's.
        const out = { record: next ?? (current && { ...current }), written: next !== null };
        return next === null ? out : withLease(out, ctx, held ?? null);
      }
      const reply = answer as Reply;
      if (reply[0] === "R") {
        this.#guess(k.rec, null);
        return replayOf(reply, handle);
      }
      refuseGrant(reply, ctx);
      refuseQuota(reply, ctx);
      current = this.#guess(k.rec, recordOfD(handle, reply[1]));
      confirmed = true;
      return AGAIN;
    }, (n) => {
      const attempt = n + 1;
      if (attempt >= MAX_ATTEMPTS) {
        throw new BackendError(
          `Handle "${handle}" is changing too fast: ${attempt} attempts to apply this change each lost to another writer. Nothing was applied; retry shortly.`,
        );
      }
      // A conflict returns the current record, so an immediate retry is
      // cheap and usually wins; only a long losing streak backs off, with
      // jitter (timers are too coarse to help earlier). The record that
      // conflict returned is then as old as the pause, and another process
      // writing in a loop has most likely moved on meanwhile: the retry reads
      // it afresh, else it would lose every time until that process stops.
      if (attempt < BACKOFF_AFTER) return undefined;
      reread = true;
      return backoff(attempt - BACKOFF_AFTER, 1, 20);
    });
  }

  async #readForUpdate(
    k: Keys,
    handle: string,
    ik: string | undefined,
    ctx: B.WriteContext,
  ): Promise<{ record: B.HandleRecord | null } | B.Replayed> {
    if (!ik) return { record: await this.#read(k, handle) };
    const res = await this.#conn.cmd(() =>
      this.#conn.client.pipeline()
        .hmget(ik, "f", "t", "n", "h", "d")
        .hget(k.rec, "d")
        .exec()
    );
    if (!res) throw new BackendError("Redis discarded a read; retry.");
    const [[e1, idem] = [null, null], [e2, rec] = [null, null]] = res;
    if (e1 || e2) throw this.#conn.fail(e1 ?? e2);
    const i = idem as Reply;
    if (i[0] !== null && Number(i[1]) > ctx.now) {
      return replayOf(["R", i[0] ?? null, i[2] ?? null, ...i.slice(3)], handle);
    }
    return { record: recordOfD(handle, rec as string | null) };
  }

  /** A write's keys, with the grant hash last when it goes through a grant. */
  #withGrant(owner: string, keys: string[], ctx: B.WriteContext): string[] {
    return ctx.grant ? [...keys, this.#k.grant(owner, ctx.grant.grant)] : keys;
  }

  /** {@inheritDoc Backend.grants} */
  readonly grants: B.GrantPrimitives = {
    put: async (grant, now, audit) => {
      const res = await this.#grants.put(grant, now, audit);
      if (audit && res !== "absent") this.#audited(grant.owner, grant.handle);
      return res;
    },
    read: (idOrAlias) => this.#grants.read(idOrAlias),
    end: async (grant, now, audit) => {
      const res = await this.#grants.end(grant, now, audit);
      const root = res.find((g) => g.grant === grant);
      if (audit && root) this.#audited(root.owner, root.handle);
      return res;
    },
    of: (owner, handle) => this.#grants.of(owner, handle),
    to: (to) => this.#grants.to(to),
    /** A scan of every node's grant hashes, then one script per owner (`redis/_erase.ts`). */
    sweep: (before) => this.#erasure.sweepGrants(before),
  };

  /** A grant change left an entry on `(owner, handle)`: the guess goes, listeners hear. */
  #audited(owner: string, handle: string): void {
    this.#guess(this.#k.of(owner, handle).rec, null);
    this.#feed.notify(owner, handle);
  }

  /**
   * Queues calls on one key in this process (shared by every backend on the
   * same Redis), so they do not race each other's compare-and-set.
   */
  #serial<T>(rec: string, fn: () => Promise<T>): Promise<T> {
    return QUEUES.run(`${this.#scope}\n${rec}`, fn);
  }

  /**
   * Remembers (or, with `null`, forgets) the last record seen for a key and
   * returns it. Shared by the backends of this process on the same Redis.
   */
  #guess(rec: string, record: B.HandleRecord | null): B.HandleRecord | null {
    return GUESSES.set(`${this.#scope}\n${rec}`, record);
  }

  /** {@inheritDoc Backend.remove} */
  async remove(
    user: string,
    handle: string,
    ctx: B.WriteContext,
  ): Promise<{ removed: boolean } | B.Replayed> {
    const k = this.#k.of(user, handle);
    const ik = this.#k.idem(k, ctx);
    const args = [`${ctx.now}\t${idemArgs(ctx, "")}\t${ctx.trashUntil ?? ""}`];
    const reply = await this.#conn.run(
      S.remove,
      ik ? [k.rec, k.idx, k.exp, k.trash, ik] : [k.rec, k.idx, k.exp, k.trash],
      args,
      wroteOne,
    );
    this.#guess(k.rec, null);
    if (Array.isArray(reply)) return replayOf(reply, handle);
    if (reply === 1) this.#feed.notify(user, handle);
    return { removed: reply === 1 };
  }

  /** {@inheritDoc Backend.untrash} */
  async untrash(user: string, handle: string, ctx: B.WriteContext): Promise<B.HandleRecord | null> {
    const k = this.#k.of(user, handle);
    const reply = await this.#conn.run(
      S.untrash,
      [k.rec, k.idx, k.exp, k.trash, k.lease],
      [`${ctx.now}\t${ctx.graceMs}`, ...quotaArgs(ctx)],
      (r) => typeof r === "string",
    ) as string | Reply | null;
    if (Array.isArray(reply)) refuseQuota(reply, ctx);
    const d = reply as string | null;
    const record = recordOfD(handle, d);
    if (record !== null) {
      this.#guess(k.rec, { ...record });
      this.#feed.notify(user, handle);
    }
    return record;
  }

  /** {@inheritDoc Backend.changes} */
  async changes(user: string, handle: string, afterVersion: number): Promise<B.ChangeEntry[]> {
    const k = this.#k.of(user, handle);
    if (Number.isNaN(afterVersion) || afterVersion === Infinity) return [];
    const after = Math.max(Math.floor(afterVersion), -1);
    const reply = await this.#conn.run(S.changes, [k.rec], [String(after)]) as Reply;
    const out: B.ChangeEntry[] = [];
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
  async list(user: string, q: B.ListQuery): Promise<B.HandleMeta[]> {
    const base = this.#k.base(user);
    const rows: B.HandleMeta[] = [];
    let start = q.after ? "(" + member(q.after.updatedAt, encodeHandle(q.after.handle)) : "-";
    while (rows.length < q.limit) {
      const [next, got] = await this.#conn.run(S.list, [`${base}i`, `${base}x`], [
        start,
        String(q.limit - rows.length),
        q.kind ?? "",
        q.liveAt === undefined ? "" : String(q.liveAt),
        `${base}r:`,
        String(LIST_CAP),
      ]) as [string, Reply[]];
      for (const [x, m] of got) {
        const meta = metaOf(decodeHandle((x ?? "").slice(14)), m ?? "");
        // `m` holds the preview: a listing without previews leaves it out.
        if (!q.previews) delete meta.preview;
        rows.push(meta);
      }
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
    if (user !== null) return await this.#sweepBase(this.#k.base(user), expiredAtOrBefore);
    let n = 0;
    for (const key of await this.#conn.scanKeys(this.#k.pattern("x"))) {
      n += await this.#sweepBase(key.slice(0, -1), expiredAtOrBefore);
    }
    return n;
  }

  async #sweepBase(base: string, cutoff: number): Promise<number> {
    let n = 0;
    while (true) {
      const [deleted, examined] = await this.#conn.run(S.sweep, [`${base}i`, `${base}x`], [
        String(cutoff),
        `${base}r:`,
        String(SWEEP_BATCH),
      ], (r) => Array.isArray(r) && r[0] > 0) as [number, number];
      n += deleted;
      if (examined < SWEEP_BATCH) return n;
    }
  }

  /** {@inheritDoc Backend.records} */
  readonly records: B.RecordPrimitives = {
    /**
     * Users with at least one record, in Unicode code point order (the byte
     * order of their UTF-8). One page scans the keyspace once; the next page
     * reuses that scan for a minute.
     *
     * @param query Start strictly after `after`; at most `limit` users.
     * @returns The page.
     */
    users: async (query) => {
      const live = async (u: string) => (await this.list(u, { limit: 1 })).length > 0;
      const { page, scan } = await listUsers(this.#conn, this.#k, this.#users, query, live);
      this.#users = scan;
      return page;
    },
    import: async (user, record, ctx) => {
      const k = this.#k.of(user, record.handle);
      const args = [
        record.state,
        `${member(record.updatedAt, k.enc)}\t${expiresText(record.expiresAt)}\t${record.version}\t${
          ttlOf(record.expiresAt, ctx)
        }\t${metaText(record)}`,
      ];
      const outcome = await this.#conn.run(
        S.importRecord,
        [k.rec, k.idx, k.exp, k.lease],
        args,
        (r) => r !== "kept",
      ) as
        | "inserted"
        | "replaced"
        | "kept";
      if (outcome !== "kept") this.#feed.notify(user, record.handle);
      return outcome;
    },
  };

  /** {@inheritDoc Backend.quotas} */
  readonly quotas: B.QuotaPrimitives = {
    /**
     * One script: the usage hash, counted from the user's index when absent
     * (and kept from then on).
     */
    usage: async (user, now) => {
      const [h, b, w] = await this.#conn.run(S.usage, [this.#k.of(user, "").idx], []) as Reply;
      const [minute, writes] = (w ?? "0\t0").split("\t").map(Number);
      return {
        handles: Number(h),
        bytes: Number(b),
        writesThisMinute: writesAt(minute ?? 0, writes ?? 0, now),
      };
    },
  };

  /** {@inheritDoc Backend.leases} */
  readonly leases: B.LeasePrimitives = {
    acquire: async (user, handle, lease, now) => {
      const ttl = Math.max(Math.ceil(lease.expiresAt - now), 1);
      const k = this.#k.of(user, handle);
      const reply = await this.#conn.run(S.acquire, [k.lease, k.rec], [
        String(now),
        String(ttl),
        String(lease.expiresAt),
        lease.holder,
      ], wroteOne);
      if (reply === 1) return { acquired: true, lease: { ...lease } };
      return { acquired: false, lease: leaseOf(reply as string) };
    },
    release: async (user, handle, holder, now) => {
      const k = this.#k.of(user, handle);
      return await this.#conn.run(S.release, [k.lease, k.rec], [String(now), holder], wroteOne) ===
        1;
    },
    of: async (user, handles, now) => {
      const out = new Map<string, B.LeaseRecord>();
      if (handles.length === 0) return out;
      const keys = handles.map((h) => this.#k.lease(user, h));
      const values = await this.#conn.cmd(() => this.#conn.client.mget(...keys));
      for (const [i, v] of values.entries()) {
        const lease = typeof v === "string" ? leaseOf(v) : null;
        if (lease && lease.expiresAt > now) out.set(handles[i]!, lease);
      }
      return out;
    },
    readLeased: (user, handle, now) => {
      // One plain command: the record hash holds a copy of its lease.
      const rec = this.#k.record(user, handle);
      return this.#conn.cmd(() => this.#conn.client.hmgetBuffer(rec, "d", "L")).then(([d, l]) => {
        const lease = l ? leaseOf(l.toString()) : null;
        return {
          record: recordOfBytes(handle, d),
          lease: lease && lease.expiresAt > now ? lease : null,
        };
      });
    },
  };

  /** {@inheritDoc Backend.feed} */
  readonly feed: B.FeedPrimitives = {
    subscribe: (user, handle, listener) => {
      if (this.#conn.closed) return Promise.reject(closedError());
      return this.#feed.subscribe(this.#k.channel(user), user, handle, listener);
    },
  };

  /** Closes the connection if this backend opened it (see {@link RedisBackendOptions.closeClient}). Idempotent. */
  async close(): Promise<void> {
    if (!this.#conn.shut()) return;
    await this.#feed.close();
    if (this.#closeClient) await this.#conn.quit();
  }
}
