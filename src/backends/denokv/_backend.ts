/**
 * The Deno KV backend's class: its primitives over atomic operations on
 * heads, bodies, change logs, idempotency claims and usage counters.
 *
 * @module
 */
import type * as B from "../../backend.ts";
import { BackendError, InvalidArgument } from "../../errors.ts";
import { KeyedQueue } from "../_queue.ts";
import { AGAIN, optimistic } from "../_retry.ts";
import { compareListOrder, compareTrashOrder } from "../_shared.ts";
import { afterCommit, bodyOf, loadRecord, releaseBody, stateText } from "./_bodies.ts";
import { planLog } from "./_changelog.ts";
import {
  type BodyRef,
  decodeBytes,
  ENTRY_MAX,
  forkPointOf,
  type Head,
  type IdemValue,
  type IndexEntry,
  indexOf,
  type Intent,
  type LogValue,
  metaOfIndex,
  newId,
  Raced,
  recordOf,
  type Trashed,
} from "./_codec.ts";
import { KvErasure } from "./_erase.ts";
import { KvDataKeys } from "./_data_keys.ts";
import { KvContent } from "./_content.ts";
import { Feed } from "./_feed.ts";
import { dropRecord, landed, putHead } from "./_heads.ts";
import {
  dropCopy,
  type IdemPart,
  prepareIdem,
  readHeads,
  readHeadsAndTrash,
  replayOf,
} from "./_idempotency.ts";
import { KvGrants } from "./_grants.ts";
import { KvIo } from "./_io.ts";
import { Keys } from "./_keys.ts";
import { acquireLease, leaseEntry, leasesOf, releaseLease, takeLease } from "./_leases.ts";
import { checkMs, type DenoKvBackendOptions } from "./_options.ts";
import { sweep } from "./_sweep.ts";
import { transfer } from "./_transfer.ts";
import { openDenoKv } from "./_url.ts";
import { listUsers } from "./_users.ts";
import { planUsage, readUsageEntries, staleUsage, usageOf } from "./_usage.ts";
import { utf8Length } from "../../json.ts";

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
export class DenoKvBackend implements B.Backend {
  /** Expiry is judged by the store and reclaimed by `sweep`: always `false`. */
  readonly reclaimsExpired: boolean = false;
  /**
   * 65,280: a changelog entry is one Deno KV value (65,536 bytes with its
   * time), so the store keeps a longer entry as its `omitted` marker.
   */
  readonly maxEntryBytes: number = ENTRY_MAX;
  readonly #db: KvIo;
  readonly #k: Keys;
  readonly #orphanAgeMs: number;
  readonly #closeKv: boolean;
  #closed = false;
  /** Per-record queues: writers in this process take turns instead of racing. */
  readonly #queue = new KeyedQueue();
  #feed: Feed;
  readonly #grants: KvGrants;
  readonly #erasure: KvErasure;
  /** {@inheritDoc Backend.erasure} */
  readonly erasure: B.ErasurePrimitives;
  /** {@inheritDoc Backend.keys} */
  readonly keys: B.KeyPrimitives;
  /** {@inheritDoc Backend.content} */
  readonly content: B.ContentPrimitives;

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
    this.#k = new Keys(options.prefix ?? ["mcpstate"]);
    this.#orphanAgeMs = checkMs(options.orphanAgeMs ?? 300_000, "orphanAgeMs");
    const timeoutMs = checkMs(options.contentionTimeoutMs ?? 30_000, "contentionTimeoutMs");
    this.#db = new KvIo(kv, this.#k, timeoutMs);
    this.#feed = new Feed(this.#db, true);
    this.erasure = this.#erasure = new KvErasure(this.#db);
    this.keys = new KvDataKeys(this.#db);
    this.content = new KvContent(this.#db);
    this.#grants = new KvGrants(this.#db, async (audit, res, after) => {
      this.#feed.changed(audit.user, audit.handle, res);
      await afterCommit(this.#db, after, res.versionstamp);
    });
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
    const { kv, token, remote } = await openDenoKv(url);
    const backend = new DenoKvBackend(kv, { ...options, closeKv: true });
    backend.#db.secret = token;
    backend.#feed = new Feed(backend.#db, !remote);
    return backend;
  }

