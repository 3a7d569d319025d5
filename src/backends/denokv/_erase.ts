/**
 * Erase on Deno KV (SPEC 9.1). Under the backend's prefix `P`, a user `u`
 * has `[P, "u", u, …]` (heads, chunks, changelogs, trash, leases, listing
 * index, idempotency records and their results, usage and rate counts),
 * `[P, "n", u]` (its name for `users()`), `[P, "dk", u]` (its wrapped data
 * key, SPEC 9.2: deleting it crypto-shreds what a backup still holds), entries in the sweep indexes
 * `[P, "xh" | "xt" | "xk" | "xw", time, u, …]`, and grants (`_grants.ts`):
 * records `[P, "g", id]` with their alias `[P, "ga", alias]` and index
 * entries `[P, "go", owner, handle, …]`, `[P, "gt", to, …]` and
 * `[P, "gc", parent, id]`. One pass:
 *
 * 1. lists every grant record and keeps those the user owns, those made to
 *    it, those it made, and every re-share under them (from the records'
 *    own fields, no index trusted);
 * 2. deletes those records with their aliases and index entries, so a
 *    write through one fails its versionstamp check and an alias reads as
 *    absent at once;
 * 3. deletes every entry under the user's prefixes and its entries in the
 *    sweep indexes (found by listing each index whole).
 *
 * Deletes go in atomic commits of at most {@link MAX_MUTATIONS} mutations
 * and {@link MAX_BYTES} bytes of keys (Deno KV takes 1,000 and 800 KiB).
 * Passes repeat until one finds nothing (at most {@link MAX_PASSES}). A
 * write of the user commits with a check of its head's (or grant's)
 * versionstamp: one that lands before a pass lists the user is deleted by
 * that pass or the next, one that comes after its head or grant went fails
 * its check. What can land after the last pass is only a creation that
 * needs nothing removed (a mint, an import, a share): ordered after the
 * erase, like one that started after it returned.
 *
 * The sweep of grants ended or expired (`grants.sweep`) deletes its grants
 * the same way: their records, aliases and index entries.
 *
 * @module
 */

import type { ErasureCounts, ErasurePrimitives, GrantRecord } from "../../backend.ts";
import { grantStale } from "../../grants.ts";
import { GrantKeys } from "./_grants.ts";
import type { KvIo } from "./_io.ts";
import { samePart } from "./_keys.ts";

/** Passes an erase makes at most while each finds something (a writer that never stops). */
export const MAX_PASSES = 8;
/** Mutations per commit (Deno KV allows 1,000). */
const MAX_MUTATIONS = 500;
/** Bytes of keys per commit, a rough count (Deno KV allows 819,200 of mutations). */
const MAX_BYTES = 400_000;
/** The sweep indexes, whose keys carry the user at the part after the time. */
const SWEEP_INDEXES = ["xh", "xt", "xk", "xw"] as const;

/** What one listing found: keys to delete and what they count. */
interface Found {
  keys: Deno.KvKey[];
  handles: number;
  grants: number;
}

/** The erasure primitives of the Deno KV backend. */
export class KvErasure implements ErasurePrimitives {
  readonly #db: KvIo;
  readonly #g: GrantKeys;

  /** @param db The backend's KV. */
  constructor(db: KvIo) {
    this.#db = db;
    this.#g = new GrantKeys(db);
  }

  /** {@inheritDoc ErasurePrimitives.count} */
  async count(user: string, _now: number): Promise<ErasureCounts> {
    const [grants, own] = await Promise.all([this.#grants(user), this.#own(user)]);
    return { handles: own.handles, grants: grants.grants };
  }

  /** {@inheritDoc ErasurePrimitives.erase} */
  async erase(user: string, _now: number): Promise<ErasureCounts> {
    const total: ErasureCounts = { handles: 0, grants: 0 };
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const grants = await this.#grants(user);
      await this.#delete(grants.keys);
      const own = await this.#own(user);
      await this.#delete(own.keys);
      total.handles += own.handles;
      total.grants += grants.grants;
      if (grants.keys.length === 0 && own.keys.length === 0) break;
    }
    return total;
  }

  /** The grants an erase of `user` removes, with their aliases and index entries. */
  async #grants(user: string): Promise<Found> {
    const p = this.#db.keys.p;
    const all = await this.#db.range<GrantRecord>({ prefix: [...p, "g"] });
    const hit = new Map<string, GrantRecord>();
    for (const e of all) {
      const g = e.value;
      if (g.owner === user || g.to === user || g.by === user) hit.set(g.grant, g);
    }
    for (let grew = true; grew;) {
      grew = false;
      for (const { value: g } of all) {
        if (g.parent !== null && !hit.has(g.grant) && hit.has(g.parent)) {
          hit.set(g.grant, g);
          grew = true;
        }
      }
    }
    const u = this.#db.keys.user(user);
    // Every index entry the user owns or is the grantee of, whichever grant it names.
    const mine = (key: Deno.KvKey) => samePart(key[p.length + 1]!, u) && key[p.length] !== "gc";
    const keys = await this.#grantKeys(hit, [[...p, "go", u], [...p, "gt", u]], mine);
    return { keys, handles: 0, grants: hit.size };
  }

