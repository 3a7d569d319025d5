/**
 * Grants on PostgreSQL (sharing): a `grants` table, one row per grant.
 *
 * A write through a grant first locks the grant's row `FOR NO KEY UPDATE`
 * inside the write's own transaction and keeps that lock until it commits;
 * `unshare` ends the grant and its re-shares with one `UPDATE`, which needs
 * the same lock. So an `unshare` waits for the write that holds the grant,
 * and a write that comes later (or waited for the `unshare`) reads the ended
 * row (READ COMMITTED re-reads a row it waited for) and writes nothing: once
 * `unshare` returned, no write through the grant lands. The lock is
 * exclusive, not `FOR SHARE`: shared lockers coming one after another could
 * starve the `UPDATE` forever, and writes through one grant all write one
 * handle, whose row lock serializes them anyway.
 *
 * The table is made when absent, independent of the schema number.
 *
 * @module
 */

import type { Queryable } from "./_pool.ts";
import type { GrantRecord, WriteContext } from "../../backend.ts";
import { grantEnded, grantGone } from "../../grants.ts";
import { GRANT_COLUMNS, grantValues } from "../_sql.ts";

/**
 * Creates the `grants` table and its indexes when absent.
 *
 * @param tx The initializing transaction (under the migration lock).
 * @param s The quoted schema name.
 */
export async function prepareGrants(tx: Queryable, s: string): Promise<void> {
  await tx.unsafe(`CREATE TABLE IF NOT EXISTS ${s}.grants (
    grant_id TEXT PRIMARY KEY,
    alias TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    handle TEXT NOT NULL,
    to_user TEXT NOT NULL,
    rights TEXT NOT NULL,
    by_user TEXT NOT NULL,
    parent TEXT,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT,
    ended_ms BIGINT
  )`);
  await tx.unsafe(`CREATE INDEX IF NOT EXISTS grants_by_handle ON ${s}.grants (owner, handle)`);
  await tx.unsafe(
    `CREATE INDEX IF NOT EXISTS grants_by_grantee ON ${s}.grants (to_user) WHERE ended_ms IS NULL`,
  );
  await tx.unsafe(`CREATE INDEX IF NOT EXISTS grants_by_parent ON ${s}.grants (parent)`);
}

function grantOf(r: readonly unknown[]): GrantRecord {
  const n = (v: unknown) => (v == null ? null : Number(v));
  return {
    grant: r[0] as string,
    alias: r[1] as string,
    owner: r[2] as string,
    handle: r[3] as string,
    to: r[4] as string,
    rights: r[5] as string,
    by: r[6] as string,
    parent: (r[7] ?? null) as string | null,
    createdAt: Number(r[8]),
    expiresAt: n(r[9]),
    endedAt: n(r[10]),
  };
}

/** The grant statements of one schema. */
export class GrantStatements {
  readonly #s: string;

  /** @param s The quoted schema name. */
  constructor(s: string) {
    this.#s = s;
  }

  /**
   * Inside a write's transaction: locks the grant of `ctx.grant` `FOR NO KEY UPDATE`
   * and throws when it is not in force at `ctx.now`.
   *
   * @param tx The transaction.
   * @param ctx The write's context.
   */
  async check(tx: Queryable, ctx: WriteContext): Promise<void> {
    if (!ctx.grant) return;
    const [row] = await tx.unsafe(
      `SELECT expires_ms, ended_ms FROM ${this.#s}.grants WHERE grant_id = $1 FOR NO KEY UPDATE`,
      [ctx.grant.grant],
    ).values();
    const reason = grantGone(
      row
        ? {
          expiresAt: row[0] == null ? null : Number(row[0]),
          endedAt: row[1] == null ? null : Number(row[1]),
        } as GrantRecord
        : null,
      ctx.now,
    );
    if (reason) throw grantEnded(ctx.grant, reason);
  }

  /**
   * Inside a transaction: stores a grant, after checking (and locking) its parent.
   *
   * @param tx The transaction.
   * @param g The grant.
   * @param now Epoch ms.
   */
  async put(tx: Queryable, g: GrantRecord, now: number): Promise<void> {
    if (g.parent !== null) {
      await this.check(tx, { now, graceMs: 0, grant: { grant: g.parent, alias: g.alias } });
    }
    await tx.unsafe(
      `INSERT INTO ${this.#s}.grants (${GRANT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      grantValues(g) as never[],
    );
  }

  /**
   * The grant with this id or alias.
   *
   * @param sql A connection.
   * @param idOrAlias The id or alias.
   * @returns It, or `null`.
   */
  async read(sql: Queryable, idOrAlias: string): Promise<GrantRecord | null> {
    const [row] = await sql.unsafe(
      `SELECT ${GRANT_COLUMNS} FROM ${this.#s}.grants WHERE grant_id = $1 OR alias = $1 LIMIT 1`,
      [idOrAlias],
    ).values();
    return row ? grantOf(row) : null;
  }

  /**
   * One statement: ends a grant and every grant under it.
   *
   * @param sql A connection.
   * @param id The grant id.
   * @param now Epoch ms.
   * @returns The grants it ended.
   */
  async end(sql: Queryable, id: string, now: number): Promise<GrantRecord[]> {
    const rows = await sql.unsafe(
      `WITH RECURSIVE under(id) AS (
         SELECT $1::text UNION SELECT g.grant_id FROM ${this.#s}.grants g JOIN under ON g.parent = under.id)
       UPDATE ${this.#s}.grants SET ended_ms = $2
       WHERE grant_id IN (SELECT id FROM under) AND ended_ms IS NULL RETURNING ${GRANT_COLUMNS}`,
      [id, now] as never[],
    ).values();
    return rows.map(grantOf);
  }

  /**
   * The grants of one handle, ended ones included.
   *
   * @param sql A connection.
   * @param owner The owner.
   * @param handle The handle.
   * @returns The grants, oldest first.
   */
  async of(sql: Queryable, owner: string, handle: string): Promise<GrantRecord[]> {
    const rows = await sql.unsafe(
      `SELECT ${GRANT_COLUMNS} FROM ${this.#s}.grants WHERE owner = $1 AND handle = $2
       ORDER BY created_ms, grant_id`,
      [owner, handle],
    ).values();
    return rows.map(grantOf);
  }

  /**
   * The grants to a user not ended.
   *
   * @param sql A connection.
   * @param to The grantee.
   * @returns The grants, oldest first.
   */
  async to(sql: Queryable, to: string): Promise<GrantRecord[]> {
    const rows = await sql.unsafe(
      `SELECT ${GRANT_COLUMNS} FROM ${this.#s}.grants WHERE to_user = $1 AND ended_ms IS NULL
       ORDER BY created_ms, grant_id`,
      [to],
    ).values();
    return rows.map(grantOf);
  }
}
