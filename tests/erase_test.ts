/**
 * Erase, seen from each engine's own storage (SPEC 9.1): the canary strings
 * of a user (its id, states, kind, writer label, idempotency key) are in the
 * engine's stored values before `erase`, and nowhere after it — but the
 * user's id and its visitor's writer label in other users' changelog
 * entries, which SPEC keeps. SQLite: every cell of every table, the tables
 * enumerated from `sqlite_master` and `pragma_table_info`; PostgreSQL: every
 * column of every table of the backend's schema (`information_schema`).
 * Each engine's list of erased tables is compared with its tables, so a
 * table added to a schema fails here until erasing knows it.
 *
 * The memory backend is not scanned: its maps are private fields of its
 * class, which nothing outside the class can read (the contract group checks
 * through every API that nothing of the user is left there).
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { HandleStore } from "../mod.ts";
import { PostgresBackend } from "../src/backends/postgres.ts";
import { SqliteBackend } from "../src/backends/sqlite.ts";
import { ERASED_TABLES as SQLITE_TABLES } from "../src/backends/sqlite/_erase.ts";
import {
  ERASED_TABLES as POSTGRES_TABLES,
  KEPT_TABLES as POSTGRES_KEPT,
} from "../src/backends/postgres/_erase.ts";
import { FakeClock, withTempDir } from "./_helpers.ts";
import { type EraseScenario, eraseScenario } from "./contract/erase.ts";
import {
  type Cell,
  postgresCells,
  postgresTables,
  sqliteCells,
  sqliteTables,
} from "./_storage_scan.ts";

/** The canaries found in `cells`, as `table.column: canary`. */
function hits(cells: Cell[], canaries: string[]): string[] {
  const out = new Set<string>();
  for (const c of cells) {
    for (const canary of canaries) {
      if (c.text.includes(canary)) out.add(`${c.table}.${c.column}: ${canary}`);
    }
  }
  return [...out].sort();
}

/**
 * Builds the scenario, checks that every canary is stored, erases, and
 * checks that none is, but the user's id and the visitor's label in the
 * changelog (other users' entries).
 */
async function scanAround(
  store: HandleStore,
  clock: FakeClock,
  open: () => Promise<HandleStore>,
  scan: () => Promise<Cell[]>,
): Promise<EraseScenario> {
  const s = await eraseScenario(store, clock, open);
  const before = hits(await scan(), s.canaries);
  for (const canary of s.canaries) {
    assert.ok(before.some((h) => h.endsWith(`: ${canary}`)), `${canary} was never stored`);
  }
  assert.deepEqual(await store.erase(s.user), s.counts);
  const after = hits(await scan(), [...s.canaries, s.visitor]);
  // Changelog entries: the `changes` table, and SQLite's newest entries kept in a record's row.
  const kept = after.filter((h) => /^(changes\.text|handles\.log_tail): /.test(h));
  assert.deepEqual(after, kept, "stored values still hold the erased user's data");
  // There only the user's id and the visitor's label: no state, kind, key or own label.
  assert.ok(
    kept.every((h) => h.endsWith(`: ${s.user}`) || h.endsWith(`: ${s.visitor}`)),
    kept.join(),
  );
  // What stays: the entries the user left in the other's changelog.
  assert.ok(kept.some((h) => h.endsWith(`: ${s.visitor}`)), "the visitor's entry is gone");
  return s;
}

Deno.test("erase: no cell of any SQLite table holds the erased user's canaries", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/erase.db`;
    const clock = new FakeClock();
    const open = async () =>
      new HandleStore(await SqliteBackend.fromUrl(`sqlite:///${path}`), { clock: clock.fn });
    await using store = await open();
    const db = new DatabaseSync(path);
    try {
      await scanAround(store, clock, open, () => Promise.resolve(sqliteCells(db)));
      assert.deepEqual(sqliteTables(db), Object.keys(SQLITE_TABLES).sort());
    } finally {
      db.close();
    }
  });
});

const POSTGRES_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";

Deno.test("erase: no column of any table of the PostgreSQL schema holds the erased user's canaries", async () => {
  const schema = `erase_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const sql = postgres(POSTGRES_URL, { max: 2, onnotice: () => {} });
  const clock = new FakeClock();
  const backends: PostgresBackend[] = [];
  const open = () => {
    const b = new PostgresBackend(sql, { schema });
    backends.push(b);
    return Promise.resolve(new HandleStore(b, { clock: clock.fn }));
  };
  try {
    await using store = await open();
    await scanAround(store, clock, open, () => postgresCells(sql, schema));
    assert.deepEqual(
      (await postgresTables(sql, schema)).sort(),
      [...Object.keys(POSTGRES_TABLES), ...POSTGRES_KEPT].sort(),
    );
  } finally {
    for (const b of backends) await b.close();
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  }
});