  /**
   * Runs the writes of one record in this process one after another. Other
   * processes still race optimistically; this only spares the writers of one
   * process from conflicting with each other.
   */
  #turn<T>(user: string, handle: string, fn: () => Promise<T>): Promise<T> {
    return this.#queue.run(JSON.stringify([user, handle]), fn);
  }

  /**
   * What a write to an existing record reads first, all at once: its head
   * (with the idempotency entry), the writer's lease entry and the grant's
   * entry. Then the replay when the key was seen, else the grant's check.
   */
  async #open(
    u: Deno.KvKeyPart,
    h: Deno.KvKeyPart,
    user: string,
    handle: string,
    ctx: B.WriteContext,
  ) {
    const [[head, idem], lz, gz] = await Promise.all([
      readHeads(this.#db, u, h, ctx),
      leaseEntry(this.#db, user, handle, ctx),
      this.#grants.entry(ctx.grant),
    ]);
    const replay = await replayOf(this.#db, u, idem, ctx);
    if (replay) return { replay } as const;
    this.#grants.assert(ctx.grant, gz, ctx.now);
    return { replay: null, head, idem, lz, gz } as const;
  }

  /** {@inheritDoc Backend.insert} */
  async insert(
    user: string,
    record: B.HandleRecord,
    ctx: B.WriteContext,
  ): Promise<B.InsertOutcome | B.Replayed> {
    const u = this.#k.user(user), h = this.#k.handle(record.handle);
    return await optimistic(async () => {
      const [[head, idem, trash], lz] = await Promise.all([
        readHeadsAndTrash(this.#db, u, h, ctx),
        leaseEntry(this.#db, user, record.handle, ctx),
      ]);
      const replay = await replayOf(this.#db, u, idem, ctx);
      if (replay) return replay;
      // A trashed handle stays taken until it is restored or purged.
      if (head.value !== null || trash.value !== null) return { inserted: false };
      const usage = ctx.quota &&
        await planUsage(this.#db, u, await readUsageEntries(this.#db, u), ctx.quota, {
          handles: 1,
          bytes: utf8Length(record.state),
        }, ctx.now);
      const w = newId();
      const log = await planLog(this.#db, u, h, null, ctx.entry, ctx);
      const body = await bodyOf(this.#db, u, h, record.state);
      let idemPart: IdemPart | undefined;
      let ok = false;
      let lease: B.LeaseOutcome | undefined;
      try {
        if (body) {
          idemPart = await prepareIdem(this.#db, u, ctx, idem, record, body);
          const res = await this.#db.commit((op) => {
            op.check(head).check(trash);
            putHead(this.#db, op, u, h, null, record, body, w, log);
            op.set(this.#k.userName(u), user);
            if (usage) usage(op);
            else staleUsage(this.#db, op, u);
            idemPart?.add(op);
            lease = takeLease(this.#k, op, user, record.handle, lz, ctx);
          });
          ok = res.ok || await landed(this.#db, u, h, w);
          if (ok) this.#feed.changed(user, record.handle, res);
        }
      } finally {
        if (!ok) {
          await releaseBody(this.#db, body);
          await dropCopy(this.#db, u, idemPart?.copy ?? null);
        }
      }
      if (ok) return lease ? { inserted: true, lease } : { inserted: true };
      return AGAIN;
    }, this.#db.contended(record.handle));
  }

  /** {@inheritDoc Backend.read} */
  async read(user: string, handle: string): Promise<B.HandleRecord | null> {
    const u = this.#k.user(user), h = this.#k.handle(handle);
    return (await loadRecord(this.#db, u, h, handle)).record;
  }

  /** {@inheritDoc Backend.leases} */
  readonly leases: B.LeasePrimitives = {
    acquire: (user, handle, lease, now) => acquireLease(this.#db, user, handle, lease, now),
    release: (user, handle, holder, now) => releaseLease(this.#db, user, handle, holder, now),
    of: (user, handles, now) => leasesOf(this.#db, user, handles, now),
    readLeased: async (user, handle, now) => {
      const u = this.#k.user(user), h = this.#k.handle(handle);
      // The head and the lease in one read; the state's chunks (if any) follow.
      const [head, l] = await this.#db.io(() =>
        this.#db.kv.getMany<[Head, B.LeaseRecord]>([
          this.#k.head(u, h),
          this.#k.lease(user, handle),
        ])
      );
      const { record } = await loadRecord(this.#db, u, h, handle, head);
      const lease = l.value && l.value.expiresAt > now
        ? { holder: l.value.holder, expiresAt: l.value.expiresAt }
        : null;
      return { record, lease };
    },
  };

  /** {@inheritDoc Backend.save} */
  save(
    user: string,
    handle: string,
    write: B.ConditionalWrite,
    ctx: B.WriteContext,
  ): Promise<B.SaveOutcome | B.Replayed> {
    return this.#turn(user, handle, async (): Promise<B.SaveOutcome | B.Replayed> => {
      const u = this.#k.user(user), h = this.#k.handle(handle);
      let body: BodyRef | null = null;
      try {
        return await optimistic(async () => {
          const opened = await this.#open(u, h, user, handle, ctx);
          if (opened.replay) return opened.replay;
          const { head: first, idem, lz, gz } = opened;
          const cur = first.value;
          if (
            !cur || cur.v !== write.expectVersion || (cur.e !== null && cur.e <= ctx.now)
          ) {
            return { ok: false, current: (await loadRecord(this.#db, u, h, handle, first)).record };
          }
          const usage = ctx.quota &&
            await planUsage(this.#db, u, await readUsageEntries(this.#db, u), ctx.quota, {
              handles: 0,
              bytes: utf8Length(write.state) - cur.z,
            }, ctx.now);
          const next: B.HandleRecord = {
            handle,
            kind: cur.k,
            state: write.state,
            version: cur.v + 1,
            createdAt: cur.c,
            updatedAt: write.updatedAt,
            expiresAt: write.expiresAt === "keep" ? cur.e : write.expiresAt,
            lastWriter: write.lastWriter,
            ...((write.schemaVersion ?? cur.s) == null
              ? {}
              : { schemaVersion: write.schemaVersion ?? cur.s }),
            ...(cur.f == null ? {} : { forkedFrom: forkPointOf(cur.f) }),
            ...((write.preview ?? cur.p) === undefined ? {} : { preview: write.preview ?? cur.p }),
          };
          // One chunk set serves every attempt of this call: the state is the same.
          body ??= await bodyOf(this.#db, u, h, write.state);
          if (!body) return AGAIN;
          const w = newId();
          const idemPart = await prepareIdem(this.#db, u, ctx, idem, next, body);
          // A write without an entry would leave a gap: the log is dropped.
          const log = await planLog(this.#db, u, h, cur, undefined, ctx);
          let after: Deno.KvKey[] = [];
          let lease: B.LeaseOutcome | undefined;
          const res = await this.#db.commit((op) => {
            op.check(first);
            if (gz) op.check(gz);
            after = putHead(this.#db, op, u, h, cur, next, body!, w, log);
            if (usage) usage(op);
            else staleUsage(this.#db, op, u);
            idemPart.add(op);
            lease = takeLease(this.#k, op, user, handle, lz, ctx);
          });
          if (res.ok || await landed(this.#db, u, h, w)) {
            body = null;
            this.#feed.changed(user, handle, res);
            if (res.ok) await afterCommit(this.#db, after, res.versionstamp);
            return lease ? { ok: true, record: next, lease } : { ok: true, record: next };
          }
          await dropCopy(this.#db, u, idemPart.copy);
          if ("set" in body && body.set) {
            // The intent may have been collected meanwhile; check before reuse.
            const still = await this.#db.get<Intent>(body.set.intent);
            if (still.versionstamp !== body.set.intentVs) {
              await releaseBody(this.#db, body);
              body = null;
            }
          }
          return AGAIN;
        }, this.#db.contended(handle));
      } finally {
        await releaseBody(this.#db, body);
      }
    });
  }

  /** {@inheritDoc Backend.update} */
  update(
    user: string,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    return this.#turn(user, handle, async (): Promise<B.UpdateOutcome | B.Replayed> => {
      const u = this.#k.user(user), h = this.#k.handle(handle);
      return await optimistic(async () => {
        const opened = await this.#open(u, h, user, handle, ctx);
        if (opened.replay) return opened.replay;
        const { head: read, idem, lz, gz } = opened;
        // The head whose state was read; the commit checks it.
        const loaded = await loadRecord(this.#db, u, h, handle, read);
        const first = loaded.entry;
        const current = loaded.record;
        const step = change(current && { ...current });
        const next = step?.record ?? null;
        if (!next && !ctx.idempotency) return { record: current, written: false };
        const usage = next && ctx.quota &&
          await planUsage(this.#db, u, await readUsageEntries(this.#db, u), ctx.quota, {
            handles: first.value ? 0 : 1,
            bytes: utf8Length(next.state) - (first.value?.z ?? 0),
          }, ctx.now);
        const w = newId();
        let body: BodyRef | null = null;
        let copy: { d: string; n: number } | null = null;
        let ok = false;
        try {
          if (next) {
            body = await bodyOf(
              this.#db,
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
            const idemPart = await prepareIdem(this.#db, u, ctx, idem, result, next ? body : null);
            copy = idemPart.copy;
            // Read under the same head versionstamp the commit checks.
            const log = next ? await planLog(this.#db, u, h, first.value, step?.entry, ctx) : null;
            let after: Deno.KvKey[] = [];
            let lease: B.LeaseOutcome | undefined;
            const res = await this.#db.commit((op) => {
              op.check(first);
              if (gz) op.check(gz);
              if (next) {
                after = putHead(this.#db, op, u, h, first.value, next, body!, w, log!);
                if (usage) usage(op);
                else staleUsage(this.#db, op, u);
                lease = takeLease(this.#k, op, user, handle, lz, ctx);
              }
              idemPart.add(op);
            });
            ok = res.ok || (next !== null && await landed(this.#db, u, h, w));
            if (ok) {
              if (next) this.#feed.changed(user, handle, res);
              if (res.ok) await afterCommit(this.#db, after, res.versionstamp);
              const out = { record: result && { ...result }, written: next !== null };
              return lease ? { ...out, lease } : out;
            }
          }
        } finally {
          if (!ok) {
            await releaseBody(this.#db, body);
            await dropCopy(this.#db, u, copy);
          }
        }
        return AGAIN;
      }, this.#db.contended(handle));
    });
  }

  /** {@inheritDoc Backend.remove} */
  async remove(
    user: string,
    handle: string,
    ctx: B.WriteContext,
  ): Promise<{ removed: boolean } | B.Replayed> {
    const u = this.#k.user(user), h = this.#k.handle(handle);
    const until = ctx.trashUntil;
    return await optimistic(async () => {
      let head: Deno.KvEntryMaybe<Head>, idem: Deno.KvEntryMaybe<IdemValue> | null;
      let trash: Deno.KvEntryMaybe<Trashed> | null = null;
      if (until === undefined) [head, idem] = await readHeads(this.#db, u, h, ctx);
      else [head, idem, trash] = await readHeadsAndTrash(this.#db, u, h, ctx);
      const replay = await replayOf(this.#db, u, idem, ctx);
      if (replay) return replay;
      const old = head.value;
      if (!old) return { removed: false };
      // Under quotas the usage is kept exact (a delete is never refused).
      const usage = ctx.quota &&
        await planUsage(
          this.#db,
          u,
          await readUsageEntries(this.#db, u),
          undefined,
          {
            handles: -1,
            bytes: -old.z,
          },
          ctx.now,
          false,
        );
      const idemPart = await prepareIdem(this.#db, u, ctx, idem, null, null);
      let after: Deno.KvKey[] = [];
      const res = await this.#db.commit((op) => {
        op.check(head);
        if (until === undefined || trash === null) {
          after = dropRecord(this.#db, op, u, h, old, true);
        } else {
          // Into the trash: the head moves, its chunks and changelog stay.
          op.check(trash);
          const prev = trash.value;
          if (prev) {
            // An older trashed copy (an importRecord() wrote the handle meanwhile) gives way.
            op.delete(this.#k.trashExpiry(prev.t, u, h));
            after = dropRecord(this.#db, op, u, h, prev.h, false);
          }
          op.delete(this.#k.head(u, h));
          op.delete(this.#k.index(u, old.u, h));
          if (old.e !== null) op.delete(this.#k.expiry(old.e, u, h));
          op.set(this.#k.trash(u, h), { h: old, t: until } satisfies Trashed);
          op.set(this.#k.trashExpiry(until, u, h), 0);
        }
        if (usage) usage(op);
        else staleUsage(this.#db, op, u);
        idemPart.add(op);
      });
      if (res.ok) {
        this.#feed.changed(user, handle, null);
        await afterCommit(this.#db, after, res.versionstamp);
        return { removed: true };
      }
      return AGAIN;
    }, this.#db.contended(handle));
  }

  /** {@inheritDoc Backend.trash} */
  readonly trash: B.TrashPrimitives = {
    /**
     * Reads the user's trash entries (one range read of their heads — a small
     * state kept inline in its head comes along — never a chunk or a log) and
     * sorts them. A handle longer than 200 UTF-8 bytes,
     * which only an import can write, is keyed by its digest and cannot be
     * named back from its key: such a record is left out of the listing.
     */
    list: async (user, q) => {
      const rows = await this.#db.range<Trashed>({
        prefix: [...this.#k.p, "u", this.#k.user(user), "t"],
      });
      const out: B.TrashedMeta[] = [];
      for (const { key, value } of rows) {
        const handle = key[key.length - 1];
        if (typeof handle !== "string") continue;
        const row = { ...metaOfIndex({ ...value.h, h: handle }), trashUntil: value.t };
        if (!q.after || compareTrashOrder(row, q.after) > 0) out.push(row);
      }
      return out.sort(compareTrashOrder).slice(0, q.limit);
    },
    until: async (user, handle) => {
      const key = this.#k.trash(this.#k.user(user), this.#k.handle(handle));
      const t = await this.#db.get<Trashed>(key);
      return t.value?.t ?? null;
    },
  };

  /** {@inheritDoc Backend.untrash} */
  async untrash(user: string, handle: string, ctx: B.WriteContext): Promise<B.HandleRecord | null> {
    const u = this.#k.user(user), h = this.#k.handle(handle);
    return await optimistic(async () => {
      const [head, trash] = await this.#db.io(() =>
        this.#db.kv.getMany<[Head, Trashed]>([this.#k.head(u, h), this.#k.trash(u, h)])
      );
      const t = trash.value;
      if (!t || t.t <= ctx.now || head.value !== null) return null;
      // The state is read before the commit: its chunks stay while the trash entry does.
      let text: string;
      try {
        text = await stateText(this.#db, u, h, t.h);
      } catch (e) {
        if (!(e instanceof Raced)) throw e;
        const again = await this.#db.get<Trashed>(this.#k.trash(u, h));
        if (again.versionstamp === trash.versionstamp) {
          throw new BackendError(
            `The state of the trashed "${handle}" is incomplete in Deno KV (chunks are missing); it cannot be restored.`,
          );
        }
        return AGAIN;
      }
      const record = recordOf(handle, t.h, text);
      const usage = ctx.quota &&
        await planUsage(this.#db, u, await readUsageEntries(this.#db, u), ctx.quota, {
          handles: 1,
          bytes: t.h.z,
        }, ctx.now);
      const res = await this.#db.commit((op) => {
        op.check(head).check(trash);
        if (usage) usage(op);
        else staleUsage(this.#db, op, u);
        op.delete(this.#k.trash(u, h));
        op.delete(this.#k.trashExpiry(t.t, u, h));
        op.set(this.#k.head(u, h), t.h);
        op.set(this.#k.index(u, t.h.u, h), indexOf(record));
        if (t.h.e !== null) op.set(this.#k.expiry(t.h.e, u, h), 0);
        op.set(this.#k.userName(u), user);
      });
      if (res.ok) {
        this.#feed.changed(user, handle, res);
        return record;
      }
      return AGAIN;
    }, this.#db.contended(handle));
  }

  /** {@inheritDoc Backend.changes} */
  async changes(user: string, handle: string, afterVersion: number): Promise<B.ChangeEntry[]> {
    const u = this.#k.user(user), h = this.#k.handle(handle);
    const head = (await this.#db.get<Head>(this.#k.head(u, h))).value;
    if (!head || head.L === undefined || head.g === undefined) return [];
    const from = Math.max(afterVersion + 1, head.g);
    if (from > head.v) return [];
    // Up to the head's version only: an entry is never seen before its write.
    const rows = await this.#db.range<LogValue>({
      start: this.#k.log(u, h, head.L, from),
      end: this.#k.log(u, h, head.L, head.v + 1),
    }, { batchSize: Math.min(1000, head.v - from + 1) });
    return rows.map((e) => ({
      version: e.key[e.key.length - 1] as number,
      at: e.value.a,
      text: decodeBytes(e.value.b, e.value.x === true),
    }));
  }

  /** {@inheritDoc Backend.list} */
  async list(user: string, q: B.ListQuery): Promise<B.HandleMeta[]> {
    const u = this.#k.user(user);
    const prefix: Deno.KvKey = [...this.#k.p, "u", u, "i"];
    const selector: Deno.KvListSelector = q.after
      ? { prefix, start: [...prefix, 0 - q.after.updatedAt] }
      : { prefix };
    const batchSize = Math.min(1000, Math.max(16, q.limit + 1));
    return await this.#db.io(async () => {
      const out: B.HandleMeta[] = [];
      if (q.limit <= 0) return out;
      for await (const e of this.#db.kv.list<IndexEntry>(selector, { batchSize })) {
        const m = metaOfIndex(e.value);
        if (!q.previews) delete m.preview;
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
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    return sweep(this.#db, this.#orphanAgeMs, user, expiredAtOrBefore, now);
  }

  /** {@inheritDoc Backend.records} */
  readonly records: B.RecordPrimitives = {
    /**
     * One page of the users that have at least one record, in the order of
     * their keys (UTF-8 byte order; users whose name is too long for a key,
     * or not well-formed Unicode, come first).
     *
     * @param query `after`: the last user of the previous page; `limit`: page size.
     * @returns Up to `limit` user names.
     */
    users: (query) => listUsers(this.#db, query),
    import: async (user, record, ctx) => {
      const u = this.#k.user(user), h = this.#k.handle(record.handle);
      return await optimistic(async () => {
        const head = await this.#db.get<Head>(this.#k.head(u, h));
        const old = head.value;
        if (old && old.v >= record.version) return "kept";
        const w = newId();
        const body = await bodyOf(this.#db, u, h, record.state);
        let ok = false;
        try {
          if (body) {
            // A replaced record's changelog is dropped: its history is unknown.
            const log = await planLog(this.#db, u, h, old, undefined, ctx);
            let after: Deno.KvKey[] = [];
            const res = await this.#db.commit((op) => {
              op.check(head);
              after = putHead(this.#db, op, u, h, old, record, body, w, log);
              op.set(this.#k.userName(u), user);
              staleUsage(this.#db, op, u);
            });
            ok = res.ok || await landed(this.#db, u, h, w);
            if (ok) this.#feed.changed(user, record.handle, res);
            if (res.ok) await afterCommit(this.#db, after, res.versionstamp);
          }
        } finally {
          if (!ok) await releaseBody(this.#db, body);
        }
        if (ok) return old ? "replaced" : "inserted";
        return AGAIN;
      }, this.#db.contended(record.handle));
    },
  };

  /** {@inheritDoc Backend.quotas} */
  readonly quotas: B.QuotaPrimitives = {
    /**
     * One read of the user's usage key; when it is unknown (a write without
     * quotas, an import or a sweep marked it so), a read of the user's heads.
     */
    usage: (user, now) => usageOf(this.#db, this.#k.user(user), now),
  };

  /** {@inheritDoc Backend.transfer} */
  readonly transfer: B.TransferPrimitives = {
    /**
     * The state and the changelog are first copied below `to` under fresh ids
     * (invisible until a head names them, collected by `sweep` if none ever
     * does); then one commit checks the old head's versionstamp and the absence
     * of `to`'s head and trash entry, and moves the record, the usage of both
     * users, the grants it ends and the one it keeps (see `denokv/_transfer.ts`).
     * So a state or a changelog of any size moves; what is bounded is that
     * commit: a handle with more grants in force than fit in it (about 960,
     * fewer when they are large: Deno KV takes 1,000 changes and 819,200 bytes
     * a commit) is refused with `invalid_argument`, nothing moved.
     */
    move: (user, handle, to, ctx, step = {}) => {
      return this.#turn(user, handle, async () => {
        const { outcome, res } = await transfer(
          this.#db,
          this.#grants,
          user,
          handle,
          to,
          ctx,
          step,
        );
        if (outcome === "moved") {
          this.#feed.changed(user, handle, null);
          this.#feed.changed(to, handle, res ?? null);
        }
        return outcome;
      });
    },
  };

  /** {@inheritDoc Backend.feed} */
  readonly feed: B.FeedPrimitives = {
    /**
     * Writes through this object are heard of once they commit; those of other
     * `Deno.Kv`s through `kv.watch` on the handle's head key and, except on a
     * KV Connect endpoint, a poll of the watched heads' versionstamps every
     * 100 ms while anyone listens (`kv.watch` on a local file does not hear
     * other processes).
     */
    subscribe: (user, handle, listener) => {
      if (this.#closed) {
        return Promise.reject(new BackendError("The Deno KV backend is closed; open a new one."));
      }
      return this.#feed.subscribe(user, handle, listener);
    },
  };

  /** {@inheritDoc Backend.grants} */
  readonly grants: B.GrantPrimitives = {
    /**
     * With `audit`, the commit that stores the grant also checks the head of
     * `(grant.owner, grant.handle)` by versionstamp and writes its next version
     * with the entry.
     */
    put: (grant, now, audit) => this.#grants.put(grant, now, audit),
    read: (idOrAlias) => this.#grants.read(idOrAlias),
    /**
     * The grant and its re-shares end level by level (see `denokv/_grants.ts`);
     * `audit` is written by the first commit, the one that ends `grant`, which
     * checks the record's head by versionstamp.
     */
    end: (grant, now, audit) => this.#grants.end(grant, now, audit),
    of: (owner, handle) => this.#grants.of(owner, handle),
    to: (to) => this.#grants.to(to),
    /** Deleted as an erase deletes grants (`denokv/_erase.ts`), in its atomic commits. */
    sweep: (before) => this.#erasure.sweepGrants(before),
  };

  /** {@inheritDoc Backend.close} */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#feed.close();
    if (this.#closeKv) {
      try {
        this.#db.kv.close();
      } catch { /* already closed */ }
    }
  }
}
