/**
 * Grants on SQLite (sharing): a `grants` table, one row per grant, keyed by
 * its id, with a unique alias. A write through a grant reads the grant's row
 * inside the write's own `BEGIN IMMEDIATE` transaction (SQLite runs one
 * writer at a time across connections and processes), and `unshare` ends a
 * grant and its re-shares in one statement of another such transaction: a
 * write either committed before the `unshare` did, or sees the grant ended
 * and writes nothing.
 *
 * A share, an unshare and a transfer leave their changelog entry in their own
 * transaction: the record's version step (`bump`, a conditional `UPDATE` of
 * its version and `updatedAt`) and the entry, appended and trimmed as every
 * write's is.
 *
 * The table and its indexes are created when absent; the schema version is
 * not changed (older versions of mcpstate ignore the table).
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { AuditStep, GrantRecord, WriteContext } from "../../backend.ts";
import { grantEnded, grantGone } from "../../grants.ts";
import { GRANT_COLUMNS, grantSchema, grantSql, grantValues } from "../_sql.ts";

/**
 * Creates the `grants` table and its indexes when absent.
 *
 * @param db An open connection whose schema is prepared.
 */
export function prepareGrants(db: DatabaseSync): void {
  // The newest index: a file made before it has the table without it.
  const present = db.prepare(
    "SELECT 1 AS x FROM sqlite_master WHERE type = 'index' AND name = 'grants_by_expiry'",
  ).get();
  if (present) return;
  db.exec(grantSchema("grants", "INTEGER").join(";\n"));
}

type Row = Record<string, unknown>;

function grantOf(r: Row): GrantRecord {
  return {
    grant: r.grant_id as string,
    alias: r.alias as string,
    owner: r.owner as string,
    handle: r.handle as string,
    to: r.to_user as string,
    rights: r.rights as string,
    by: r.by_user as string,
    parent: (r.parent ?? null) as string | null,
    createdAt: r.created_ms as number,
    expiresAt: (r.expires_ms ?? null) as number | null,
    endedAt: (r.ended_ms ?? null) as number | null,
  };
}

/** The grant statements of one connection. */
export class GrantStatements {
  readonly #byId: StatementSync;
  readonly #byIdOrAlias: StatementSync;
  readonly #insert: StatementSync;
  readonly #end: StatementSync;
  readonly #endOf: StatementSync;
  readonly #of: StatementSync;
  readonly #to: StatementSync;
  readonly #sweep: StatementSync;
  readonly #audit: StatementSync;

  /** @param db An open connection with the `grants` table. */
  constructor(db: DatabaseSync) {
    const sql = grantSql("grants", (n) => `?${n}`);
    this.#byId = db.prepare("SELECT ended_ms, expires_ms FROM grants WHERE grant_id = ?");
    this.#byIdOrAlias = db.prepare(
      `SELECT ${GRANT_COLUMNS} FROM grants WHERE grant_id = ?1 UNION ALL ` +
        `SELECT ${GRANT_COLUMNS} FROM grants WHERE alias = ?1 LIMIT 1`,
    );
    this.#insert = db.prepare(sql.insert);
    this.#end = db.prepare(sql.endTree);
    this.#endOf = db.prepare(sql.endOf);
    this.#of = db.prepare(sql.of);
    this.#to = db.prepare(sql.to);
    this.#sweep = db.prepare(sql.sweep);
    // The version step of an audit entry: the record's next version, its state kept.
    this.#audit = db.prepare(
      "UPDATE handles SET version = version + 1, updated_ms = ?3 " +
        "WHERE user = ?1 AND handle = ?2 RETURNING version",
    );
  }

  /**
   * Inside a write's transaction: throws when the grant of `ctx.grant` is not
   * in force at `ctx.now`.
   *
   * @param ctx The write's context.
   */
  check(ctx: WriteContext): void {
    if (!ctx.grant) return;
    const r = this.#byId.get(ctx.grant.grant) as Row | undefined;
    const reason = grantGone(
      r ? { expiresAt: r.expires_ms ?? null, endedAt: r.ended_ms ?? null } as GrantRecord : null,
      ctx.now,
    );
    if (reason) throw grantEnded(ctx.grant, reason);
  }

  /**
   * Inside a transaction: throws when the parent of `g`, if it has one, is
   * not in force at `now`.
   *
   * @param g The grant about to be stored.
   * @param now Epoch ms.
   */
  checkParent(g: GrantRecord, now: number): void {
    if (g.parent !== null) {
      this.check({ now, graceMs: 0, grant: { grant: g.parent, alias: g.alias } });
    }
  }

  /**
   * Inside a transaction: stores a grant, as it is.
   *
   * @param g The grant.
   */
  insert(g: GrantRecord): void {
    this.#insert.run(...grantValues(g));
  }

  /**
   * Inside a transaction: the version step of `audit` on `(user, handle)`
   * (its next version and `updatedAt`, the rest kept); the caller appends
   * the entry.
   *
   * @param user The owner.
   * @param handle The handle.
   * @param audit The step.
   * @returns The record's new version, or `null` when there is no such record (nothing changed).
   */
  bump(user: string, handle: string, audit: AuditStep): number | null {
    const row = this.#audit.get(user, handle, audit.at) as { version: number } | undefined;
    return row ? Number(row.version) : null;
  }

  /**
   * The grant with this id or alias.
   *
   * @param idOrAlias The id or alias.
   * @returns It, or `null`.
   */
  read(idOrAlias: string): GrantRecord | null {
    const r = this.#byIdOrAlias.get(idOrAlias) as Row | undefined;
    return r ? grantOf(r) : null;
  }

  /**
   * Inside a transaction: ends a grant and every grant under it.
   *
   * @param id The grant id.
   * @param now Epoch ms.
   * @returns The grants it ended.
   */
  end(id: string, now: number): GrantRecord[] {
    return (this.#end.all(id, now) as Row[]).map(grantOf);
  }

  /**
   * Inside a transaction: ends every grant of `(owner, handle)` not ended yet.
   *
   * @param owner The owner.
   * @param handle The handle.
   * @param now Epoch ms.
   */
  endOf(owner: string, handle: string, now: number): void {
    this.#endOf.run(owner, handle, now);
  }

  /**
   * The grants of one handle, ended ones included.
   *
   * @param owner The owner.
   * @param handle The handle.
   * @returns The grants, oldest first.
   */
  of(owner: string, handle: string): GrantRecord[] {
    return (this.#of.all(owner, handle) as Row[]).map(grantOf);
  }

  /**
   * The grants to a user not ended.
   *
   * @param to The grantee.
   * @returns The grants, oldest first.
   */
  to(to: string): GrantRecord[] {
    return (this.#to.all(to) as Row[]).map(grantOf);
  }

  /**
   * Inside a transaction: deletes every grant ended or expired at or before
   * `before` (the alias is a column of the row).
   *
   * @param before Epoch ms.
   * @returns How many went.
   */
  sweep(before: number): number {
    return Number(this.#sweep.run(before).changes);
  }
}
