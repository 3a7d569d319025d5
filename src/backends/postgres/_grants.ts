/**
 * Grants on PostgreSQL (sharing): a `grants` table, one row per grant.
 *
 * A write through a grant locks the grant's row `FOR NO KEY UPDATE` inside
 * the write's own transaction, right after the record's row, and keeps that
 * lock until it commits; `unshare` ends the grant and its re-shares with one
 * `UPDATE`, which needs the same lock. So an `unshare` waits for the write
 * that holds the grant, and a write that comes later (or waited for the
 * `unshare`) reads the ended row (READ COMMITTED re-reads a row it waited
 * for) and writes nothing: once `unshare` returned, no write through the
 * grant lands. The lock is exclusive, not `FOR SHARE`: shared lockers coming
 * one after another could starve the `UPDATE` forever, and writes through one
 * grant all write one handle, whose row lock serializes them anyway.
 *
 * Lock order, the same in every transaction, so that none waits for another
 * in a cycle: a user's usage lock (quotas), then the grant locks of handles
 * (advisory, by key: {@link GrantStatements.lock}), then records' rows, then
 * grants' rows. A share, an unshare and a transfer take the grant locks of
 * their handles first, so those of one handle run one at a time; each then
 * writes its changelog entry on the record's row (its version step) before
 * it touches a grant's row. Statements that lock are sent in that order,
 * pipelined on the transaction's connection (the server runs them in the
 * order they arrive).
 *
 * The table is made when absent, independent of the schema number.
 *
 * @module
 */

import { type Pool, type Queryable, Rollback } from "./_pool.ts";
import type { AuditStep, GrantRecord, WriteContext } from "../../backend.ts";
import { grantEnded, grantGone } from "../../grants.ts";
import { GRANT_COLUMNS, grantSchema, grantSql, grantValues } from "../_sql.ts";
import { auditParams, hash32 } from "./_rows.ts";
import type { Statements } from "./_statements.ts";

/** First half of the advisory lock key of one handle's grants ("mcgr"). */
const GRANTS_LOCK_CLASS = 0x6d636772;

/**
 * Creates the `grants` table and its indexes when absent.
 *
 * @param tx The initializing transaction (under the migration lock).
 * @param s The quoted schema name.
 */
