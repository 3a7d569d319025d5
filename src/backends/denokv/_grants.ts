/**
 * Grants on Deno KV (sharing). Under the backend's prefix `P`:
 *
 * - `[P, "g", grant]` — the grant record itself, the one key a write through
 *   the grant reads and checks by versionstamp in its own atomic commit;
 * - `[P, "ga", alias]` — the grant id of an alias handle;
 * - `[P, "go", owner, handle, createdAt, tick, grant]` — the grants of a
 *   handle (`tick`: the writer's high-resolution clock, which orders grants
 *   made in the same millisecond);
 * - `[P, "gt", to, createdAt, tick, grant]` — the grants to a user (not `"*"`);
 * - `[P, "gc", parent, grant]` — the re-shares of a grant.
 *
 * The index keys hold only the grant id; the record is read from `"g"`.
 * `endGrant` ends the grant, then its re-shares level by level, each
 * commit checking the versionstamps of the grants it ends; a re-share's
 * `putGrant` checks its parent's versionstamp, so once a grant is ended no
 * re-share is added under it, and the re-shares listed after its end are
 * all there are. Every grant under the one ended is ended before `endGrant`
 * returns, and a write through any of them checks its grant's versionstamp:
 * none lands after that.
 *
 * With an `AuditStep`, `putGrant` and the first commit of `endGrant` (the
 * one that ends the grant named) also check the head of the grant's record
 * and write its next version with the entry (`_audit.ts`). So, with history
 * on, every new grant of a handle is a commit that checks its head, which a
 * transfer deletes in its own commit: a transfer never leaves behind a grant
 * made beside it.
 *
 * @module
 */

import type { AuditStep, GrantCheck, GrantRecord } from "../../backend.ts";
import { grantEnded, grantGone } from "../../grants.ts";
import { AGAIN, optimistic } from "../_retry.ts";
import { type AuditCommit, planAudit } from "./_audit.ts";
import type { KvIo } from "./_io.ts";

/** Called after a commit that wrote an audit entry (the change feed, the collection of trimmed entries). */
export type Audited = (
  audit: AuditCommit,
  res: Deno.KvCommitResult,
  after: Deno.KvKey[],
) => Promise<void>;

/** At most this many grants are ended in one commit (two keys each: a check and a set). */
const END_BATCH = 50;
/** `getMany` reads at most this many keys. */
const GET_MANY_MAX = 10;

/** The grant keys of one backend. */
export class GrantKeys {
  readonly #db: KvIo;

  /** @param db The backend's KV. */
  constructor(db: KvIo) {
    this.#db = db;
  }