  /**
   * Deletes every grant ended or expired at or before `before`, with its
   * alias and index entries, as an erase deletes them (see
   * `GrantPrimitives.sweep`).
   *
   * @param before Epoch ms.
   * @returns How many grants went.
   */
  async sweepGrants(before: number): Promise<number> {
    const all = await this.#db.range<GrantRecord>({ prefix: [...this.#db.keys.p, "g"] });
    const hit = new Map<string, GrantRecord>();
    for (const { value: g } of all) if (grantStale(g, before)) hit.set(g.grant, g);
    if (hit.size === 0) return 0;
    await this.#delete(await this.#grantKeys(hit, [], () => false));
    return hit.size;
  }

  /**
   * The keys of the grants `hit`: their records, aliases and index entries
   * (found by listing `lists` and each grant's lists), and the entries of
   * `lists` that `also` keeps.
   */
  async #grantKeys(
    hit: Map<string, GrantRecord>,
    lists: Deno.KvKey[],
    also: (key: Deno.KvKey) => boolean,
  ): Promise<Deno.KvKey[]> {
    const keys: Deno.KvKey[] = [];
    for (const g of hit.values()) {
      keys.push(this.#g.grant(g.grant), this.#g.alias(g.alias), this.#g.children(g.grant));
      lists.push(this.#g.ofHandle(g.owner, g.handle), this.#g.toUser(g.to));
      if (g.parent !== null) lists.push(this.#g.children(g.parent));
    }
    const ids = new Set(hit.keys());
    for (const prefix of dedupe(lists)) {
      for (const e of await this.#db.range({ prefix })) {
        const last = e.key[e.key.length - 1];
        if (also(e.key) || (typeof last === "string" && ids.has(last))) keys.push(e.key);
      }
    }
    // A grant's re-share list as a prefix: every entry under it.
    const gc = [...hit.keys()].map((id) => this.#g.children(id));
    for (const prefix of gc) {
      for (const e of await this.#db.range({ prefix })) keys.push(e.key);
    }
    return dedupe(keys);
  }

  /** Every entry of `user`: its prefixes, its name, its data key, its sweep index entries. */
  async #own(user: string): Promise<Found> {
    const p = this.#db.keys.p, n = p.length;
    const u = this.#db.keys.user(user);
    const keys: Deno.KvKey[] = [];
    let handles = 0;
    for (const e of await this.#db.range({ prefix: [...p, "u", u] })) {
      keys.push(e.key);
      const kind = e.key[n + 2];
      if (e.key.length === n + 4 && (kind === "h" || kind === "t")) handles++;
    }
    const name = await this.#db.get([...p, "n", u]);
    if (name.versionstamp !== null) keys.push(name.key);
    const dataKey = await this.#db.get([...p, "dk", u]);
    if (dataKey.versionstamp !== null) keys.push(dataKey.key);
    for (const x of SWEEP_INDEXES) {
      for (const e of await this.#db.range({ prefix: [...p, x] })) {
        if (samePart(e.key[n + 2]!, u)) keys.push(e.key);
      }
    }
    return { keys, handles, grants: 0 };
  }

  /** Deletes `keys` in atomic commits within Deno KV's limits. */
  async #delete(keys: Deno.KvKey[]): Promise<void> {
    let batch: Deno.KvKey[] = [], bytes = 0;
    const flush = async () => {
      if (batch.length === 0) return;
      const b = batch;
      await this.#db.commit((op) => {
        for (const k of b) op.delete(k);
      });
      batch = [];
      bytes = 0;
    };
    for (const k of keys) {
      const size = keyBytes(k);
      if (batch.length >= MAX_MUTATIONS || bytes + size > MAX_BYTES) await flush();
      batch.push(k);
      bytes += size;
    }
    await flush();
  }
}

/** A generous count of a key's encoded bytes. */
function keyBytes(key: Deno.KvKey): number {
  let n = 0;
  for (const part of key) {
    n += 10 +
      (typeof part === "string"
        ? part.length * 3
        : part instanceof Uint8Array
        ? part.length * 2
        : 16);
  }
  return n;
}

/** `keys` without repeats. */
function dedupe(keys: Deno.KvKey[]): Deno.KvKey[] {
  const seen = new Set<string>();
  return keys.filter((k) => {
    const id = JSON.stringify(
      k,
      (_, v) => v instanceof Uint8Array ? [...v] : typeof v === "bigint" ? `${v}n` : v,
    );
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