export async function prepareGrants(tx: Queryable, s: string): Promise<void> {
  for (const statement of grantSchema(`${s}.grants`, "BIGINT")) await tx.unsafe(statement);
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
  readonly #sql: ReturnType<typeof grantSql>;

  /** @param s The quoted schema name. */
  constructor(s: string) {
    this.#s = s;
    this.#sql = grantSql(`${s}.grants`, (n, type) => `$${n}::${type}`);
  }

  /**
   * Inside a transaction: takes the grant locks of each `(owner, handle)` of
   * `keys` (transaction-scoped advisory locks), always in the same order, by
   * key; the statements are sent at once. Every change of grants (share,
   * unshare, transfer) takes them before any row lock, so the changes of one
   * handle's grants run one at a time.
   *
   * @param tx The transaction.
   * @param keys The handles, as `[owner, handle]`.
   */
  async lock(tx: Queryable, ...keys: [string, string][]): Promise<void> {
    const ids = [...new Set(keys.map((k) => hash32(JSON.stringify(k))))].sort((a, b) => a - b);
    await Promise.all(
      ids.map((id) =>
        tx.unsafe("SELECT pg_advisory_xact_lock($1::int, $2::int)", [GRANTS_LOCK_CLASS, id])
          .execute()
      ),
    );
  }

  /**
   * Inside a write's transaction: locks the grant of `ctx.grant` `FOR NO KEY UPDATE`
   * and throws when it is not in force at `ctx.now`. The statement is sent
   * at once, after those sent before the call.
   *
   * @param tx The transaction.
   * @param ctx The write's context.
   */
  check(tx: Queryable, ctx: WriteContext): Promise<void> {
    const grant = ctx.grant;
    if (!grant) return Promise.resolve();
    return tx.unsafe(
      `SELECT expires_ms, ended_ms FROM ${this.#s}.grants WHERE grant_id = $1 FOR NO KEY UPDATE`,
      [grant.grant],
    ).values().execute().then(([row]) => {
      const reason = grantGone(
        row
          ? {
            expiresAt: row[0] == null ? null : Number(row[0]),
            endedAt: row[1] == null ? null : Number(row[1]),
          } as GrantRecord
          : null,
        ctx.now,
      );
      if (reason) throw grantEnded(grant, reason);
    });
  }

  /**
   * Inside a transaction: stores a grant, after checking (and locking) its
   * parent; the statements are sent at once.
   *
   * @param tx The transaction.
   * @param g The grant.
   * @param now Epoch ms.
   */
  async put(tx: Queryable, g: GrantRecord, now: number): Promise<void> {
    const parent = g.parent === null
      ? undefined
      : this.check(tx, { now, graceMs: 0, grant: { grant: g.parent, alias: g.alias } });
    await Promise.all([parent, tx.unsafe(this.#sql.insert, grantValues(g) as never[]).execute()]);
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
   * One statement, sent at once: ends a grant and every grant under it.
   *
   * @param sql A connection.
   * @param id The grant id.
   * @param now Epoch ms.
   * @returns The grants it ended.
   */
  async end(sql: Queryable, id: string, now: number): Promise<GrantRecord[]> {
    const rows = await sql.unsafe(this.#sql.endTree, [id, now] as never[]).values().execute();
    return rows.map(grantOf);
  }

  /**
   * Inside a transaction: ends every grant of `(owner, handle)` not ended
   * yet; the statement is sent at once.
   *
   * @param tx The transaction.
   * @param owner The owner.
   * @param handle The handle.
   * @param now Epoch ms.
   */
  async endOf(tx: Queryable, owner: string, handle: string, now: number): Promise<void> {
    await tx.unsafe(this.#sql.endOf, [owner, handle, now] as never[]).execute();
  }

  /**
   * The owner and handle of a grant, and whether it has ended.
   *
   * @param sql A connection.
   * @param id The grant id.
   * @returns They, or `null` when there is no such grant.
   */
  async rootOf(
    sql: Queryable,
    id: string,
  ): Promise<{ owner: string; handle: string; ended: boolean } | null> {
    const [row] = await sql.unsafe(
      `SELECT owner, handle, ended_ms IS NOT NULL FROM ${this.#s}.grants WHERE grant_id = $1`,
      [id],
    ).values();
    return row ? { owner: String(row[0]), handle: String(row[1]), ended: row[2] === true } : null;
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
    const rows = await sql.unsafe(this.#sql.of, [owner, handle]).values();
    return rows.map(grantOf);
  }

  /**
   * Deletes every grant ended or expired at or before `before` (the alias
   * is a column of the row).
   *
   * @param sql A connection.
   * @param before Epoch ms.
   * @returns How many went.
   */
  async sweep(sql: Queryable, before: number): Promise<number> {
    const res = await sql.unsafe(this.#sql.sweep, [before] as never[]).execute();
    return res.count;
  }

  /**
   * The grants to a user not ended.
   *
   * @param sql A connection.
   * @param to The grantee.
   * @returns The grants, oldest first.
   */
  async to(sql: Queryable, to: string): Promise<GrantRecord[]> {
    const rows = await sql.unsafe(this.#sql.to, [to]).values();
    return rows.map(grantOf);
  }
}

/** {@inheritDoc GrantPrimitives.put} */
export function putGrant(
  pool: Pool,
  q: Statements,
  g: GrantStatements,
  grant: GrantRecord,
  now: number,
  audit?: AuditStep,
): Promise<void | "absent"> {
  const { owner, handle } = grant;
  return pool.op((sql) =>
    pool.begin(sql, async (tx): Promise<void | "absent"> => {
      const [, stepped] = await Promise.all([
        g.lock(tx, [owner, handle]),
        audit && tx.unsafe(q.audit, auditParams(owner, handle, audit)).execute(),
        g.put(tx, grant, now),
      ]);
      // No live record (deleted or moved since the store looked): nothing stored.
      if (stepped && stepped.count !== 1) throw new Rollback<"absent">("absent");
    })
  );
}

/** {@inheritDoc GrantPrimitives.end} */
export function endGrant(
  pool: Pool,
  q: Statements,
  g: GrantStatements,
  grant: string,
  now: number,
  audit?: AuditStep,
): Promise<GrantRecord[]> {
  return pool.op((sql) =>
    pool.begin(sql, async (tx): Promise<GrantRecord[]> => {
      // A grant's owner and handle never change: read before its lock.
      const root = await g.rootOf(tx, grant);
      if (!root) return [];
      const { owner, handle } = root;
      const [, stepped, ended] = await Promise.all([
        g.lock(tx, [owner, handle]),
        audit && !root.ended &&
        tx.unsafe(q.audit, auditParams(owner, handle, audit)).execute(),
        g.end(tx, grant, now),
      ]);
      // Ended meanwhile by another call: no entry for nothing. (A record
      // deleted, trashed or moved away got none: no live row to step.)
      if (stepped && stepped.count === 1 && ended.length === 0) {
        throw new Rollback<GrantRecord[]>([]);
      }
      return ended;
    })
  );
}
