/**
 * The memory backend's class: every record in process maps, each primitive
 * run without awaiting.
 *
 * @module
 */

import type * as B from "../../backend.ts";
import { auditEntry, metaOf } from "../../backend.ts";
import { utf8Length } from "../../json.ts";
import { checkQuota, MINUTE_MS, type UsageDelta, writesAt } from "../_quota.ts";
import { grantEnded, grantGone, grantStale } from "../../grants.ts";
import { memoryErasure } from "./_erase.ts";
import { memoryKeys } from "./_keys.ts";
import { memoryContent } from "./_content.ts";
import { compareListOrder, compareTrashOrder, Listeners, saveByUpdate } from "../_shared.ts";

interface Trashed {
  record: B.HandleRecord;
  log: B.ChangeEntry[];
  until: number;
}

interface IdemEntry {
  fingerprint: string;
  result: B.HandleRecord | null;
  expiresAt: number;
}

/**
 * A record and its changelog as a transfer moves them: as they are, or with
 * `content` in place of their texts; `null` when `content` was made from
 * another version, or lacks the text of an entry (see `TransferContent`).
 */
function resealed(
  record: B.HandleRecord,
  log: B.ChangeEntry[] | undefined,
  content: B.TransferContent | undefined,
): { record: B.HandleRecord; log: B.ChangeEntry[] | undefined } | null {
  if (!content) return { record, log };
  if (record.version !== content.version) return null;
  const texts = new Map(content.entries.map((e) => [e.version, e.text]));
  if (log?.some((e) => !texts.has(e.version))) return null;
  const { preview: _, ...rest } = record;
  return {
    record: content.preview === undefined
      ? { ...rest, state: content.state }
      : { ...rest, state: content.state, preview: content.preview },
    log: log?.map((e) => ({ ...e, text: texts.get(e.version)! })),
  };
}

/** Keeps every record in process memory. Each primitive runs without awaiting, so it is atomic. */
export class MemoryBackend implements B.Backend {
  #users = new Map<string, Map<string, B.HandleRecord>>();
  #idem = new Map<string, IdemEntry>();
  #logs = new Map<string, B.ChangeEntry[]>();
  #trash = new Map<string, Trashed>();
  #leases = new Map<string, B.LeaseRecord>();
  #listeners = new Listeners();
  #rates = new Map<string, { minute: number; writes: number }>();
  #grants = new Map<string, B.GrantRecord>();
  #aliases = new Map<string, string>();
  /** {@inheritDoc Backend.keys} */
  readonly keys: B.KeyPrimitives = memoryKeys();
  /** {@inheritDoc Backend.content} */
  readonly content: B.ContentPrimitives = memoryContent({
    users: this.#users,
    idem: this.#idem,
    logs: this.#logs,
    trash: this.#trash,
  });
  /** {@inheritDoc Backend.erasure} */
  readonly erasure: B.ErasurePrimitives = memoryErasure({
    users: this.#users,
    idem: this.#idem,
    logs: this.#logs,
    trash: this.#trash,
    leases: this.#leases,
    rates: this.#rates,
    grants: this.#grants,
    aliases: this.#aliases,
    listeners: this.#listeners,
  });

  /**
   * Opens a memory backend from a `memory://` URL (the URL carries no options).
   *
   * @param _url The URL.
   * @returns A fresh, empty backend.
   */
  static fromUrl(_url: string): Promise<MemoryBackend> {
    return Promise.resolve(new MemoryBackend());
  }

