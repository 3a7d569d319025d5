/**
 * What the SQL backends (SQLite, PostgreSQL) share, private to the package:
 * the listing query, built the same way for both, and the grant statements.
 *
 * Their trash still differs, as their stored layouts do: SQLite moves a
 * revoked record to a `trash` table (schema 3), PostgreSQL marks its row with
 * `trashed_until` and lists through a partial index of the live rows (schema
 * 2). Either could take the other's form only through a schema migration of
 * every existing database, for no gain in behaviour, so each keeps its own.
 *
 * @module
 */

import type { GrantRecord, HandleRecord, ListQuery } from "../backend.ts";

/** A page request filters by kind. */
export const LIST_KIND = 1;
/** A page request leaves out expired records. */
export const LIST_LIVE = 2;
/** A page request starts after a cursor. */
export const LIST_AFTER = 4;

/**
 * The filters of a page request: its shape (which filters it uses, as
 * `LIST_*` bits, the key of a prepared listing query) and their values, in
 * the order the listing query takes them from its third parameter on: kind,
 * liveAt, the cursor's `updatedAt` and `handle`.
 *
 * @param q The page request.
 * @returns The shape and the values.
 */
export function listFilters(q: ListQuery): { shape: number; values: (string | number)[] } {
  let shape = 0;
  const values: (string | number)[] = [];
  if (q.kind !== undefined) (shape |= LIST_KIND, values.push(q.kind));
  if (q.liveAt !== undefined) (shape |= LIST_LIVE, values.push(q.liveAt));
  if (q.after !== undefined) (shape |= LIST_AFTER, values.push(q.after.updatedAt, q.after.handle));
  return { shape, values };
}

/** How one engine spells the listing query. */
export interface ListDialect {
  /** `SELECT <metadata columns> FROM <table>` for a shape. */
  from: (shape: number) => string;
  /** The user column. */
  user: string;
  /** The `updatedAt` and `expiresAt` columns. */
  updated: string;
  expires: string;
  /** Conditions every listed row meets besides its user's (`[]`: none). */
  rows: string[];
  /** Parameter `n` (from 1), as a value of `type`. */
  param: (n: number, type: "text" | "bigint" | "int") => string;
}

/**
 * The listing query of one shape: parameter 1 is the user, 2 the limit, then
 * the values {@link listFilters} returns. Rows come newest `updatedAt` first,
 * then by `handle`, the order of the engines' listing indexes.
 *
 * @param shape The `LIST_*` bits.
 * @param d The engine's spelling.
 * @returns The SQL text.
 */
export function listSql(shape: number, d: ListDialect): string {
  const where = [`${d.user} = ${d.param(1, "text")}`, ...d.rows];
  let n = 3;
  if (shape & LIST_KIND) where.push(`kind = ${d.param(n++, "text")}`);
  if (shape & LIST_LIVE) {
    where.push(`(${d.expires} IS NULL OR ${d.expires} > ${d.param(n++, "bigint")})`);
  }
  if (shape & LIST_AFTER) {
    // `updated <= u` bounds the index range; the rest skips the rows of the
    // cursor's own millisecond up to and including the cursor's handle.
    const u = d.param(n++, "bigint"), h = d.param(n++, "text");
    where.push(`${d.updated} <= ${u} AND (${d.updated} < ${u} OR handle > ${h})`);
  }
  return `${d.from(shape)} WHERE ${where.join(" AND ")} ` +
    `ORDER BY ${d.updated} DESC, handle ASC LIMIT ${d.param(2, "int")}`;
}

/** The columns of a `grants` row, in the order {@link grantValues} gives them. */
export const GRANT_COLUMNS =
  "grant_id, alias, owner, handle, to_user, rights, by_user, parent, created_ms, expires_ms, ended_ms";

/**
 * The statements that create the `grants` table `t` and its indexes when
 * absent, the columns in the order of {@link GRANT_COLUMNS}.
 *
 * @param t The table's name, qualified as the engine needs.
 * @param int The engine's 64-bit integer type (`INTEGER`, `BIGINT`).
 * @returns The statements, to run in order.
 */
