/**
 * Each engine's own storage, read whole and as text, for the tests (and the
 * gauntlet) that look for what must or must not be stored there: erase
 * (nothing of an erased user), encryption at rest (no plaintext of a state).
 *
 * - SQLite: every cell of every table (tables from `sqlite_master`, columns
 *   from `pragma_table_info`);
 * - PostgreSQL: every column of every table of a schema, as `::text`;
 * - Deno KV: every entry of the file, key and value;
 * - Redis: `dumpRedis` in `_redis.ts`, beside the server it reads.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import type { Sql } from "postgres";

/** One stored item of the engine, as text: where (a key) and what (its value). */
export interface Stored {
  /** The key, as text. */
  where: string;
  /** The value, as text. */
  what: string;
}

/** One stored cell of a SQL table: where it is and its text. */
export interface Cell {
  table: string;
  column: string;
  text: string;
}

/** The table names of an SQLite database, sorted (SQLite's own left out). */
export function sqliteTables(db: DatabaseSync): string[] {
  return db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
    .map((r) => String(r.name)).filter((n) => !n.startsWith("sqlite_"));
}

/** Every cell of every table of an open SQLite database. */
export function sqliteCells(db: DatabaseSync): Cell[] {
  const cells: Cell[] = [];
  for (const table of sqliteTables(db)) {
    const columns = db.prepare("SELECT name FROM pragma_table_info(?)").all(table)
      .map((r) => String(r.name));
    for (const row of db.prepare(`SELECT * FROM "${table}"`).all()) {
      for (const column of columns) {
        const v = row[column];
        const text = v instanceof Uint8Array ? new TextDecoder().decode(v) : String(v);
        cells.push({ table, column, text });
      }
    }
  }
  return cells;
}

/** Every cell of every table of the SQLite file at `path` (opened and closed here). */
export function sqliteFileCells(path: string): Cell[] {
  const db = new DatabaseSync(path);
  try {
    return sqliteCells(db);
  } finally {
    db.close();
  }
}

/** The table names of a PostgreSQL schema, sorted. */
export async function postgresTables(sql: Sql, schema: string): Promise<string[]> {
  return (await sql`SELECT table_name FROM information_schema.tables
    WHERE table_schema = ${schema} ORDER BY table_name`).map((r) => String(r.table_name));
}

/** Every column of every row of every table of a PostgreSQL schema, as text. */
export async function postgresCells(sql: Sql, schema: string): Promise<Cell[]> {
  const cells: Cell[] = [];
  for (const table of await postgresTables(sql, schema)) {
    const columns = (await sql`SELECT column_name FROM information_schema.columns
      WHERE table_schema = ${schema} AND table_name = ${table}`).map((r) => String(r.column_name));
    const rows = await sql.unsafe(
      `SELECT ${columns.map((c) => `"${c}"::text`).join(", ")} FROM "${schema}"."${table}"`,
    ).values();
    for (const row of rows) {
      row.forEach((v, i) => cells.push({ table, column: columns[i]!, text: String(v) }));
    }
  }
  return cells;
}

/** Every entry of the Deno KV file `file`, as text. */
export async function kvDump(file: string): Promise<Stored[]> {
  const kv = await Deno.openKv(file);
  try {
    const out: Stored[] = [];
    const text = (v: unknown) =>
      JSON.stringify(
        v,
        (_, x) =>
          x instanceof Uint8Array
            ? new TextDecoder().decode(x)
            : typeof x === "bigint"
            ? String(x)
            : x,
      );
    for await (const e of kv.list({ prefix: [] })) {
      out.push({ where: text(e.key), what: text(e.value) });
    }
    return out;
  } finally {
    kv.close();
  }
}
