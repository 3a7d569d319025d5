/**
 * Grants on Redis (sharing). Every key a grant's check or cascade reads is
 * in its owner's hash slot (the `{owner}` tag), so the one script that writes
 * the owner's record checks the grant, and one script ends a grant and all
 * its re-shares, on a Redis Cluster too:
 *
 * - `P{O}:g:G` — hash of grant `G`: `j` its record (JSON), `e` when it was
 *   ended (`""` while in force), `x` its expiry (`""`: never);
 * - `P{O}:go:H` — list of the grants of handle `H`, oldest first;
 * - `P{O}:gc:G` — list of the re-shares of `G`.
 *
 * The look-ups by name live in other slots and are written before the
 * grant's script (so a crash in between leaves an entry naming no grant,
 * which reads as none):
 *
 * - `Pga:A` and `Pgi:G` — the owner and id of the grant of alias `A` / of id
 *   `G`, each in its own slot (`readGrant` reads one, then the owner's slot);
 * - `P{T}:gt` — list of the grants to user `T` (owner and id), in the
 *   grantee's slot.
 *
 * @module
 */

import type { AuditStep, GrantRecord } from "../../backend.ts";
import { grantEnded } from "../../grants.ts";
import type { GrantEndReason } from "../../errors.ts";
import { auditArgs, encodeHandle } from "./_codec.ts";
import type { Connection } from "./_connection.ts";
import type { KeySpace } from "./_keys.ts";
import { S } from "./_scripts.ts";

/** The grant primitives of the Redis backend. */
export class RedisGrants {
  readonly #conn: Connection;
  readonly #k: KeySpace;

  /**
   * @param conn The backend's connection.
   * @param keys Its key names.
   */
  constructor(conn: Connection, keys: KeySpace) {
    this.#conn = conn;
    this.#k = keys;
  }

  /**
   * Writes the look-ups by name of grant `g` (by id, by alias, in the
   * grantee's list) before the script that stores it; `unname` takes them
   * back when that script refused.
   */
  async name(g: GrantRecord): Promise<{ unname(): Promise<void> }> {
    const c = this.#conn.client;
    const name = JSON.stringify([g.owner, g.grant]);
    const ga = this.#k.grantName("ga", g.alias), gi = this.#k.grantName("gi", g.grant);
    const gt = g.to === "*" ? null : this.#k.grantsTo(g.to);
    await this.#conn.cmd(async () => {
      await c.set(gi, name);
      await c.set(ga, name);
      if (gt) await c.rpush(gt, name);
    });
    return {
      unname: () =>
        this.#conn.cmd(async () => {
          await c.del(gi);
          await c.del(ga);
          if (gt) await c.lrem(gt, 0, name);
        }),
    };
  }

  /** {@inheritDoc GrantPrimitives.put} */
  async put(grant: GrantRecord, now: number, audit?: AuditStep): Promise<void | "absent"> {
    const g = { ...grant, endedAt: null };
    const names = await this.name(g);
    const k = this.#k.of(g.owner, g.handle);
    const keys = [this.#k.grant(g.owner, g.grant), this.#k.grantsOf(g.owner, g.handle)];
    keys.push(k.rec, k.idx, k.exp);
    if (g.parent !== null) {
      keys.push(this.#k.grant(g.owner, g.parent), this.#k.children(g.owner, g.parent));
    }
    const reply = await this.#conn.run(S.grantPut, keys, [
      JSON.stringify(g),
      g.expiresAt === null ? "" : String(g.expiresAt),
      String(now),
      encodeHandle(g.grant),
      ...auditArgs(audit, k.enc),
    ], (r) => r === 1);
    if (reply === 1 || reply === 0) return;
    await names.unname();
    if (reply === -1) return "absent";
    throw grantEnded(
      { grant: g.parent!, alias: g.alias },
      (reply as string[])[1] as GrantEndReason,
    );
  }

  /** {@inheritDoc GrantPrimitives.read} */
  async read(idOrAlias: string): Promise<GrantRecord | null> {
    const c = this.#conn.client;
    const [byId, byAlias] = await this.#conn.cmd(() =>
      Promise.all([
        c.get(this.#k.grantName("gi", idOrAlias)),
        c.get(this.#k.grantName("ga", idOrAlias)),
      ])
    );
    const name = byId ?? byAlias;
    if (name === null) return null;
    const [owner, id] = JSON.parse(name) as [string, string];
    return (await this.#records(owner, [id]))[0] ?? null;
  }

  /** {@inheritDoc GrantPrimitives.end} */
  async end(grant: string, now: number, audit?: AuditStep): Promise<GrantRecord[]> {
    const g = await this.read(grant);
    if (!g || g.grant !== grant) return [];
    const k = this.#k.of(g.owner, g.handle);
    const reply = await this.#conn.run(
      S.grantEnd,
      [this.#k.grant(g.owner, grant), k.rec, k.idx, k.exp],
      [String(now), k.base, encodeHandle(grant), ...auditArgs(audit, k.enc)],
      (r) => Array.isArray(r) && r.length > 0,
    ) as string[];
    return reply.map((j) => ({ ...JSON.parse(j) as GrantRecord, endedAt: now }));
  }

  /** {@inheritDoc GrantPrimitives.of} */
  async of(owner: string, handle: string): Promise<GrantRecord[]> {
    const reply = await this.#conn.run(
      S.grantRead,
      [this.#k.grantsOf(owner, handle)],
      ["L", this.#k.base(owner)],
    ) as (string | null)[];
    return recordsOf(reply);
  }

  /** {@inheritDoc GrantPrimitives.to} */
  async to(to: string): Promise<GrantRecord[]> {
    const names = await this.#conn.cmd(() => this.#conn.client.lrange(this.#k.grantsTo(to), 0, -1));
    const byOwner = new Map<string, string[]>();
    for (const n of new Set(names)) {
      const [owner, id] = JSON.parse(n) as [string, string];
      byOwner.set(owner, [...byOwner.get(owner) ?? [], id]);
    }
    const found = new Map<string, GrantRecord>();
    for (const [owner, ids] of byOwner) {
      for (const g of await this.#records(owner, ids)) found.set(g.grant, g);
    }
    // In the order they were made (the list's), once each.
    return [...new Set(names)].flatMap((n) => {
      const g = found.get((JSON.parse(n) as [string, string])[1]);
      return g && g.to === to && g.endedAt === null ? [g] : [];
    });
  }

  /** The grants `ids` of `owner` that exist, in that order. */
  async #records(owner: string, ids: string[]): Promise<GrantRecord[]> {
    if (ids.length === 0) return [];
    const reply = await this.#conn.run(
      S.grantRead,
      ids.map((id) => this.#k.grant(owner, id)),
      [""],
    ) as (string | null)[];
    return recordsOf(reply);
  }
}

/** The records of a `GRANT_READ` reply (record, end, record, end, …). */
function recordsOf(reply: (string | null)[]): GrantRecord[] {
  const out: GrantRecord[] = [];
  for (let i = 0; i < reply.length; i += 2) {
    const j = reply[i];
    if (!j) continue;
    const e = reply[i + 1];
    out.push({ ...JSON.parse(j) as GrantRecord, endedAt: e ? Number(e) : null });
  }
  return out;
}
