/**
 * Schema 7 on files written by earlier releases' own code (the 0.4.0
 * release's schema 4 and the previous release's schema 6, kept as fixtures
 * by tests/fixtures/old_sqlite.ts): migrated in place in one transaction,
 * once even when several processes open the file at the same moment, and
 * every row, version, TTL, writer, preview, lineage, changelog entry, trash
 * row and lease reads back as the release that wrote it read it.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { HandleStore } from "../mod.ts";
import { SQLITE_SCHEMA_VERSION } from "../src/backends/sqlite.ts";
import { createAtOnce } from "./contract/cross_process.ts";
import {
  type OldSqliteFixture,
  readOldStore,
  rowsOf,
  writeOldSqlite,
} from "./fixtures/old_sqlite.ts";

const dir = await Deno.makeTempDir({ prefix: "mcpstate-sqlite-migrate-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
let files = 0;

const FIXTURES: Record<string, OldSqliteFixture> = {
  "schema 4 (the 0.4.0 release)": JSON.parse(
    Deno.readTextFileSync(new URL("./fixtures/sqlite_v4.json", import.meta.url)),
  ),
  "schema 6 (the previous release)": JSON.parse(
    Deno.readTextFileSync(new URL("./fixtures/sqlite_v6.json", import.meta.url)),
  ),
};

/** The fixture's file, rebuilt at a fresh path. */
function oldFile(f: OldSqliteFixture): string {
  const path = `${dir}/old-${++files}.db`;
  writeOldSqlite(path, f);
  return path;
}

const open = (path: string, f: OldSqliteFixture) =>
  HandleStore.fromUrl(`sqlite:///${path}`, {
    clock: () => f.now,
    reclaimIntervalMs: 0,
    trashDays: 30,
  });

function pragma(path: string, name: string): unknown {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Object.values(db.prepare(`PRAGMA ${name}`).get()!)[0];
  } finally {
    db.close();
  }
}

/** Every row of the fixture's tables, reduced to the columns it had, keyed and sorted. */
function oldColumnsOf(
  rows: OldSqliteFixture["rows"],
  like: OldSqliteFixture["rows"],
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [table, [columns]] of Object.entries(like)) {
    const [have, values] = rows[table]!;
    out[table] = values.map((row) => JSON.stringify(columns.map((c) => [c, row[have.indexOf(c)]])))
      .sort();
  }
  return out;
}

/** The columns of a table of the file at `path`, in order. */
function columnsOf(path: string, table: string): string[] {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare("SELECT name FROM pragma_table_info(?)").all(table)
      .map((r) => r.name as string);
  } finally {
    db.close();
  }
}

/** A user's reads as `readOldStore` gives them. */
interface OldReads {
  list: { handle: string; forkedFrom?: unknown }[];
  handles: Record<string, { snapshot?: { forkedFrom?: unknown } }>;
}

/**
 * The releases' listings left a fork's `forkedFrom` out (fixed since): a
 * listing here carries the lineage its record has, which the test checks
 * and then drops, so the rest compares with what the release answered.
 */
function forkedFromListed(reads: OldReads): void {
  for (const entry of reads.list) {
    assert.deepEqual(entry.forkedFrom, reads.handles[entry.handle]?.snapshot?.forkedFrom);
    delete entry.forkedFrom;
  }
}

for (const [name, f] of Object.entries(FIXTURES)) {
  Deno.test(`sqlite: a ${name} file migrates in place and reads back unchanged`, async () => {
    const path = oldFile(f);
    assert.equal(pragma(path, "user_version"), f.userVersion);
    const store = await open(path, f);
    assert.equal(pragma(path, "user_version"), SQLITE_SCHEMA_VERSION);
    assert.equal(pragma(path, "integrity_check"), "ok");
    // Every column of every row the release wrote is there, unchanged (usage is recounted).
    const { usage: _, ...kept } = f.rows;
    assert.deepEqual(oldColumnsOf(rowsOf(path), kept), oldColumnsOf(f.rows, kept));
    // The state comes last: nothing is stored behind it.
    for (const table of ["handles", "trash"]) assert.equal(columnsOf(path, table).at(-1), "state");
    assert.equal(columnsOf(path, "idempotency").at(-1), "result");
    // What the release answered, the store answers: listings with previews, leases,
    // grants, reads, changelogs, the trash.
    const reads = await readOldStore(store) as Record<string, { trash: unknown }>;
    for (const [user, expected] of Object.entries(f.reads as typeof reads)) {
      const got = reads[user]!;
      // The 0.4.0 release lists no trash: its trashed row is checked below.
      if (expected.trash === null) got.trash = null;
      forkedFromListed(got as unknown as OldReads);
      assert.deepEqual(got, expected, user);
    }
    // A kept result names its handle (a delete's keeps none); the trashed record restores.
    const db = new DatabaseSync(path, { readOnly: true });
    const idem = db.prepare("SELECT key, handle, result FROM idempotency ORDER BY key").all();
    db.close();
    for (const r of idem) {
      const h = r.result === null ? null : (JSON.parse(r.result as string) as { handle: string });
      assert.equal(r.handle, h?.handle ?? null, String(r.key));
    }
    assert.equal(idem.length, 3);
    const trashed = f.rows.trash![1][0]!;
    const trashedHandle = trashed[f.rows.trash![0].indexOf("handle")] as string;
    const restored = await store.restore(trashedHandle, { user: "alice" });
    assert.deepEqual(restored.state, { bye: true });
    // New kept results name their handle: a mint's the new one, a delete's the deleted one.
    const minted = await store.mint("notes", {}, { user: "alice", idempotencyKey: "new-mint" });
    await store.revoke(trashedHandle, { user: "alice", idempotencyKey: "new-revoke" });
    await store.close();
    const after = new DatabaseSync(path, { readOnly: true });
    const handleOf = (key: string) =>
      after.prepare("SELECT handle FROM idempotency WHERE key = ?").get(key)?.handle;
    assert.deepEqual([handleOf("new-mint"), handleOf("new-revoke")], [minted, trashedHandle]);
    after.close();
    // Opening it again changes nothing.
    const cookie = pragma(path, "schema_version");
    await (await open(path, f)).close();
    assert.equal(pragma(path, "schema_version"), cookie);
    assert.equal(pragma(path, "integrity_check"), "ok");
  });

  Deno.test(`sqlite: processes opening a ${name} file at the same moment migrate it once`, async () => {
    // The schema cookie after one process's migration: a second one would change it again.
    const alone = oldFile(f);
    await (await open(alone, f)).close();
    const racing = oldFile(f);
    await createAtOnce([`sqlite:///${racing}`], 0);
    assert.equal(pragma(racing, "schema_version"), pragma(alone, "schema_version"));
    assert.equal(pragma(racing, "integrity_check"), "ok");
    const { usage: _, ...kept } = f.rows;
    const rows = rowsOf(racing);
    // The old rows, and the three mints of the racing processes.
    const handles = rows.handles![1];
    assert.equal(handles.length, f.rows.handles![1].length + 3);
    const minted = rows.handles![0].indexOf("kind");
    rows.handles![1] = handles.filter((r) => r[minted] !== "race");
    assert.deepEqual(oldColumnsOf(rows, kept), oldColumnsOf(f.rows, kept));
  });
}