  #records(user: string): Map<string, B.HandleRecord> {
    let m = this.#users.get(user);
    if (!m) this.#users.set(user, m = new Map());
    return m;
  }

  #append(
    user: string,
    handle: string,
    entry: B.ChangeEntry | undefined,
    ctx: B.WriteContext,
  ): void {
    if (!entry) return;
    const key = JSON.stringify([user, handle]);
    const r = ctx.retention;
    const log = (this.#logs.get(key) ?? []).filter((e) =>
      !r || (e.version > entry.version - r.maxEntries && e.at >= ctx.now - r.maxAgeMs)
    );
    log.push({ ...entry });
    this.#logs.set(key, log);
  }

  /** Applies `audit` to `(user, handle)` when that record is live; false when it is not. */
  #audit(user: string, handle: string, audit: B.AuditStep | undefined, now: number): boolean {
    if (!audit) return true;
    const r = this.#users.get(user)?.get(handle);
    if (!r) return false;
    const entry = auditEntry(audit, r.version + 1);
    this.#records(user).set(handle, { ...r, version: entry.version, updatedAt: entry.at });
    this.#append(user, handle, entry, { now, retention: audit.retention } as B.WriteContext);
    this.#listeners.notify(user, handle);
    return true;
  }

  #replay(user: string, ctx: B.WriteContext): B.Replayed | undefined {
    const c = ctx.idempotency;
    if (!c) return undefined;
    const e = this.#idem.get(JSON.stringify([user, c.scope, c.key]));
    if (!e || e.expiresAt <= ctx.now) return undefined;
    return { replayed: true, fingerprint: e.fingerprint, result: e.result && { ...e.result } };
  }

  /**
   * Runs a write after looking its idempotency key up: a key seen before
   * answers the first attempt's result, and nothing is written. The write
   * never awaits, so it is atomic.
   */
  #claim<T>(user: string, ctx: B.WriteContext, fn: () => T): Promise<T | B.Replayed> {
    try {
      return Promise.resolve(this.#replay(user, ctx) ?? fn());
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Checks `ctx.quota` against the usage before a write of `delta`, and counts the write. */
  #quota(user: string, ctx: B.WriteContext, delta: UsageDelta): void {
    if (!ctx.quota) return;
    checkQuota(ctx.quota, this.#usageOf(user, ctx.now), delta, ctx.now);
    const minute = Math.floor(ctx.now / MINUTE_MS);
    const r = this.#rates.get(user);
    this.#rates.set(user, { minute, writes: r?.minute === minute ? r.writes + 1 : 1 });
  }

  #usageOf(user: string, now: number): B.Usage {
    let handles = 0, bytes = 0;
    for (const r of this.#users.get(user)?.values() ?? []) {
      handles++;
      bytes += utf8Length(r.state);
    }
    const r = this.#rates.get(user);
    return { handles, bytes, writesThisMinute: r ? writesAt(r.minute, r.writes, now) : 0 };
  }

  /** {@inheritDoc Backend.quotas} */
  readonly quotas: B.QuotaPrimitives = {
    /**
     * Computed from the records on each call (the reference implementation).
     */
    usage: (user, now) => Promise.resolve(this.#usageOf(user, now)),
  };

  #remember(user: string, ctx: B.WriteContext, result: B.HandleRecord | null): void {
    const c = ctx.idempotency;
    if (!c) return;
    this.#idem.set(JSON.stringify([user, c.scope, c.key]), {
      fingerprint: c.fingerprint,
      result: result && { ...result },
      expiresAt: c.expiresAt,
    });
  }

  /** {@inheritDoc Backend.insert} */
  insert(
    user: string,
    record: B.HandleRecord,
    ctx: B.WriteContext,
  ): Promise<B.InsertOutcome | B.Replayed> {
    return this.#claim(user, ctx, () => {
      const records = this.#records(user);
      if (records.has(record.handle) || this.#trash.has(JSON.stringify([user, record.handle]))) {
        return { inserted: false };
      }
      this.#quota(user, ctx, { handles: 1, bytes: utf8Length(record.state) });
      records.set(record.handle, { ...record });
      this.#append(user, record.handle, ctx.entry, ctx);
      this.#remember(user, ctx, record);
      this.#listeners.notify(user, record.handle);
      return ctx.lease
        ? { inserted: true, lease: this.#take(user, record.handle, ctx.lease, ctx.now) }
        : { inserted: true };
    });
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<B.HandleRecord | null> {
    const r = this.#users.get(user)?.get(handle);
    return Promise.resolve(r ? { ...r } : null);
  }

  /**
   * {@inheritDoc Backend.save}
   *
   * Derived from {@link MemoryBackend.update}: in memory one step costs the same either way.
   */
  save(
    user: string,
    handle: string,
    write: B.ConditionalWrite,
    ctx: B.WriteContext,
  ): Promise<B.SaveOutcome | B.Replayed> {
    return saveByUpdate(this.update.bind(this), user, handle, write, ctx);
  }

  /** {@inheritDoc Backend.update} */
  update(
    user: string,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    return this.#claim(user, ctx, () => {
      this.#checkGrant(ctx);
      const current = this.#users.get(user)?.get(handle) ?? null;
      const step = change(current ? { ...current } : null);
      const next = step?.record ?? null;
      if (step) {
        const old = current ? utf8Length(current.state) : 0;
        this.#quota(user, ctx, {
          handles: current ? 0 : 1,
          bytes: utf8Length(step.record.state) - old,
        });
        this.#records(user).set(handle, { ...step.record });
        this.#append(user, handle, step.entry, ctx);
      }
      const record = next ?? current;
      this.#remember(user, ctx, record);
      if (next) this.#listeners.notify(user, handle);
      const out: B.UpdateOutcome = { record: record && { ...record }, written: next !== null };
      if (next && ctx.lease) out.lease = this.#take(user, handle, ctx.lease, ctx.now);
      return out;
    });
  }

  /** Throws when the grant `ctx.grant` names is not in force at `ctx.now`. */
  #checkGrant(ctx: B.WriteContext): void {
    if (!ctx.grant) return;
    const reason = grantGone(this.#grants.get(ctx.grant.grant) ?? null, ctx.now);
    if (reason) throw grantEnded(ctx.grant, reason);
  }

  /** {@inheritDoc Backend.grants} */
  readonly grants: B.GrantPrimitives = {
    put: (grant, now, audit) => {
      if (grant.parent !== null) {
        const reason = grantGone(this.#grants.get(grant.parent) ?? null, now);
        if (reason) {
          return Promise.reject(grantEnded({ grant: grant.parent, alias: grant.alias }, reason));
        }
      }
      if (!this.#audit(grant.owner, grant.handle, audit, now)) return Promise.resolve("absent");
      this.#grants.set(grant.grant, { ...grant });
      this.#aliases.set(grant.alias, grant.grant);
      return Promise.resolve();
    },
    read: (idOrAlias) => {
      const g = this.#grants.get(idOrAlias) ??
        this.#grants.get(this.#aliases.get(idOrAlias) ?? "");
      return Promise.resolve(g ? { ...g } : null);
    },
    end: (grant, now, audit) => {
      const root = this.#grants.get(grant);
      const ended = this.#endGrants(grant, now);
      if (root && ended.length > 0) this.#audit(root.owner, root.handle, audit, now);
      return Promise.resolve(ended);
    },
    of: (owner, handle) => {
      return Promise.resolve(
        [...this.#grants.values()].filter((g) => g.owner === owner && g.handle === handle)
          .map((g) => ({ ...g })),
      );
    },
    to: (to) => {
      return Promise.resolve(
        [...this.#grants.values()].filter((g) => g.to === to && g.endedAt === null)
          .map((g) => ({ ...g })),
      );
    },
    sweep: (before) => {
      let n = 0;
      for (const g of [...this.#grants.values()]) {
        if (!grantStale(g, before)) continue;
        this.#aliases.delete(g.alias);
        this.#grants.delete(g.grant);
        n++;
      }
      return Promise.resolve(n);
    },
  };

  /** Ends grant `grant` and every grant under it; returns those it ended. */
  #endGrants(grant: string, now: number): B.GrantRecord[] {
    const ended: B.GrantRecord[] = [];
    const ids = new Set([grant]);
    // Grants are kept in insertion order, and a re-share is made after its parent.
    for (const g of this.#grants.values()) {
      if (!ids.has(g.grant) && (g.parent === null || !ids.has(g.parent))) continue;
      ids.add(g.grant);
      if (g.endedAt !== null) continue;
      g.endedAt = now;
      ended.push({ ...g });
    }
    return ended;
  }

  /** {@inheritDoc Backend.remove} */
  remove(
    user: string,
    handle: string,
    ctx: B.WriteContext,
  ): Promise<{ removed: boolean } | B.Replayed> {
    return this.#claim(user, ctx, () => {
      const current = this.#users.get(user)?.get(handle);
      if (!current) return { removed: false };
      this.#users.get(user)?.delete(handle);
      const key = JSON.stringify([user, handle]);
      if (ctx.trashUntil !== undefined) {
        this.#trash.set(key, {
          record: current,
          log: this.#logs.get(key) ?? [],
          until: ctx.trashUntil,
        });
      }
      this.#logs.delete(key);
      this.#remember(user, ctx, null);
      this.#listeners.notify(user, handle);
      return { removed: true };
    });
  }

  /** {@inheritDoc Backend.untrash} */
  untrash(user: string, handle: string, ctx: B.WriteContext): Promise<B.HandleRecord | null> {
    const key = JSON.stringify([user, handle]);
    const t = this.#trash.get(key);
    if (!t || t.until <= ctx.now || this.#users.get(user)?.has(handle)) {
      return Promise.resolve(null);
    }
    try {
      this.#quota(user, ctx, { handles: 1, bytes: utf8Length(t.record.state) });
    } catch (e) {
      return Promise.reject(e);
    }
    this.#trash.delete(key);
    this.#records(user).set(handle, t.record);
    this.#logs.set(key, t.log);
    this.#listeners.notify(user, handle);
    return Promise.resolve({ ...t.record });
  }

  /** {@inheritDoc Backend.changes} */
  changes(user: string, handle: string, afterVersion: number): Promise<B.ChangeEntry[]> {
    if (!this.#users.get(user)?.has(handle)) return Promise.resolve([]);
    const log = this.#logs.get(JSON.stringify([user, handle])) ?? [];
    return Promise.resolve(log.filter((e) => e.version > afterVersion).map((e) => ({ ...e })));
  }

  /** {@inheritDoc Backend.list} */
  list(user: string, q: B.ListQuery): Promise<B.HandleMeta[]> {
    const rows: B.HandleMeta[] = [];
    for (const r of this.#users.get(user)?.values() ?? []) {
      if (q.kind !== undefined && r.kind !== q.kind) continue;
      if (q.liveAt !== undefined && r.expiresAt !== null && r.expiresAt <= q.liveAt) continue;
      if (q.after && compareListOrder(r, q.after) <= 0) continue;
      const meta = metaOf(r);
      if (!q.previews) delete meta.preview;
      rows.push(meta);
    }
    rows.sort(compareListOrder);
    return Promise.resolve(rows.slice(0, q.limit));
  }

  /** {@inheritDoc Backend.sweep} */
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    let n = 0;
    for (const [u, records] of this.#users) {
      if (user !== null && u !== user) continue;
      for (const [h, r] of records) {
        if (r.expiresAt !== null && r.expiresAt <= expiredAtOrBefore) {
          records.delete(h);
          this.#logs.delete(JSON.stringify([u, h]));
          this.#listeners.notify(u, h);
          n++;
        }
      }
    }
    for (const [k, e] of this.#idem) if (e.expiresAt <= now) this.#idem.delete(k);
    for (const [k, l] of this.#leases) if (l.expiresAt <= now) this.#leases.delete(k);
    for (const [k, t] of this.#trash) {
      if (t.until <= now && (user === null || JSON.parse(k)[0] === user)) this.#trash.delete(k);
    }
    return Promise.resolve(n);
  }

  /** {@inheritDoc Backend.transfer} */
  readonly transfer: B.TransferPrimitives = {
    move: (user, handle, to, ctx, step = {}) => {
      const current = this.#users.get(user)?.get(handle);
      if (!current) return Promise.resolve("absent");
      const target = JSON.stringify([to, handle]);
      if (this.#users.get(to)?.has(handle) || this.#trash.has(target)) {
        return Promise.resolve("taken");
      }

      const key = JSON.stringify([user, handle]);
      const moved = resealed(current, this.#logs.get(key), step.content);
      if (!moved) return Promise.resolve("changed");
      try {
        this.#quota(to, ctx, { handles: 1, bytes: utf8Length(moved.record.state) });
      } catch (e) {
        return Promise.reject(e);
      }
      this.#users.get(user)?.delete(handle);
      this.#records(to).set(handle, moved.record);
      this.#logs.delete(key);
      if (moved.log) this.#logs.set(target, moved.log);
      this.#leases.delete(key);
      this.#audit(to, handle, step.audit, ctx.now);
      for (const g of [...this.#grants.values()]) {
        if (g.owner === user && g.handle === handle && g.endedAt === null) g.endedAt = ctx.now;
      }
      if (step.keep) {
        this.#grants.set(step.keep.grant, { ...step.keep });
        this.#aliases.set(step.keep.alias, step.keep.grant);
      }
      this.#listeners.notify(user, handle);
      this.#listeners.notify(to, handle);
      return Promise.resolve("moved");
    },
  };

  /** {@inheritDoc Backend.trash} */
  readonly trash: B.TrashPrimitives = {
    list: (user, q) => {
      const rows: B.TrashedMeta[] = [];
      for (const [k, t] of this.#trash) {
        if (JSON.parse(k)[0] !== user) continue;
        const row = { ...metaOf(t.record), trashUntil: t.until };
        if (q.after && compareTrashOrder(row, q.after) <= 0) continue;
        rows.push(row);
      }
      rows.sort(compareTrashOrder);
      return Promise.resolve(rows.slice(0, q.limit));
    },
    until: (user, handle) =>
      Promise.resolve(this.#trash.get(JSON.stringify([user, handle]))?.until ?? null),
  };

  /** {@inheritDoc Backend.records} */
  readonly records: B.RecordPrimitives = {
    users: (query) => {
      const users: string[] = [];
      for (const [user, records] of this.#users) {
        if (records.size === 0) continue;
        if (query.after !== undefined && user <= query.after) continue;
        users.push(user);
      }
      users.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      return Promise.resolve(users.slice(0, query.limit));
    },
    import: (user, record, _ctx) => {
      const records = this.#records(user);
      const current = records.get(record.handle);
      if (current && current.version >= record.version) return Promise.resolve("kept");
      records.set(record.handle, { ...record });
      this.#logs.delete(JSON.stringify([user, record.handle]));
      this.#listeners.notify(user, record.handle);
      return Promise.resolve(current ? "replaced" : "inserted");
    },
  };

  /** {@inheritDoc Backend.leases} */
  readonly leases: B.LeasePrimitives = {
    acquire: (user, handle, lease, now) => Promise.resolve(this.#take(user, handle, lease, now)),
    release: (user, handle, holder, now) => {
      const key = JSON.stringify([user, handle]);
      const cur = this.#leases.get(key);
      if (!cur || cur.holder !== holder) return Promise.resolve(false);
      this.#leases.delete(key);
      return Promise.resolve(cur.expiresAt > now);
    },
    of: (user, handles, now) => {
      const out = new Map<string, B.LeaseRecord>();
      for (const h of handles) {
        const l = this.#leases.get(JSON.stringify([user, h]));
        if (l && l.expiresAt > now) out.set(h, { ...l });
      }
      return Promise.resolve(out);
    },
    readLeased: (user, handle, now) => {
      const r = this.#users.get(user)?.get(handle);
      const l = this.#leases.get(JSON.stringify([user, handle]));
      return Promise.resolve({
        record: r ? { ...r } : null,
        lease: l && l.expiresAt > now ? { ...l } : null,
      });
    },
  };

  #take(user: string, handle: string, lease: B.LeaseRecord, now: number): B.LeaseOutcome {
    const key = JSON.stringify([user, handle]);
    const cur = this.#leases.get(key);
    if (cur && cur.holder !== lease.holder && cur.expiresAt > now) {
      return { acquired: false, lease: { ...cur } };
    }
    this.#leases.set(key, { ...lease });
    return { acquired: true, lease: { ...lease } };
  }

  /** {@inheritDoc Backend.feed} */
  readonly feed: B.FeedPrimitives = {
    subscribe: (user, handle, listener) =>
      Promise.resolve(this.#listeners.add(user, handle, listener)),
  };

  /** {@inheritDoc Backend.close} */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
