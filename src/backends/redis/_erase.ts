/**
 * Erase on Redis (SPEC 9.1), standalone and Cluster. Every key of one user
 * shares its hash slot (`P{T}:…`, see `_scripts.ts`), but grants that name
 * the user may live in other owners' slots, with look-ups by name in their
 * own slots (see `_grants.ts`). One pass:
 *
 * 1. Finds the grants to remove by a `SCAN` of every node for grant hashes
 *    (`P{*}:g:*`) and a read of each record: those the user owns, those made
 *    to the user, those the user made, and every re-share under them. No
 *    index is trusted for this.
 * 2. Drops their look-ups by name (`Pga:A`, `Pgi:G`, the grantee's `gt`
 *    list), so their aliases answer as absent at once.
 * 3. Per other owner, one script (`ERASE_GRANTS`) removes those grants and
 *    every re-share under them (walking the re-share lists, so one made
 *    since step 1 goes too), with their list entries.
 * 4. A `SCAN` of every node for the user's tag `P{T}:*` finds every key of
 *    the user — records live, expired, trashed (with their changelogs and
 *    previews), indexes, idempotency records, leases, usage, rate counts,
 *    the user's own grants, pending transfers — and one script per batch
 *    (`ERASE_OWN`, in the user's slot) deletes them; the look-ups by name of
 *    the grants it deleted go after it.
 *
 * Passes repeat until one finds nothing (at most {@link MAX_PASSES}). A
 * write of the user that lands before a pass's scan of its slot is removed
 * by that pass or the next; a save, update, patch, removal, lease or write
 * through a grant that comes after its record or grant went fails (its
 * version check or grant check finds nothing). What can land after the
 * last pass is only a creation (a mint, an import, a share) that no removed
 * record or grant is needed for: it is ordered after the erase, exactly like
 * one that started after the erase returned.
 *
 * The sweep of grants ended or expired (`grants.sweep`) finds them by the
 * same scan and removes them as step 2 and 3 do.
 *
 * @module
 */

import type { ErasureCounts, ErasurePrimitives, GrantRecord } from "../../backend.ts";
import { grantStale } from "../../grants.ts";
import type { Connection } from "./_connection.ts";
import type { KeySpace } from "./_keys.ts";
import { encodeHandle } from "./_codec.ts";
import { E } from "./_erase_scripts.ts";

/** Passes an erase makes at most while each finds something (a writer that never stops). */
export const MAX_PASSES = 8;

/** Keys per `ERASE_OWN` call. */
const BATCH = 500;

/** A grant hash found by the scan, with its record. */
interface Found {
  /** `P{O}:` of its owner. */
  base: string;
  /** The encoded grant id (the key's last part). */
  enc: string;
  /** The grant. */
  rec: GrantRecord;
}

/** The erasure primitives of the Redis backend. */
export class RedisErasure implements ErasurePrimitives {
  readonly #conn: Connection;
  readonly #k: KeySpace;
  readonly #grantKey: RegExp;

  /**
   * @param conn The backend's connection.
   * @param keys Its key names.
   */
  constructor(conn: Connection, keys: KeySpace) {
    this.#conn = conn;
    this.#k = keys;
    this.#grantKey = keys.nameRegExp((p) => "(" + p + "\\{[^}]*\\}:)g:([^:]*)");
  }

  /** {@inheritDoc ErasurePrimitives.count} */
  async count(user: string, _now: number): Promise<ErasureCounts> {
    const own = await this.#own(user);
    const base = this.#k.base(user);
    const handles = own.filter((key) => /^[rt]:/.test(key.slice(base.length))).length;
    return { handles, grants: (await this.#grants(user)).length };
  }

  /** {@inheritDoc ErasurePrimitives.erase} */
  async erase(user: string, _now: number): Promise<ErasureCounts> {
    const total: ErasureCounts = { handles: 0, grants: 0 };
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      if (!await this.#pass(user, total)) break;
    }
    return total;
  }

  /** One pass (see the module doc); whether it found anything. */
  async #pass(user: string, total: ErasureCounts): Promise<boolean> {
    const base = this.#k.base(user);
    const named = await this.#grants(user);
    await this.#unname(named.map((f) => f.rec));
    const byOwner = new Map<string, Found[]>();
    for (const f of named) {
      if (f.base !== base) byOwner.set(f.base, [...byOwner.get(f.base) ?? [], f]);
    }
    for (const [owner, found] of byOwner) total.grants += await this.#drop(owner, found);
    const own = await this.#own(user);
    for (let i = 0; i < own.length; i += BATCH) {
      const reply = await this.#conn.run(E.own, own.slice(i, i + BATCH), [base], () => true) as [
        number,
        number,
        ...string[],
      ];
      total.handles += Number(reply[0]);
      total.grants += Number(reply[1]);
      await this.#unname(reply.slice(2).map((j) => JSON.parse(j as string) as GrantRecord));
    }
    return named.length > 0 || own.length > 0;
  }