  /** The key of a grant record. */
  grant(id: string): Deno.KvKey {
    return [...this.#db.keys.p, "g", this.#db.keys.handle(id)];
  }

  /** The key of an alias. */
  alias(alias: string): Deno.KvKey {
    return [...this.#db.keys.p, "ga", this.#db.keys.handle(alias)];
  }

  /** The prefix of a handle's grants. */
  ofHandle(owner: string, handle: string): Deno.KvKey {
    const k = this.#db.keys;
    return [...k.p, "go", k.user(owner), k.handle(handle)];
  }

  /** The prefix of the grants to a user. */
  toUser(to: string): Deno.KvKey {
    return [...this.#db.keys.p, "gt", this.#db.keys.user(to)];
  }

  /** The prefix of a grant's re-shares. */
  children(parent: string): Deno.KvKey {
    return [...this.#db.keys.p, "gc", this.#db.keys.handle(parent)];
  }
}

/** The grant primitives of the Deno KV backend. */
export class KvGrants {
  readonly #db: KvIo;
  readonly #k: GrantKeys;
  readonly #audited: Audited;

  /**
   * @param db The backend's KV.
   * @param audited Called after each commit that wrote an audit entry.
   */
  constructor(db: KvIo, audited: Audited) {
    this.#db = db;
    this.#k = new GrantKeys(db);
    this.#audited = audited;
  }

  /**
   * The entry a write through `check` reads and checks in its commit.
   *
   * @param check The grant of the write, or absent.
   * @returns The entry, or `null` when the write goes through no grant.
   */
  async entry(check: GrantCheck | undefined): Promise<Deno.KvEntryMaybe<GrantRecord> | null> {
    if (!check) return null;
    return await this.#db.get<GrantRecord>(this.#k.grant(check.grant));
  }

  /**
   * Throws when the grant a write reads is not in force at `now`.
   *
   * @param check The grant of the write.
   * @param entry Its entry, as {@link KvGrants.entry} read it.
   * @param now Epoch ms.
   */
  assert(
    check: GrantCheck | undefined,
    entry: Deno.KvEntryMaybe<GrantRecord> | null,
    now: number,
  ): void {
    if (!check || !entry) return;
    const reason = grantGone(entry.value, now);
    if (reason) throw grantEnded(check, reason);
  }

  /** {@inheritDoc GrantPrimitives.put} */
  async put(grant: GrantRecord, now: number, audit?: AuditStep): Promise<void | "absent"> {
    const g = { ...grant };
    const tick = performance.timeOrigin + performance.now();
    return await optimistic(async () => {
      const [parent, plan] = await Promise.all([
        g.parent === null ? null : this.#db.get<GrantRecord>(this.#k.grant(g.parent)),
        audit ? planAudit(this.#db, g.owner, g.handle, audit, now) : null,
      ]);
      if (parent) {
        const reason = grantGone(parent.value, now);
        if (reason) throw grantEnded({ grant: g.parent!, alias: g.alias }, reason);
      }
      if (plan === "absent") return "absent";
      let after: Deno.KvKey[] = [];
      const res = await this.#db.commit((op) => {
        if (parent) op.check(parent);
        this.add(op, g, tick);
        if (plan) after = plan.add(op);
      });
      if (!res.ok) return AGAIN;
      if (plan) await this.#audited(plan, res, after);
      return undefined;
    }, this.#db.contended(g.alias));
  }

  /**
   * Adds the storing of a new grant to a commit: its record, alias and index
   * keys, with checks that its id and alias are unused (the parent is the
   * caller's to check).
   *
   * @param op The commit.
   * @param g The grant.
   * @param tick Orders grants made in the same millisecond (default: now, high resolution).
   */
  add(
    op: Deno.AtomicOperation,
    g: GrantRecord,
    tick: number = performance.timeOrigin + performance.now(),
  ): void {
    op.check({ key: this.#k.grant(g.grant), versionstamp: null });
    op.check({ key: this.#k.alias(g.alias), versionstamp: null });
    op.set(this.#k.grant(g.grant), g);
    op.set(this.#k.alias(g.alias), g.grant);
    op.set([...this.#k.ofHandle(g.owner, g.handle), g.createdAt, tick, g.grant], g.grant);
    if (g.to !== "*") op.set([...this.#k.toUser(g.to), g.createdAt, tick, g.grant], g.grant);
    if (g.parent !== null) op.set([...this.#k.children(g.parent), g.grant], g.grant);
  }

  /**
   * Adds the end of `grants` (as read, in force) at `now` to a commit. A
   * grant record changes only when it ends, so each is set without a check
   * (one mutation, no check: many fit in one commit); one that another call
   * ended meanwhile stays ended, at `now`.
   *
   * @param op The commit.
   * @param grants Grants in force.
   * @param now Epoch ms.
   */
  endIn(op: Deno.AtomicOperation, grants: readonly GrantRecord[], now: number): void {
    for (const g of grants) op.set(this.#k.grant(g.grant), { ...g, endedAt: now });
  }

  /** {@inheritDoc GrantPrimitives.read} */
  async read(idOrAlias: string): Promise<GrantRecord | null> {
    const [byId, byAlias] = await this.#db.io(() =>
      this.#db.kv.getMany<[GrantRecord, string]>([
        this.#k.grant(idOrAlias),
        this.#k.alias(idOrAlias),
      ])
    );
    if (byId.value) return byId.value;
    if (byAlias.value === null) return null;
    return (await this.#db.get<GrantRecord>(this.#k.grant(byAlias.value))).value;
  }

  /** {@inheritDoc GrantPrimitives.end} */
  async end(grant: string, now: number, audit?: AuditStep): Promise<GrantRecord[]> {
    const ended: GrantRecord[] = [];
    const seen = new Set<string>();
    let level = [grant];
    let first = true;
    while (level.length > 0) {
      const fresh = level.filter((id) => !seen.has(id));
      for (const id of fresh) seen.add(id);
      for (let i = 0; i < fresh.length; i += END_BATCH) {
        // The first commit ends the grant named, and writes the entry that records it.
        const out = await this.#endBatch(
          fresh.slice(i, i + END_BATCH),
          now,
          first ? audit : undefined,
        );
        ended.push(...out);
        first = false;
      }
      // Each of `fresh` is ended now, so no re-share is added under it any more.
      const next: string[] = [];
      for (const id of fresh) {
        const kids = await this.#db.range<string>({ prefix: this.#k.children(id) });
        for (const e of kids) next.push(e.value);
      }
      level = next;
    }
    return ended;
  }

  /**
   * Ends the grants `ids` that are not ended yet, in one commit; answers
   * those it ended. With `audit` (`ids` is then the grant named), the commit
   * also writes it on the grant's record when that is live and it ends any.
   */
  #endBatch(
    ids: string[],
    now: number,
    audit?: AuditStep,
  ): Promise<GrantRecord[]> {
    return optimistic(async () => {
      const entries = await this.#many(ids.map((id) => this.#k.grant(id)));
      const root = entries[0]?.value;
      const plan = audit && root
        ? await planAudit(this.#db, root.owner, root.handle, audit, now)
        : null;
      const live = entries.filter((e) => e.value !== null && e.value.endedAt === null);
      if (live.length === 0) return [];
      const audited = plan === "absent" ? null : plan;
      const out = live.map((e) => ({ ...e.value!, endedAt: now }));
      let after: Deno.KvKey[] = [];
      const res = await this.#db.commit((op) => {
        live.forEach((e, i) => {
          op.check(e);
          op.set(e.key, out[i]);
        });
        if (audited) after = audited.add(op);
      });
      if (!res.ok) return AGAIN;
      if (audited) await this.#audited(audited, res, after);
      return out;
    }, this.#db.contended(ids[0]!));
  }

  /** {@inheritDoc GrantPrimitives.of} */
  async of(owner: string, handle: string): Promise<GrantRecord[]> {
    return await this.#records(this.#k.ofHandle(owner, handle));
  }

  /** {@inheritDoc GrantPrimitives.to} */
  async to(to: string): Promise<GrantRecord[]> {
    return (await this.#records(this.#k.toUser(to))).filter((g) => g.endedAt === null);
  }

  /** The grant records an index names, in its (creation) order. */
  async #records(prefix: Deno.KvKey): Promise<GrantRecord[]> {
    const ids = await this.#db.range<string>({ prefix });
    const entries = await this.#many(ids.map((e) => this.#k.grant(e.value)));
    return entries.flatMap((e) => e.value ? [e.value] : []);
  }

  /** Reads keys, {@link GET_MANY_MAX} at a time, in order. */
  async #many(keys: Deno.KvKey[]): Promise<Deno.KvEntryMaybe<GrantRecord>[]> {
    const out: Deno.KvEntryMaybe<GrantRecord>[] = [];
    for (let i = 0; i < keys.length; i += GET_MANY_MAX) {
      const batch = keys.slice(i, i + GET_MANY_MAX);
      out.push(...await this.#db.io(() => this.#db.kv.getMany<GrantRecord[]>(batch)));
    }
    return out;
  }
}