export function grantSchema(t: string, int: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
      grant_id TEXT PRIMARY KEY,
      alias TEXT NOT NULL UNIQUE,
      owner TEXT NOT NULL,
      handle TEXT NOT NULL,
      to_user TEXT NOT NULL,
      rights TEXT NOT NULL,
      by_user TEXT NOT NULL,
      parent TEXT,
      created_ms ${int} NOT NULL,
      expires_ms ${int},
      ended_ms ${int}
    )`,
    `CREATE INDEX IF NOT EXISTS grants_by_handle ON ${t} (owner, handle)`,
    `CREATE INDEX IF NOT EXISTS grants_by_grantee ON ${t} (to_user) WHERE ended_ms IS NULL`,
    `CREATE INDEX IF NOT EXISTS grants_by_parent ON ${t} (parent)`,
    // For the sweep of grants ended or expired (`grants.sweep`).
    `CREATE INDEX IF NOT EXISTS grants_by_end ON ${t} (ended_ms) WHERE ended_ms IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS grants_by_expiry ON ${t} (expires_ms) WHERE expires_ms IS NOT NULL`,
  ];
}

/** A grant's values in the order of {@link GRANT_COLUMNS}, for an `INSERT`. */
export function grantValues(g: GrantRecord): (string | number | null)[] {
  return [
    g.grant,
    g.alias,
    g.owner,
    g.handle,
    g.to,
    g.rights,
    g.by,
    g.parent,
    g.createdAt,
    g.expiresAt,
    g.endedAt,
  ];
}

/**
 * The grant statements both engines run as they are, on the `grants` table
 * `t` (the same columns on both), with parameters spelled by `p`.
 *
 * @param t The table, qualified as the engine needs.
 * @param p The engine's parameters.
 * @returns The SQL texts.
 */
export function grantSql(t: string, p: ListDialect["param"]): {
  /** Stores a grant: {@link grantValues} as parameters 1 to 11. */
  insert: string;
  /** Ends grant 1 and every grant under it not ended yet at 2; returns them. */
  endTree: string;
  /** Ends every grant of owner 1's handle 2 not ended yet at 3 (a transfer). */
  endOf: string;
  /** The grants of owner 1's handle 2, ended ones included, oldest first. */
  of: string;
  /** The grants to user 1 not ended, oldest first. */
  to: string;
  /** Deletes every grant ended or expired at or before 1. */
  sweep: string;
} {
  const values = GRANT_COLUMNS.split(", ").map((c, i) =>
    p(i + 1, c.endsWith("_ms") ? "bigint" : "text")
  );
  return {
    insert: `INSERT INTO ${t} (${GRANT_COLUMNS}) VALUES (${values.join(", ")})`,
    endTree: `WITH RECURSIVE under(id) AS (SELECT ${p(1, "text")} UNION ` +
      `SELECT g.grant_id FROM ${t} g JOIN under ON g.parent = under.id) ` +
      `UPDATE ${t} SET ended_ms = ${p(2, "bigint")} ` +
      `WHERE grant_id IN (SELECT id FROM under) AND ended_ms IS NULL RETURNING ${GRANT_COLUMNS}`,
    endOf: `UPDATE ${t} SET ended_ms = ${p(3, "bigint")} ` +
      `WHERE owner = ${p(1, "text")} AND handle = ${p(2, "text")} AND ended_ms IS NULL`,
    of: `SELECT ${GRANT_COLUMNS} FROM ${t} WHERE owner = ${p(1, "text")} ` +
      `AND handle = ${p(2, "text")} ORDER BY created_ms, grant_id`,
    to: `SELECT ${GRANT_COLUMNS} FROM ${t} WHERE to_user = ${p(1, "text")} ` +
      "AND ended_ms IS NULL ORDER BY created_ms, grant_id",
    sweep: `DELETE FROM ${t} WHERE ended_ms <= ${p(1, "bigint")} ` +
      `OR expires_ms <= ${p(1, "bigint")}`,
  };
}

/**
 * A record's columns from `kind` to `lastWriter`, in the order both SQL
 * engines store them.
 *
 * @param r The record.
 * @returns The values.
 */
export function recordCells(
  r: HandleRecord,
): [string, string, number, number, number, number | null, string | null] {
  return [r.kind, r.state, r.version, r.createdAt, r.updatedAt, r.expiresAt, r.lastWriter];
}

/** A record's fork point as its column holds it (JSON text), or `null`. */
export function forkedFromText(r: Pick<HandleRecord, "forkedFrom">): string | null {
  const f = r.forkedFrom;
  return f == null ? null : JSON.stringify({ handle: f.handle, version: f.version });
}