  /**
   * Deletes every grant ended or expired at or before `before` (with the
   * re-shares under it, which ended or expired no later), as a pass of an
   * erase deletes grants of other owners: their look-ups by name first,
   * then one `ERASE_GRANTS` per owner (see `GrantPrimitives.sweep`).
   *
   * @param before Epoch ms.
   * @returns How many grants went.
   */
  async sweepGrants(before: number): Promise<number> {
    const stale = (await this.#all()).filter((f) => grantStale(f.rec, before));
    await this.#unname(stale.map((f) => f.rec));
    const byOwner = new Map<string, Found[]>();
    for (const f of stale) byOwner.set(f.base, [...byOwner.get(f.base) ?? [], f]);
    let gone = 0;
    for (const [owner, found] of byOwner) gone += await this.#drop(owner, found);
    return gone;
  }

  /**
   * One `ERASE_GRANTS` in the slot of `owner` (its key prefix): removes
   * `found` and the re-shares under them, then their look-ups by name.
   * Answers how many went.
   */
  async #drop(owner: string, found: Found[]): Promise<number> {
    const args = [owner];
    for (const f of found) {
      args.push(f.enc, this.#k.grantsOf(f.rec.owner, f.rec.handle));
      args.push(f.rec.parent === null ? "" : encodeHandle(f.rec.parent));
    }
    const keys = found.map((f) => `${owner}g:${f.enc}`);
    const gone = await this.#conn.run(E.grants, keys, args, () => true) as string[];
    await this.#unname(gone.map((j) => JSON.parse(j) as GrantRecord));
    return gone.length;
  }

  /** Every key of `user`, on every node. */
  #own(user: string): Promise<string[]> {
    const pattern = this.#k.base(user).replace(/[*?[\]\\]/g, "\\$&") + "*";
    return this.#conn.scanKeys(pattern);
  }

  /**
   * Every grant an erase of `user` removes: owned by, made to or made by the
   * user, and every re-share under those, from a scan of every grant hash.
   */
  async #grants(user: string): Promise<Found[]> {
    const all = await this.#all();
    const hit = new Set<string>();
    const id = (base: string, enc: string) => base + enc;
    for (const f of all) {
      const r = f.rec;
      if (r.owner === user || r.to === user || r.by === user) hit.add(id(f.base, f.enc));
    }
    for (let grew = true; grew;) {
      grew = false;
      for (const f of all) {
        const p = f.rec.parent;
        if (p === null || hit.has(id(f.base, f.enc))) continue;
        if (hit.has(id(f.base, encodeHandle(p)))) {
          hit.add(id(f.base, f.enc));
          grew = true;
        }
      }
    }
    return all.filter((f) => hit.has(id(f.base, f.enc)));
  }

  /** Every grant hash, on every node, with its record (its end from the hash's `e`). */
  async #all(): Promise<Found[]> {
    const keys = (await this.#conn.scanKeys(this.#k.pattern("g:*"))).sort();
    const all: Found[] = [];
    const c = this.#conn.client;
    for (let i = 0; i < keys.length; i += BATCH) {
      const batch = keys.slice(i, i + BATCH);
      const got = await this.#conn.cmd(() =>
        Promise.all(batch.map((key) => c.hmget(key, "j", "e")))
      );
      batch.forEach((key, n) => {
        const m = this.#grantKey.exec(key), [j, e] = got[n]!;
        if (!m || !j) return;
        const rec = { ...JSON.parse(j) as GrantRecord, endedAt: e ? Number(e) : null };
        all.push({ base: m[1]!, enc: m[2]!, rec });
      });
    }
    return all;
  }

  /** Drops the look-ups by name of `grants`: by alias, by id, in the grantee's list. */
  async #unname(grants: GrantRecord[]): Promise<void> {
    if (grants.length === 0) return;
    const c = this.#conn.client;
    await this.#conn.cmd(() =>
      Promise.all(grants.flatMap((g) => [
        c.del(this.#k.grantName("ga", g.alias)),
        c.del(this.#k.grantName("gi", g.grant)),
        ...g.to === "*"
          ? []
          : [c.lrem(this.#k.grantsTo(g.to), 0, JSON.stringify([g.owner, g.grant]))],
      ]))
    );
  }
}
