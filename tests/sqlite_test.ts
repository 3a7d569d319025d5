import assert from "node:assert/strict";
import fc from "fast-check";
import { constants, DatabaseSync } from "node:sqlite";
import { Append, HandleStore, Increment, Merge, SetKey } from "../mod.ts";
import { openBackend } from "../src/url.ts";
import type { ConditionalWrite, HandleRecord, WriteContext } from "../src/backend.ts";
import { SQLITE_SCHEMA_VERSION, SqliteBackend } from "../src/backends/sqlite.ts";
import { QUIET_RUN } from "../src/backends/sqlite/_connection.ts";
import { setImmediate } from "node:timers";
import { byUtf8, DAY, FakeClock, freshUser, recordOf, rejectsWith } from "./_helpers.ts";
import { type Child, spawnChild } from "./_child.ts";
import { backendContract, sharedView } from "./contract/mod.ts";
import { runs } from "./_fc.ts";
import {
  createAtOnce,
  killWriterMidWrites,
  writersInTwoProcesses,
} from "./contract/cross_process.ts";
import { leasePrimitivesHold } from "./contract/leases.ts";
import {
  makePythonV02Database,
  PyFloat,
  pyJsonDumps,
  SAMPLE_NOW_S,
  SAMPLE_ROWS,
} from "./fixtures/python_v02.ts";

const CTX: WriteContext = { now: Date.now(), graceMs: 7 * DAY };
const SAMPLE = recordOf("n_aaaaaaaa");
const dir = await Deno.makeTempDir({ prefix: "mcpstate-sqlite-test-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
let files = 0;
/** A fresh database file path in the test directory. */
const freshPath = (tag: string) => `${dir}/${tag}-${++files}.db`;
/** The URL of an absolute path: `sqlite:///` + `/abs/path`. */
const urlOf = (path: string, query = "") => `sqlite:///${path}${query}`;

// Each store the suite opens is a new connection to the same file, as another process would have.
const contractPath = freshPath("contract");
Deno.test("contract: sqlite file", (t) =>
  backendContract(t, {
    open: () => openBackend(urlOf(contractPath)),
    url: urlOf(contractPath),
    inspect: {
      afterWriters: () => Promise.resolve(integrityOk(contractPath)),
      afterKill: () => Promise.resolve(integrityOk(contractPath)),
    },
  }));

// One in-memory database shared by every store the suite opens, seen through
// a backend without its records group and leases.readLeased: the suite runs
// without its import group, and the store reads a record and its lease in
// two calls.
const memory = await SqliteBackend.fromUrl("sqlite:///:memory:");
globalThis.addEventListener("unload", () => memory.close());
Deno.test("contract: sqlite :memory:", (t) =>
  backendContract(t, {
    open: () => Promise.resolve(sharedView(memory, ["records", "leases.readLeased"])),
  }));

Deno.test("sqlite: listUsers() gives users in the byte order of their UTF-8 names", async () => {
  const backend = await SqliteBackend.fromUrl(urlOf(freshPath("users")));
  try {
    const names = ["zed", "Émile", "adam", "\u{1F600}", "Zoë", "émile"];
    for (const u of names) {
      await backend.records.import(u, { ...SAMPLE, handle: "n_aaaaaaaa" }, CTX);
    }
    const listed = (await backend.records.users({ limit: 1000 })).filter((u) => names.includes(u));
    assert.deepEqual(listed, [...names].sort(byUtf8));
    assert.deepEqual(await backend.records.users({ limit: 0 }), []);
  } finally {
    await backend.close();
  }
});

function pragma(db: DatabaseSync, name: string): unknown {
  const row = db.prepare(`PRAGMA ${name}`).get();
  return row ? Object.values(row)[0] : undefined;
}

/** Every table of a current file, in name order. */
const TABLES = [
  "changes",
  "data_keys",
  "grants",
  "handles",
  "idempotency",
  "leases",
  "trash",
  "usage",
];

function tablesOf(db: DatabaseSync): string[] {
  return db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
    .map((r) => r.name as string);
}

function integrityOk(path: string): void {
  const db = new DatabaseSync(path);
  try {
    assert.equal(pragma(db, "integrity_check"), "ok");
  } finally {
    db.close();
  }
}

/**
 * Another OS process takes the write lock of the database file with a raw
 * `BEGIN IMMEDIATE`, sets `n` to 100 in every state, and holds the lock `ms`
 * milliseconds before it commits; resolves once it holds the lock.
 */
async function holdLock(path: string, ms: number): Promise<Child> {
  const child = spawnChild(["sqlite-lock", path, String(ms)]);
  assert.equal(await child.line("the lock"), "locked");
  return child;
}

/**
 * Opens a store on the old database at `path` (of schema version `from`,
 * when given), which migrates it in place, and asserts what every such
 * migration keeps: the file ends at the current schema version, and the
 * `kept` tables keep their root pages, definitions and indexes, and the
 * `rowTables` their rows (see {@link layoutOf}).
 *
 * @returns The layout (read again on each call), as it was before and after,
 *   and the store.
 */
async function migrateInPlace(path: string, kept: string[], rowTables: string[], from?: number) {
  const layout = () => layoutOf(path, kept, rowTables);
  const before = layout();
  if (from !== undefined) assert.equal(before.version, from);
  const store = await HandleStore.fromUrl(urlOf(path), { reclaimIntervalMs: 0 });
  const after = layout();
  assert.equal(after.version, SQLITE_SCHEMA_VERSION);
  assert.equal(after.old, before.old);
  assert.deepEqual(after.rows, before.rows);
  return { layout, before, after, store };
}

/** The handles of `user` that a listing with `query` gives, read 4 at a time through `listPage`. */
async function pagedBy4(
  store: HandleStore,
  user: string,
  query: { kind?: string; includeExpired: boolean },
): Promise<string[]> {
  const paged: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.listPage(user, { ...query, limit: 4, ...(cursor ? { cursor } : {}) });
    paged.push(...page.handles.map((h) => h.handle));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return paged;
}

/**
 * What an in-place migration must keep, read from the file: its version and
 * tables, the root pages and definitions of the `kept` tables and their
 * indexes (none rebuilt but the tables schema 7 rebuilds in a new column
 * order, {@link REBUILT_IN_7}: their indexes keep their definitions), the
 * rows of `rowTables` (by column name; the columns added since, `NULL` in a
 * migrated row, left out), and the schema cookie.
 */
function layoutOf(path: string, kept: string[], rowTables: string[]) {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const names = kept.map((t) => `'${t}'`).join(", ");
    const rowOf = (table: string) => (r: Record<string, unknown>) => {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(r).sort()) {
        const added = ADDED_COLUMNS.includes(k) || (table === "idempotency" && k === "handle");
        if (!(added && r[k] === null)) out[k] = r[k];
      }
      return out;
    };
    return {
      version: pragma(db, "user_version"),
      tables: tablesOf(db),
      // Schema 5 drops the listing index by kind (checked on its own), and nothing else.
      old: JSON.stringify(
        db.prepare(
          // Triggers are additions (the usage triggers on handles), never a rebuild.
          `SELECT type, tbl_name, name, rootpage, sql FROM sqlite_master WHERE tbl_name IN (${names}) ` +
            `AND name != '${DROPPED_IN_5}' AND type <> 'trigger' ORDER BY name`,
        ).all().map((r) =>
          !REBUILT_IN_7.includes(r.tbl_name as string)
            ? { name: r.name, rootpage: r.rootpage, sql: r.sql }
            : r.type === "table"
            ? { name: r.name }
            : { name: r.name, sql: String(r.sql).replace(/\s+/g, " ") }
        ),
      ),
      rows: rowTables.map((t) =>
        JSON.stringify(db.prepare(`SELECT * FROM ${t} ORDER BY 1, 2, 3`).all().map(rowOf(t)))
      ),
      indexes: db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
        .all().map((r) => r.name as string),
      schema: pragma(db, "schema_version"),
    };
  } finally {
    db.close();
  }
}

/** The tables schema 7 rebuilds with every column before the state (their rows copied). */
const REBUILT_IN_7 = ["handles", "trash", "idempotency"];

/** The columns of the record tables added after schema 4 (`NULL` in a row written before). */
const ADDED_COLUMNS = ["schema_version", "forked_from", "preview", "log_tail"];

/** The index schema 5 drops: a listing by kind walks the one listing index. */
const DROPPED_IN_5 = "handles_by_user_kind_updated";

/**
 * The changelog entries of a handle as stored: rows of the keyed table plus
 * the entries kept in its record's row (`log_tail`).
 */
function loggedCount(db: DatabaseSync, user: string, handle: string): number {
  return db.prepare(
    "SELECT (SELECT count(*) FROM changes WHERE user = ?1 AND handle = ?2) + coalesce((" +
      "SELECT (json_array_length(log_tail) - 2) / 3 FROM handles WHERE user = ?1 AND handle = ?2" +
      "), 0) AS n",
  ).get(user, handle)!.n as number;
}

/** A new database file in the layout of an earlier schema: WAL, then `schemas` in order. */
function oldDatabase(tag: string, ...schemas: string[]): { path: string; db: DatabaseSync } {
  const path = freshPath(tag);
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  for (const schema of schemas) db.exec(schema);
  return { path, db };
}

/** Opening a migrated file again changes nothing (same schema cookie) and leaves it sound. */
async function reopenChangesNothing(path: string, schema: () => unknown): Promise<void> {
  const before = schema();
  const again = await HandleStore.fromUrl(urlOf(path), { reclaimIntervalMs: 0 });
  await again.close();
  assert.equal(schema(), before);
  integrityOk(path);
}

Deno.test("sqlite: a new file is WAL, synchronous full through group commit, busy timeout set, current schema", async () => {
  const path = freshPath("fresh");
  const backend = await SqliteBackend.fromUrl(urlOf(path));
  const db = backend.database;
  assert.equal(pragma(db, "journal_mode"), "wal");
  // Group commit syncs the WAL itself before acknowledging (SQLite's own NORMAL);
  // where it is off, SQLite's FULL does.
  const group = Deno.build.os !== "darwin" && Deno.build.os !== "windows";
  assert.equal(backend.groupCommit, group);
  assert.equal(pragma(db, "synchronous"), group ? 1 : 2);
  assert.ok((pragma(db, "busy_timeout") as number) >= 5000);
  assert.equal(pragma(db, "user_version"), SQLITE_SCHEMA_VERSION);
  const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
    .all().map((r) => r.name);
  for (
    const name of [
      "handles_by_user_updated",
      "handles_by_expiry",
      "trash_by_until",
      "leases_by_expiry",
    ]
  ) {
    assert.ok(indexes.includes(name), name);
  }
  assert.ok(!indexes.includes(DROPPED_IN_5));
  assert.deepEqual(tablesOf(db), TABLES);
  await backend.close();
  await backend.close();
  assert.equal(db.isOpen, false);
});

Deno.test("sqlite: ?synchronous=normal opens with synchronous=NORMAL and works", async () => {
  const path = freshPath("normal");
  const backend = await SqliteBackend.fromUrl(urlOf(path, "?synchronous=normal"));
  const store = new HandleStore(backend);
  try {
    assert.equal(pragma(backend.database, "synchronous"), 1);
    assert.equal(backend.groupCommit, false);
    const h = await store.mint("n", { a: 1 }, { user: "u" });
    await store.patch(h, [SetKey("", "b", 2)], { user: "u" });
    assert.deepEqual((await store.get(h, { user: "u" })).state, { a: 1, b: 2 });
  } finally {
    await store.close();
  }
  const full = await SqliteBackend.fromUrl(urlOf(path, "?synchronous=FULL"));
  const again = new HandleStore(full);
  assert.equal(pragma(full.database, "synchronous"), full.groupCommit ? 1 : 2);
  assert.equal((await again.list("u")).length, 1);
  await again.close();
});

Deno.test("sqlite: group commit: writes that arrive during a sync share the next transaction, each with its own outcome, in order", async (t) => {
  const path = freshPath("group");
  // Asked for explicitly, so the steps run where it is off by default too.
  const on = new SqliteBackend(new DatabaseSync(path), { closeDatabase: true, groupCommit: true });
  assert.equal(on.groupCommit, true);
  assert.equal(pragma(on.database, "synchronous"), 1);
  const store = new HandleStore(on, { reclaimIntervalMs: 0 });
  const user = freshUser();
  /** The commit frames in the WAL (a frame whose "size after commit" is set, salts current). */
  const walCommits = () => {
    const wal = Deno.readFileSync(`${path}-wal`);
    const v = new DataView(wal.buffer);
    const pageSize = v.getUint32(8);
    let n = 0;
    for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
      if (v.getUint32(off + 8) !== v.getUint32(16) || v.getUint32(off + 12) !== v.getUint32(20)) {
        break;
      }
      if (v.getUint32(off + 4) !== 0) n++;
    }
    return n;
  };

  await t.step(
    "a stale save fails alone; the writes beside it land with their changelog",
    async () => {
      const hs = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store.mint("n", { i }, { user })),
      );
      const results = await Promise.allSettled(
        hs.map((h, i) =>
          store.save(h, { i, saved: true }, { user, expectVersion: i === 5 ? 7 : 1 })
        ),
      );
      for (const [i, r] of results.entries()) {
        if (i === 5) {
          assert.equal(r.status, "rejected");
          assert.equal((r as PromiseRejectedResult).reason.code, "stale_write");
        } else assert.equal(r.status, "fulfilled", `save ${i}`);
      }
      for (const [i, h] of hs.entries()) {
        const s = await store.get(h, { user });
        assert.deepEqual([s.version, s.state], i === 5 ? [1, { i }] : [2, { i, saved: true }]);
        const since = await store.changesSince(h, 0, { user });
        assert.ok(!since.truncated);
        assert.deepEqual(since.changes.map((c) => c.version), i === 5 ? [1] : [1, 2]);
      }
      integrityOk(path);
    },
  );

  await t.step(
    "writes to one handle keep their order; concurrent writes share commits",
    async () => {
      const h = await store.mint("n", { list: [] }, { user });
      on.database.exec("PRAGMA wal_autocheckpoint = 0");
      const before = walCommits();
      await Promise.all(
        Array.from({ length: 40 }, (_, i) => store.patch(h, [Append("list", i)], { user })),
      );
      const s = await store.get(h, { user });
      assert.deepEqual(s.state.list, Array.from({ length: 40 }, (_, i) => i));
      assert.equal(s.version, 41);
      const other = new DatabaseSync(path, { readOnly: true });
      assert.equal(loggedCount(other, user, h), 41);
      other.close();
      // Writes of one turn of the event loop, and those queued during a sync, share commits.
      const shared = walCommits() - before;
      assert.ok(shared >= 1 && shared < 40, `${shared} commits for 40 patches`);
      on.database.exec("PRAGMA wal_autocheckpoint = 1000");
    },
  );

  await t.step(
    "single-flight writes sync inline, one commit each; a burst after them still shares commits",
    async () => {
      // No checkpoint from here on, so the WAL only grows (a restart happens at a write's start).
      on.database.exec("PRAGMA wal_autocheckpoint = 0");
      const hs = await Promise.all(
        Array.from({ length: 16 }, (_, i) => store.mint("n", { i }, { user })),
      );
      let before = walCommits();
      // More than QUIET_RUN one at a time: the later ones sync on the event loop.
      for (let n = 0; n < 2 * QUIET_RUN; n++) {
        await store.save(hs[0]!, { n }, { user, expectVersion: n + 1 });
      }
      assert.equal(walCommits() - before, 2 * QUIET_RUN);
      before = walCommits();
      await Promise.all(
        hs.map((h, i) =>
          store.save(h, { burst: i }, { user, expectVersion: i === 0 ? 2 * QUIET_RUN + 1 : 1 })
        ),
      );
      const shared = walCommits() - before;
      assert.ok(shared >= 1 && shared < 16, `${shared} commits for 16 saves`);
      for (const [i, h] of hs.entries()) {
        assert.deepEqual((await store.get(h, { user })).state, { burst: i });
      }
      on.database.exec("PRAGMA wal_autocheckpoint = 1000");
      integrityOk(path);
    },
  );

  await t.step(
    "an acknowledged write is what a read then sees, and reads wait for its sync",
    async () => {
      const h = await store.mint("n", { n: 0 }, { user });
      const order: string[] = [];
      const write: ConditionalWrite = {
        expectVersion: 1,
        state: '{"n":1}',
        updatedAt: Date.now(),
        expiresAt: "keep",
        lastWriter: null,
      };
      // The write commits at the end of this turn of the event loop; a read
      // after that waits for the sync that makes it durable (or, inline, finds it synced).
      const saved = on.save(user, h, write, CTX).then(() => order.push("saved"));
      await new Promise((resolve) => setImmediate(resolve));
      const read = on.read(user, h).then((r) => order.push(`read v${r!.version}`));
      await Promise.all([saved, read]);
      assert.deepEqual(order, ["saved", "read v2"]);
    },
  );

  await t.step(
    "writes that find the file locked past the busy timeout fail, nothing written",
    async () => {
      const h = await store.mint("n", { n: 0 }, { user });
      const quick = new SqliteBackend(new DatabaseSync(path), {
        closeDatabase: true,
        groupCommit: true,
        busyTimeoutMs: 50,
      });
      const holder = new DatabaseSync(path);
      holder.exec("BEGIN IMMEDIATE");
      const bump = (cur: HandleRecord | null) =>
        cur && { record: { ...cur, version: cur.version + 1 } };
      const results = await Promise.allSettled(
        Array.from({ length: 5 }, () => quick.update(user, h, bump, CTX)),
      );
      holder.exec("ROLLBACK");
      holder.close();
      for (const r of results) {
        assert.equal(r.status, "rejected");
        assert.equal((r as PromiseRejectedResult).reason.code, "backend_error");
      }
      assert.equal((await store.get(h, { user })).version, 1);
      await quick.update(user, h, bump, CTX);
      assert.equal((await store.get(h, { user })).version, 2);
      await quick.close();
    },
  );

  await t.step("close waits for the writes already queued", async () => {
    const h = await store.mint("n", { n: 0 }, { user });
    const bump = (cur: HandleRecord | null) =>
      cur && { record: { ...cur, version: cur.version + 1 } };
    const writes = Array.from({ length: 10 }, () => on.update(user, h, bump, CTX));
    await on.close();
    await Promise.all(writes);
    await store.close();
    const again = await HandleStore.fromUrl(urlOf(path), { reclaimIntervalMs: 0 });
    assert.equal((await again.get(h, { user })).version, 11);
    await again.close();
  });
});

Deno.test("sqlite: URL forms ~, relative and absolute create the parent directory", async () => {
  const home = Deno.env.get("HOME");
  const cwd = Deno.cwd();
  const fakeHome = `${dir}/home`;
  await Deno.mkdir(fakeHome);
  Deno.env.set("HOME", fakeHome);
  try {
    const s1 = await HandleStore.fromUrl("sqlite:///~/.mcpstate/state.db");
    await s1.mint("a", {}, { user: "u" });
    await s1.close();
    assert.ok((await Deno.stat(`${fakeHome}/.mcpstate/state.db`)).isFile);
    Deno.chdir(fakeHome);
    const s2 = await HandleStore.fromUrl("sqlite:///rel/dir/x.db");
    await s2.close();
    assert.ok((await Deno.stat(`${fakeHome}/rel/dir/x.db`)).isFile);
  } finally {
    Deno.chdir(cwd);
    if (home === undefined) Deno.env.delete("HOME");
    else Deno.env.set("HOME", home);
  }
  const abs = `${dir}/deep/er/abs.db`;
  const s3 = await HandleStore.fromUrl(urlOf(abs));
  await s3.close();
  assert.ok((await Deno.stat(abs)).isFile);
});

Deno.test("sqlite: malformed URLs are invalid_argument with credentials redacted", async () => {
  const cases: [string, RegExp][] = [
    ["sqlite://alice:s3cret@host/x.db", /sqlite:\/\/\*\*\*@host/],
    ["sqlite:///", /sqlite:\/\/\/:memory:/],
    ["sqlite://", /sqlite:\/\/\/~\/file/],
    [urlOf(`${dir}/x.db`, "?synchronous=off"), /synchronous=full\|normal/],
    [urlOf(`${dir}/x.db`, "?mode=ro&password=hunter2"), /"mode".*synchronous=full\|normal/],
    [urlOf(`${dir}/x.db`, "?password=hunter2"), /"password".*synchronous=full\|normal/],
    [urlOf(`${dir}/%E0%A4%A.db`), /Malformed sqlite URL/],
  ];
  for (const [url, pattern] of cases) {
    const e = await rejectsWith(() => HandleStore.fromUrl(url), "invalid_argument");
    assert.match(e.message, pattern, url);
    assert.doesNotMatch(JSON.stringify(e.toPayload()), /s3cret|hunter2/, url);
  }
  await assert.rejects(() => SqliteBackend.fromUrl("redis://x"), /Not a SQLite URL/);
});

Deno.test("sqlite: files that are not mcpstate databases are backend_error", async () => {
  const garbage = freshPath("garbage");
  await Deno.writeTextFile(garbage, "this is not a database, just text ".repeat(200));
  const e1 = await rejectsWith(() => HandleStore.fromUrl(urlOf(garbage)), "backend_error");
  assert.match(e1.message, /SQLite/);

  // Files of another program's, or of a newer mcpstate.
  const made: [string, string, RegExp][] = [
    ["foreign", "CREATE TABLE handles (id INTEGER PRIMARY KEY, name TEXT)", /did not create/],
    ["newer", `PRAGMA user_version = ${SQLITE_SCHEMA_VERSION + 1}`, /newer/],
    [
      "foreign-log",
      "CREATE TABLE changes (id INTEGER PRIMARY KEY, body TEXT)",
      /"changes" table that mcpstate did not create/,
    ],
    [
      "foreign-leases",
      "CREATE TABLE leases (id INTEGER PRIMARY KEY, owner TEXT)",
      /"leases" table that mcpstate did not create/,
    ],
  ];
  for (const [tag, sql, message] of made) {
    const path = freshPath(tag);
    const db = new DatabaseSync(path);
    db.exec(sql);
    db.close();
    const e = await rejectsWith(() => HandleStore.fromUrl(urlOf(path)), "backend_error");
    assert.match(e.message, message, tag);
  }

  const dirAsFile = `${dir}/a-directory`;
  await Deno.mkdir(dirAsFile);
  await rejectsWith(() => HandleStore.fromUrl(urlOf(dirAsFile)), "backend_error");
});

Deno.test("sqlite: listing reads covering indexes only, never the state column", async () => {
  const path = freshPath("plan");
  const raw = new DatabaseSync(path);
  const prepared: string[] = [];
  // The real connection, with every prepared SQL text recorded.
  const db = new Proxy(raw, {
    get(target, prop) {
      if (prop === "prepare") {
        return (sql: string) => {
          prepared.push(sql);
          return target.prepare(sql);
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  const store = new HandleStore(new SqliteBackend(db), { reclaimIntervalMs: 0 });
  const user = freshUser();
  for (let i = 0; i < 4; i++) {
    await store.mint(i % 2 ? "a" : "b", { big: "x".repeat(10_000) }, { user, ttlDays: 1 });
  }
  const reads: string[] = [];
  const stop = onColumnRead(raw, (table, column) => reads.push(`${table}.${column}`));
  for (const kind of [undefined, "a"]) {
    for (const includeExpired of [false, true]) {
      const first = await store.listPage(user, {
        limit: 1,
        includeExpired,
        ...(kind ? { kind } : {}),
      });
      assert.equal(first.handles.length, 1);
      assert.ok(first.nextCursor);
      const second = await store.listPage(user, {
        limit: 1,
        includeExpired,
        cursor: first.nextCursor,
        ...(kind ? { kind } : {}),
      });
      assert.equal(second.handles.length, 1);
    }
  }
  stop();
  const lists = prepared.filter((sql) => /ORDER BY updated_ms DESC/.test(sql));
  assert.equal(lists.length, 8, "every filter combination was prepared once");
  assert.ok(reads.includes("handles.handle") && reads.includes("handles.updated_ms"));
  assert.ok(!reads.includes("handles.state"), `state was read: ${reads.join(", ")}`);
  // Besides the handles, only the page's leases and the grants to the user are read.
  assert.ok(
    reads.every((r) => /^(handles|leases|grants|json_each)\./.test(r)),
    `not only handles, leases and grants: ${reads.join(", ")}`,
  );
  for (const sql of lists) {
    assert.doesNotMatch(sql.split(" FROM ")[0]!, /\bstate\b/);
    const plan = raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all().map((r) => String(r.detail));
    assert.ok(plan.some((d) => /USING COVERING INDEX handles_by_user/.test(d)), plan.join("; "));
    assert.ok(!plan.some((d) => /TEMP B-TREE/.test(d)), plan.join("; "));
  }
  await store.close();
  assert.equal(raw.isOpen, true, "an injected connection stays open");
  raw.close();
});

/**
 * Calls `seen` with the table and column of every column read on `raw`
 * (SQLite's authorizer), until the returned function is called.
 */
function onColumnRead(
  raw: DatabaseSync,
  seen: (table: string, column: string) => unknown,
): () => void {
  const { SQLITE_READ, SQLITE_OK } = constants as unknown as Record<string, number>;
  const authorize = (raw as unknown as {
    setAuthorizer(
      fn: ((action: number, a: string | null, b: string | null) => number) | null,
    ): void;
  }).setAuthorizer.bind(raw);
  authorize((action, table, column) => {
    if (action === SQLITE_READ) seen(String(table), String(column));
    return SQLITE_OK!;
  });
  return () => authorize(null);
}

Deno.test("sqlite: a listing with previews reads only columns stored before the state", async () => {
  // SQLite reads a row's columns in order: one stored after a large state is
  // reached only through its overflow pages. Every column a listing reads
  // comes before the state, so a listing of large states costs what one of
  // tiny ones does (bench/list_large.ts times it).
  const path = freshPath("list-large");
  const raw = new DatabaseSync(path);
  const store = new HandleStore(new SqliteBackend(raw), { reclaimIntervalMs: 0 });
  const user = freshUser();
  for (let i = 0; i < 4; i++) {
    await store.mint("note", { big: "x".repeat(100_000), i }, { user, ttlDays: 1 });
  }
  const reads = new Set<string>();
  const stop = onColumnRead(raw, (table, column) => table === "handles" && reads.add(column));
  for (const previews of [false, true]) {
    const page = await store.listPage(user, { limit: 50, previews });
    assert.equal(page.handles.length, 4);
    assert.equal(page.handles.every((h) => h.preview !== undefined), previews);
  }
  stop();
  assert.ok(reads.has("preview") && reads.has("updated_ms"), [...reads].join(", "));
  for (const table of ["handles", "trash"]) {
    const columns = raw.prepare("SELECT name FROM pragma_table_info(?)").all(table)
      .map((r) => r.name as string);
    assert.equal(columns.at(-1), "state", `${table}: ${columns.join(", ")}`);
  }
  // The rows' overflow pages exist (the states are large); the listing walks none of them.
  const overflow = raw.prepare(
    "SELECT count(*) AS n FROM dbstat WHERE name = 'handles' AND pagetype = 'overflow'",
  ).get()!.n as number;
  assert.ok(overflow > 4 * 20, `overflow pages: ${overflow}`);
  assert.ok(!reads.has("state"));
  await store.close();
  raw.close();
});

Deno.test("sqlite: a write that fails after its row was written rolls back entirely", async () => {
  const path = freshPath("rollback");
  const backend = await SqliteBackend.fromUrl(urlOf(path));
  const store = new HandleStore(backend, { reclaimIntervalMs: 0 });
  const user = freshUser();
  const h = await store.mint("r", { n: 1 }, { user });
  const ctx: WriteContext = {
    now: Date.now(),
    graceMs: 0,
    // A claim the driver cannot bind: it fails after the UPDATE ran.
    idempotency: { key: "k", scope: h, fingerprint: "f", expiresAt: {} as never },
  };
  const entry = { version: 2, at: ctx.now, text: '{"version":2}' };
  await assert.rejects(() =>
    backend.update(
      user,
      h,
      (cur) => ({ record: { ...cur!, state: '{"n":2}', version: cur!.version + 1 }, entry }),
      { ...ctx, retention: { maxEntries: 1, maxAgeMs: DAY } },
    )
  );
  assert.equal(backend.database.isTransaction, false);
  const after = await store.get(h, { user });
  assert.deepEqual(after.state, { n: 1 });
  assert.equal(after.version, 1);
  // Neither the entry nor the retention's trim of the mint's entry stayed.
  assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [1]);
  // A throwing change function rolls back as well, and the connection stays usable.
  await assert.rejects(
    () =>
      backend.update(user, h, () => {
        throw new Error("boom");
      }, { now: Date.now(), graceMs: 0 }),
    /boom/,
  );
  assert.equal(backend.database.isTransaction, false);
  await store.patch(h, [Increment("", "n")], { user });
  assert.equal((await store.get(h, { user })).version, 2);
  assert.deepEqual((await backend.changes(user, h, 0)).map((e) => e.version), [1, 2]);
  await store.close();
});

Deno.test("sqlite: idempotency records survive a reopen", async () => {
  const url = urlOf(freshPath("idem"));
  const user = freshUser();
  const s1 = await HandleStore.fromUrl(url);
  const h = await s1.mint("i", { n: 0 }, { user, idempotencyKey: "mint" });
  const p1 = await s1.patch(h, [Increment("", "n")], { user, idempotencyKey: "p" });
  await s1.close();
  const s2 = await HandleStore.fromUrl(url);
  assert.equal(await s2.mint("i", { n: 0 }, { user, idempotencyKey: "mint" }), h);
  assert.deepEqual(await s2.patch(h, [Increment("", "n")], { user, idempotencyKey: "p" }), p1);
  assert.equal((await s2.get<{ n: number }>(h, { user })).state.n, 1);
  await s2.close();
});

Deno.test("sqlite: two processes patching one handle with pauses between patches interleave, lose nothing, never see SQLITE_BUSY", async () => {
  const path = freshPath("two-procs");
  // One writer a process, pausing 1 ms after each patch: the lock changes
  // hands often, so the processes really interleave (back to back, SQLite's
  // busy wait may let one run nearly alone).
  const { log } = await writersInTwoProcesses(urlOf(path), {
    writers: 1,
    stores: [1, 1],
    count: 200,
    pauseMs: 1,
  });
  const switches = log.filter((x, i) => i > 0 && x[0] !== log[i - 1]![0]).length;
  assert.ok(switches >= 10, `only ${switches} switches between the processes`);
  integrityOk(path);
});

Deno.test("sqlite: a write waits for another process's lock, and says so when it waits too long", async () => {
  const path = freshPath("lock");
  const user = freshUser();
  const store = await HandleStore.fromUrl(urlOf(path), { reclaimIntervalMs: 0 });
  const h = await store.mint("l", { n: 0 }, { user });
  const holder = await holdLock(path, 500);
  await store.patch(h, [Increment("", "n")], { user });
  assert.equal((await holder.ended()).status.code, 0);
  // 101: the patch waited for the holder's commit (n = 100) and applied on top of it.
  assert.equal((await store.get<{ n: number }>(h, { user })).state.n, 101);

  // A short busy timeout: the caller gets backend_error, and nothing is written.
  const impatient = new HandleStore(
    new SqliteBackend(new DatabaseSync(path), { busyTimeoutMs: 50, closeDatabase: true }),
    { reclaimIntervalMs: 0 },
  );
  const again = await holdLock(path, 1200);
  const e = await rejectsWith(
    () => impatient.patch(h, [Increment("", "n")], { user }),
    "backend_error",
  );
  assert.match(e.message, /locked by another connection for more than 50 ms/);
  assert.equal((await again.ended()).status.code, 0);
  assert.equal((await impatient.get<{ n: number }>(h, { user })).state.n, 100);
  await impatient.close();
  await store.close();
});

Deno.test("sqlite: after kill -9 every acknowledged write is there (synchronous=normal)", async () => {
  const path = freshPath("crash-normal");
  await killWriterMidWrites(urlOf(path, "?synchronous=normal"), {
    afterKill: () => Promise.resolve(integrityOk(path)),
  });
});

/** The schema of version 2 (mcpstate 0.3 before history), as it was written. */
const SCHEMA_V2 = `
CREATE TABLE handles (
  user TEXT NOT NULL, handle TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
  version INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
  expires_ms INTEGER, last_writer TEXT, PRIMARY KEY (user, handle)
);
CREATE INDEX handles_by_user_updated
  ON handles (user, updated_ms DESC, handle, kind, version, created_ms, expires_ms, last_writer);
CREATE INDEX handles_by_user_kind_updated
  ON handles (user, kind, updated_ms DESC, handle, version, created_ms, expires_ms, last_writer);
CREATE INDEX handles_by_expiry ON handles (expires_ms) WHERE expires_ms IS NOT NULL;
CREATE TABLE idempotency (
  user TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
  result TEXT, expires_ms INTEGER NOT NULL, PRIMARY KEY (user, scope, key)
);
CREATE INDEX idempotency_by_expiry ON idempotency (expires_ms);
PRAGMA user_version = 2;
`;

Deno.test("sqlite: a schema 2 database gains the changelog and the trash in place", async () => {
  const { path, db: old } = oldDatabase("v2", SCHEMA_V2);
  const now = Date.now();
  old.prepare(
    "INSERT INTO handles VALUES ('u', 'note_aaaaaaaa', 'note', '{\"n\":1}', 3, ?, ?, NULL, 'w')",
  ).run(now - 1000, now - 500);
  old.prepare("INSERT INTO idempotency VALUES ('u', '', 'k', 'f', NULL, ?)").run(now + DAY);
  old.close();
  const { layout, after, store } = await migrateInPlace(path, ["handles", "idempotency"], [
    "handles",
  ]);
  assert.deepEqual(after.tables, TABLES);
  const h = "note_aaaaaaaa";
  // A handle from before history has no log: asking before its first logged write truncates.
  const first = await store.changesSince(h, 2, { user: "u" });
  assert.ok(first.truncated && first.current.version === 3);
  await store.patch(h, [Increment("", "n")], { user: "u", writer: "v3" });
  const since = await store.changesSince(h, 3, { user: "u" });
  assert.ok(!since.truncated && since.changes.length === 1 && since.changes[0]!.writer === "v3");
  assert.equal((await store.changesSince(h, 2, { user: "u" })).truncated, true);
  await store.revoke(h, { user: "u" });
  assert.equal((await store.restore(h, { user: "u" })).version, 4);
  await store.close();
  await reopenChangesNothing(path, () => layout().schema);
});

Deno.test("sqlite: trash and changelog, row by row", async () => {
  const backend = await SqliteBackend.fromUrl(urlOf(freshPath("trash")));
  const db = backend.database;
  const count = (table: string, user: string, handle: string) =>
    db.prepare(`SELECT count(*) AS n FROM ${table} WHERE user = ? AND handle = ?`)
      .get(user, handle)!.n as number;
  const rows = (user: string, handle: string) => [
    count("handles", user, handle),
    count("trash", user, handle),
    loggedCount(db, user, handle),
  ];
  const user = freshUser();
  const retention = { maxEntries: 100, maxAgeMs: DAY };
  const ctx = (now: number, extra: Partial<WriteContext> = {}): WriteContext => ({
    now,
    graceMs: 0,
    retention,
    ...extra,
  });
  const rec = (handle: string, version: number, extra: Partial<HandleRecord> = {}) => ({
    ...SAMPLE,
    handle,
    version,
    ...extra,
  });
  const entry = (version: number, at = 1000) => ({ version, at, text: `{"version":${version}}` });
  const mint = (handle: string, extra: Partial<HandleRecord> = {}) =>
    backend.insert(user, rec(handle, 1, extra), ctx(1000, { entry: entry(1) }));
  const bump = (handle: string, e: { version: number; at: number; text: string }, now = 1000) =>
    backend.update(
      user,
      handle,
      (cur) => cur && { record: { ...cur, version: e.version }, entry: e },
      ctx(now),
    );
  const versions = async (handle: string) =>
    (await backend.changes(user, handle, 0)).map((e) => e.version);

  // Revoked: the record moves to the trash, its changelog stays, nothing live sees it.
  const a = "n_aaaaaaaa";
  await mint(a);
  await bump(a, entry(2));
  assert.deepEqual(await backend.remove(user, a, ctx(1000, { trashUntil: 5000 })), {
    removed: true,
  });
  assert.deepEqual(rows(user, a), [0, 1, 2]);
  assert.equal(await backend.read(user, a), null);
  assert.deepEqual(await backend.changes(user, a, 0), []);
  assert.deepEqual(await backend.list(user, { limit: 10 }), []);
  assert.ok(!(await backend.records.users({ limit: 1000 })).includes(user));
  assert.deepEqual(await bump(a, entry(3)), { record: null, written: false });
  assert.deepEqual(await mint(a), { inserted: false });
  const save: ConditionalWrite = {
    expectVersion: 2,
    state: "{}",
    updatedAt: 1,
    expiresAt: "keep",
    lastWriter: null,
  };
  assert.deepEqual(await backend.save(user, a, save, ctx(1000)), {
    ok: false,
    current: null,
  });
  assert.deepEqual(await backend.remove(user, a, ctx(1000)), { removed: false });
  assert.equal(await backend.sweep(user, 10_000, 4999), 0);
  assert.deepEqual(rows(user, a), [0, 1, 2]);
  // Restored unchanged within the window, with its changelog; only once.
  assert.equal(await backend.untrash(user, a, ctx(5000)), null);
  assert.deepEqual(await backend.untrash(user, a, ctx(4999)), rec(a, 2));
  assert.deepEqual(rows(user, a), [1, 0, 2]);
  assert.deepEqual(await versions(a), [1, 2]);
  assert.equal(await backend.untrash(user, a, ctx(4999)), null);
  // Deleted at once: the changelog goes with it.
  await backend.remove(user, a, ctx(1000));
  assert.deepEqual(rows(user, a), [0, 0, 0]);

  // Sweep: an expired record and a trashed one past its window, with their logs.
  const b = "n_bbbbbbbb", c = "n_cccccccc";
  await mint(b);
  await backend.remove(user, b, ctx(1000, { trashUntil: 2000 }));
  await mint(c, { expiresAt: 1500 });
  assert.equal(await backend.sweep(user, 1500, 2000), 1);
  assert.deepEqual([...rows(user, b), ...rows(user, c)], [0, 0, 0, 0, 0, 0]);

  // importRecord() over a trashed handle: the trashed copy stays (without its
  // log), the live record owns the log, and sweeping the copy leaves it.
  const d = "n_dddddddd";
  await mint(d);
  await backend.remove(user, d, ctx(1000, { trashUntil: 3000 }));
  assert.equal(await backend.records.import(user, rec(d, 7), ctx(1000)), "inserted");
  assert.deepEqual(rows(user, d), [1, 1, 0]);
  await bump(d, entry(8));
  assert.equal(await backend.untrash(user, d, ctx(1000)), null);
  await backend.sweep(user, 0, 3000);
  assert.deepEqual(rows(user, d), [1, 0, 1]);
  assert.deepEqual(await versions(d), [8]);
  assert.equal(await backend.records.import(user, rec(d, 9), ctx(1000)), "replaced");
  assert.deepEqual(rows(user, d), [1, 0, 0]);

  // Entries are kept byte for byte, up to the store's 32 KiB.
  const text = JSON.stringify({ s: "é☕\u{1F600}\\u0000\\ud800", pad: "x".repeat(32_700) });
  await bump(d, { version: 10, at: 1000, text });
  assert.deepEqual(await backend.changes(user, d, 9), [{ version: 10, at: 1000, text }]);

  // Retention is exact: by count, and by age even when the clock went back.
  await bump(d, entry(11, 100));
  await bump(d, entry(12, 1000), 1000 + DAY - 500);
  assert.deepEqual(await versions(d), [10, 12]);
  const small = { ...ctx(1000 + DAY), retention: { maxEntries: 2, maxAgeMs: DAY } };
  await backend.update(
    user,
    d,
    (cur) => ({ record: { ...cur!, version: 13 }, entry: entry(13, 1000 + DAY) }),
    small,
  );
  assert.deepEqual(await versions(d), [12, 13]);
  await backend.close();
});

Deno.test("sqlite: the changelog, kept partly in the record's row, answers what deleting at each append would", async () => {
  const backend = await SqliteBackend.fromUrl(urlOf(freshPath("log-model")));
  const db = backend.database;
  const user = freshUser();
  const h = "n_aaaaaaaa";
  type Entry = { version: number; at: number; text: string };
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.oneof(
          // An append: the state's size decides whether the entry may stay in the row.
          {
            weight: 6,
            arbitrary: fc.record({
              kind: fc.constant("append" as const),
              big: fc.boolean(),
              entryBytes: fc.constantFrom(20, 300, 1500, 5000),
              maxEntries: fc.integer({ min: 1, max: 12 }),
              maxAgeMs: fc.integer({ min: 5, max: 60 }),
              // The clock mostly moves on, sometimes back.
              step: fc.integer({ min: -3, max: 9 }),
            }),
          },
          fc.constant({ kind: "trash" as const }),
          fc.constant({ kind: "import" as const }),
          fc.constant({ kind: "read" as const }),
        ),
        { minLength: 4, maxLength: 60 },
      ),
      async (steps) => {
        db.exec("DELETE FROM handles; DELETE FROM trash; DELETE FROM changes");
        let now = 1000, version = 1;
        let log: Entry[] = [{ version: 1, at: now, text: '{"version":1}' }];
        const ctx = (extra: Partial<WriteContext> = {}): WriteContext => ({
          now,
          graceMs: 0,
          ...extra,
        });
        await backend.insert(user, { ...SAMPLE, handle: h }, ctx({ entry: log[0]! }));
        for (const s of steps) {
          if (s.kind === "append") {
            now += s.step;
            version++;
            const text = JSON.stringify({ version, pad: "x".repeat(s.entryBytes) });
            const entry = { version, at: now, text };
            const retention = { maxEntries: s.maxEntries, maxAgeMs: s.maxAgeMs };
            const state = s.big ? JSON.stringify({ s: "y".repeat(3000) }) : "{}";
            await backend.update(
              user,
              h,
              (cur) => cur && { record: { ...cur, state, version }, entry },
              ctx({ retention }),
            );
            log = log.filter((e) => e.version > version - s.maxEntries && e.at >= now - s.maxAgeMs);
            log.push(entry);
          } else if (s.kind === "trash") {
            // To the trash and back: the log goes with the record.
            await backend.remove(user, h, ctx({ trashUntil: now + 1000 }));
            assert.deepEqual(await backend.changes(user, h, 0), []);
            assert.ok(await backend.untrash(user, h, ctx()));
          } else if (s.kind === "import") {
            version++;
            await backend.records.import(user, { ...SAMPLE, handle: h, version }, ctx());
            log = [];
          }
          assert.deepEqual(await backend.changes(user, h, 0), log);
          const after = log.length > 1 ? log[1]!.version : version;
          assert.deepEqual(
            await backend.changes(user, h, after),
            log.filter((e) => e.version > after),
          );
        }
        assert.equal(pragma(db, "integrity_check"), "ok");
      },
    ),
    runs(61, 150),
  );
  await backend.close();
});

Deno.test("sqlite: the background reclaim removes rows only after the grace period", async () => {
  const path = freshPath("reclaim");
  const clock = new FakeClock();
  const store = await HandleStore.fromUrl(urlOf(path), {
    clock: clock.fn,
    reclaimIntervalMs: 20,
    expiredGraceDays: 2,
  });
  const reader = new DatabaseSync(path, { readOnly: true });
  const rows = (h: string) =>
    reader.prepare("SELECT count(*) AS n FROM handles WHERE handle = ?").get(h)?.n;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  try {
    const user = freshUser();
    const h = await store.mint("tmp", { a: 1 }, { user, ttlDays: 1 });
    const keep = await store.mint("keep", { b: 1 }, { user });
    const expiresAt = clock.now + DAY;
    for (const at of [expiresAt, expiresAt + DAY, expiresAt + 2 * DAY - 1]) {
      clock.now = at;
      await sleep(120);
      await rejectsWith(() => store.get(h, { user }), "handle_expired");
      assert.equal(rows(h), 1, `reclaimed too early at expiry + ${(at - expiresAt) / DAY} days`);
    }
    clock.now = expiresAt + 2 * DAY;
    const deadline = Date.now() + 5000;
    while (rows(h) !== 0 && Date.now() < deadline) await sleep(20);
    assert.equal(rows(h), 0, "not reclaimed after the grace period");
    await rejectsWith(() => store.get(h, { user }), "handle_not_found");
    assert.equal((await store.get(keep, { user })).version, 1);
  } finally {
    reader.close();
    await store.close();
  }
});

Deno.test("fixture: pyJsonDumps writes what Python's json.dumps writes", () => {
  assert.equal(
    pyJsonDumps({ a: new PyFloat(1), s: "é☕\u{1F600}", l: [1, null, true], q: '"\\\n' }),
    '{"a": 1.0, "s": "\\u00e9\\u2615\\ud83d\\ude00", "l": [1, null, true], "q": "\\"\\\\\\n"}',
  );
});

Deno.test("sqlite: a Python mcpstate 0.2 database opens, reads back unchanged and migrates once", async (t) => {
  const path = freshPath("python-v02");
  makePythonV02Database(path);
  const before = new DatabaseSync(path);
  const originals = new Map(
    before.prepare("SELECT * FROM handles").all().map((r) => [`${r.user}/${r.handle}`, r]),
  );
  assert.equal(before.prepare("SELECT typeof(created_at) AS t FROM handles").get()?.t, "real");
  before.close();
  assert.equal(originals.size, SAMPLE_ROWS.length);

  const nowMs = SAMPLE_NOW_S * 1000;
  const store = await HandleStore.fromUrl(urlOf(path), {
    clock: () => nowMs,
    reclaimIntervalMs: 0,
  });
  const ms = (s: number) => Math.round(s * 1000);

  await t.step(
    "every live handle reads back with its state, version, times and writer",
    async () => {
      for (const row of SAMPLE_ROWS) {
        const original = originals.get(`${row.user}/${row.handle}`)!;
        if (row.expiresAt !== null && row.expiresAt * 1000 <= nowMs) continue;
        const s = await store.get(row.handle, { user: row.user });
        assert.equal(JSON.stringify(s.state), JSON.stringify(JSON.parse(original.state as string)));
        assert.deepEqual(s.state, JSON.parse(original.state as string));
        assert.equal(s.kind, row.kind);
        assert.equal(s.version, row.version);
        assert.equal(s.lastWriter, row.lastWriter);
        assert.equal(s.createdAt.getTime(), ms(row.createdAt));
        assert.equal(s.updatedAt.getTime(), ms(row.updatedAt));
        assert.equal(
          s.expiresAt?.getTime() ?? null,
          row.expiresAt === null ? null : ms(row.expiresAt),
        );
        assert.ok(Math.abs(s.createdAt.getTime() - row.createdAt * 1000) <= 0.5);
      }
      const todo = await store.get("todo_abcdefgh", { user: "local" });
      assert.ok(Object.hasOwn(todo.state, "__proto__"));
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    },
  );

  await t.step("an expired Python handle is handle_expired with its TTL", async () => {
    const row = SAMPLE_ROWS.find((r) => r.handle === "scratch_zzzz2222")!;
    const e = await rejectsWith(() => store.get(row.handle, { user: "bob" }), "handle_expired");
    assert.equal(e.details.expired_at, new Date(ms(row.expiresAt!)).toISOString());
    assert.equal(e.details.ttl_days, 0.333);
  });

  await t.step("listing is per user, newest first", async () => {
    const local = await store.list("local");
    assert.deepEqual(local.map((i) => i.handle), ["todo_abcdefgh", "research_k3v9x2mq"]);
    const bob = await store.list("bob", { includeExpired: true });
    assert.deepEqual(bob.map((i) => i.handle), ["research_k3v9x2mq", "scratch_zzzz2222"]);
  });

  await t.step("the schema was migrated in place: ms columns, version pragma, no row lost", () => {
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      assert.equal(pragma(db, "user_version"), SQLITE_SCHEMA_VERSION);
      assert.equal(pragma(db, "integrity_check"), "ok");
      const cols = db.prepare("SELECT name, type FROM pragma_table_info('handles')").all()
        .map((r) => `${r.name} ${r.type}`);
      assert.ok(
        cols.includes("created_ms INTEGER") && !cols.some((c) => c.startsWith("created_at")),
      );
      assert.equal(db.prepare("SELECT count(*) AS n FROM handles").get()?.n, SAMPLE_ROWS.length);
      assert.deepEqual(tablesOf(db), TABLES);
      const rows = db.prepare("SELECT typeof(created_ms) AS t FROM handles").all();
      assert.ok(rows.every((r) => r.t === "integer"));
    } finally {
      db.close();
    }
  });

  await t.step("states are compacted, except text a JS number would round", () => {
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const text = (user: string, handle: string) =>
        db.prepare("SELECT state FROM handles WHERE user = ? AND handle = ?").get(user, handle)
          ?.state as string;
      const todo = originals.get("local/todo_abcdefgh")!.state as string;
      assert.equal(text("local", "todo_abcdefgh"), JSON.stringify(JSON.parse(todo)));
      const bob = originals.get("bob/research_k3v9x2mq")!.state as string;
      assert.match(bob, /"id": 12345678901234567890\}/);
      assert.equal(text("bob", "research_k3v9x2mq"), bob, "kept byte for byte");
    } finally {
      db.close();
    }
  });

  await t.step("a patch that changes nothing on a migrated row writes nothing", async () => {
    const s = await store.patch("todo_abcdefgh", [Merge({ count: 42 })], { user: "local" });
    assert.equal(s.version, 1);
    const w = await store.patch("todo_abcdefgh", [Increment("", "count")], {
      user: "local",
      writer: "deno",
    });
    assert.equal(w.version, 2);
    assert.equal(w.createdAt.getTime(), ms(SAMPLE_ROWS[1]!.createdAt));
  });
  await store.close();

  await t.step("reopening is a no-op: same schema cookie, same rows", async () => {
    const snapshot = () => {
      const db = new DatabaseSync(path, { readOnly: true });
      try {
        return {
          schema: pragma(db, "schema_version"),
          rows: JSON.stringify(db.prepare("SELECT * FROM handles ORDER BY user, handle").all()),
        };
      } finally {
        db.close();
      }
    };
    const first = snapshot();
    const again = await HandleStore.fromUrl(urlOf(path), { reclaimIntervalMs: 0 });
    await again.close();
    assert.deepEqual(snapshot(), first);
  });
});

Deno.test("sqlite: records keep fractional and large epoch-ms values exactly", async () => {
  const backend = await SqliteBackend.fromUrl("sqlite:///:memory:");
  const ctx: WriteContext = { now: 0, graceMs: 0 };
  const r: HandleRecord = {
    handle: "x_aaaaaaaa",
    kind: "x",
    state: '{"\\u0000":"\\ud800"}',
    version: 1,
    createdAt: 1785240000123.5,
    updatedAt: 8.64e15,
    expiresAt: null,
    lastWriter: null,
  };
  assert.deepEqual(await backend.insert("u", r, ctx), { inserted: true });
  assert.deepEqual(await backend.read("u", r.handle), r);
  await backend.close();
  await rejectsWith(() => backend.read("u", r.handle), "backend_error");
});

/** The tables schema 3 added to schema 2 (the changelog and the trash), as they were written. */
const SCHEMA_V3_TABLES = `
CREATE TABLE changes (
  user TEXT NOT NULL, handle TEXT NOT NULL, version INTEGER NOT NULL, at INTEGER NOT NULL,
  text TEXT NOT NULL, PRIMARY KEY (user, handle, version)
) WITHOUT ROWID;
CREATE TABLE trash (
  user TEXT NOT NULL, handle TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
  version INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
  expires_ms INTEGER, last_writer TEXT, trashed_until INTEGER NOT NULL, PRIMARY KEY (user, handle)
);
CREATE INDEX trash_by_until ON trash (trashed_until);
PRAGMA user_version = 3;
`;

Deno.test("sqlite: a schema 3 database gains the leases table in place, without losing a row", async () => {
  const { path, db: old } = oldDatabase("v3", SCHEMA_V2, SCHEMA_V3_TABLES);
  const now = Date.now();
  old.prepare(
    "INSERT INTO handles VALUES ('u', 'note_aaaaaaaa', 'note', '{\"n\":1}', 2, ?, ?, NULL, 'w')",
  ).run(now - 1000, now - 500);
  old.prepare("INSERT INTO changes VALUES ('u', 'note_aaaaaaaa', 2, ?, '{\"version\":2}')")
    .run(now - 500);
  old.prepare(
    "INSERT INTO trash VALUES ('u', 'note_bbbbbbbb', 'note', '{}', 1, ?, ?, NULL, NULL, ?)",
  ).run(now - 1000, now - 1000, now + DAY);
  old.prepare("INSERT INTO idempotency VALUES ('u', '', 'k', 'f', NULL, ?)").run(now + DAY);
  old.close();
  const v3Tables = ["handles", "changes", "trash", "idempotency"];
  const { layout, before, after, store } = await migrateInPlace(path, v3Tables, v3Tables, 3);
  assert.equal(SQLITE_SCHEMA_VERSION, 7);
  assert.ok(before.indexes.includes(DROPPED_IN_5) && !after.indexes.includes(DROPPED_IN_5));
  assert.deepEqual(after.tables, TABLES);
  // The migrated rows work, leases included; a lease changes no record.
  const h = "note_aaaaaaaa";
  const lease = await store.lease(h, { user: "u", writer: "w2", seconds: 60 });
  assert.equal(lease.acquired, true);
  const s = await store.get(h, { user: "u" });
  assert.deepEqual([s.version, s.state, s.activeLease?.holder], [2, { n: 1 }, "w2"]);
  assert.deepEqual(layout().rows, before.rows);
  const since = await store.changesSince(h, 1, { user: "u" });
  assert.ok(!since.truncated && since.changes.length === 1);
  assert.equal((await store.restore("note_bbbbbbbb", { user: "u" })).version, 1);
  await store.close();
  await reopenChangesNothing(path, () => layout().schema);
});

/** The table schema 4 added to schema 3 (the leases), as it was written. */
const SCHEMA_V4_TABLES = `
CREATE TABLE leases (
  user TEXT NOT NULL, handle TEXT NOT NULL, holder TEXT NOT NULL, expires_at INTEGER NOT NULL,
  PRIMARY KEY (user, handle)
);
CREATE INDEX leases_by_expiry ON leases (expires_at);
PRAGMA user_version = 4;
`;

Deno.test("sqlite: a schema 4 database drops the listing index by kind in place; listing by kind pages the same", async () => {
  const { path, db: old } = oldDatabase("v4", SCHEMA_V2, SCHEMA_V3_TABLES, SCHEMA_V4_TABLES);
  const now = Date.now();
  const ins = old.prepare("INSERT INTO handles VALUES ('u', ?, ?, '{\"n\":1}', 2, ?, ?, ?, 'w')");
  // 30 handles, two kinds, some expired, some sharing an updated_ms.
  for (let i = 0; i < 30; i++) {
    const expires = i % 7 === 0 ? now - 1000 : null;
    ins.run(
      `n_${String(i).padStart(8, "a")}`,
      i % 3 ? "note" : "todo",
      now - 5000,
      now - (i >> 1),
      expires,
    );
  }
  old.prepare("INSERT INTO changes VALUES ('u', 'n_aaaaaaa1', 2, ?, '{\"version\":2}')").run(now);
  old.prepare("INSERT INTO leases VALUES ('u', 'n_aaaaaaa1', 'w', ?)").run(now + DAY);
  old.close();
  const v4Tables = ["handles", "changes", "trash", "idempotency", "leases"];
  const { layout, before, after, store } = await migrateInPlace(path, v4Tables, v4Tables, 4);
  assert.equal(after.version, 7);
  assert.ok(before.indexes.includes(DROPPED_IN_5) && !after.indexes.includes(DROPPED_IN_5));
  // A listing by kind, page by page, is the filtered unpaged listing, newest first.
  for (const kind of ["note", "todo"]) {
    for (const includeExpired of [false, true]) {
      const all = await store.list("u", { kind, includeExpired });
      const paged = await pagedBy4(store, "u", { kind, includeExpired });
      assert.deepEqual(paged, all.map((h) => h.handle));
      assert.ok(all.every((h) => h.kind === kind));
      const expected = before.rows[0]!;
      const rows = (JSON.parse(expected) as { handle: string; kind: string; expires_ms: number }[])
        .filter((r) => r.kind === kind && (includeExpired || r.expires_ms === null));
      assert.equal(all.length, rows.length);
    }
  }
  const s = await store.save("n_aaaaaaa1", { n: 2 }, { user: "u", expectVersion: 2 });
  assert.equal(s.version, 3);
  const since = await store.changesSince("n_aaaaaaa1", 1, { user: "u" });
  assert.ok(!since.truncated && since.changes.length === 2);
  await store.close();
  await reopenChangesNothing(path, () => layout().schema);
});

/**
 * What schema 5 changed on a schema 4 file, as the previous release wrote
 * it: the listing index by kind dropped, the columns added in place.
 */
const SCHEMA_V5_CHANGES = `
DROP INDEX handles_by_user_kind_updated;
ALTER TABLE handles ADD COLUMN schema_version INTEGER;
ALTER TABLE handles ADD COLUMN forked_from TEXT;
ALTER TABLE handles ADD COLUMN preview TEXT;
ALTER TABLE trash ADD COLUMN schema_version INTEGER;
ALTER TABLE trash ADD COLUMN forked_from TEXT;
ALTER TABLE trash ADD COLUMN preview TEXT;
PRAGMA user_version = 5;
`;

Deno.test("sqlite: a schema 5 database gains the row's log tail in place; its changelog and listing read the same, and its log goes on", async () => {
  const { path, db: old } = oldDatabase(
    "v5",
    SCHEMA_V2,
    SCHEMA_V3_TABLES,
    SCHEMA_V4_TABLES,
    SCHEMA_V5_CHANGES,
  );
  const now = Date.now();
  const ins = old.prepare(
    "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
      "expires_ms, last_writer, preview) VALUES (?, ?, ?, '{\"n\":1}', 3, ?, ?, ?, 'w', 'n: 1')",
  );
  const log = old.prepare("INSERT INTO changes VALUES (?, ?, ?, ?, ?)");
  // Two users, 30 handles each, two kinds, some expired, some sharing an updated_ms.
  for (const user of ["u", "v"]) {
    for (let i = 0; i < 30; i++) {
      const handle = `n_${String(i).padStart(8, "a")}`;
      const expires = i % 7 === 0 ? now - 1000 : null;
      ins.run(user, handle, i % 3 ? "note" : "todo", now - 5000, now - (i >> 1), expires);
      for (const v of [1, 2, 3]) {
        log.run(user, handle, v, now - 5000 + v, JSON.stringify({ version: v, op: "save" }));
      }
    }
  }
  old.prepare(
    "INSERT INTO trash (user, handle, kind, state, version, created_ms, updated_ms, " +
      "expires_ms, last_writer, trashed_until) VALUES ('u', 't_aaaaaaaa', 'note', '{}', 2, ?, ?, " +
      "NULL, NULL, ?)",
  ).run(now - 1000, now - 1000, now + DAY);
  log.run("u", "t_aaaaaaaa", 2, now - 1000, '{"version":2}');
  old.close();
  const v5Tables = ["handles", "changes", "trash", "idempotency", "leases"];
  // The listings before: the unpaged ones, through a connection of the previous layout.
  const { layout, before, after, store } = await migrateInPlace(path, v5Tables, v5Tables, 5);
  assert.equal(SQLITE_SCHEMA_VERSION, 7);
  assert.deepEqual(after.tables, TABLES);
  // Listing: newest first, ties by handle, page by page, for every filter.
  const rows = JSON.parse(before.rows[0]!) as {
    user: string;
    handle: string;
    kind: string;
    updated_ms: number;
    expires_ms: number | null;
  }[];
  for (const user of ["u", "v"]) {
    for (const kind of [undefined, "note", "todo"]) {
      for (const includeExpired of [false, true]) {
        const expected = rows.filter((r) =>
          r.user === user && (kind === undefined || r.kind === kind) &&
          (includeExpired || r.expires_ms === null)
        ).sort((a, b) => b.updated_ms - a.updated_ms || byUtf8(a.handle, b.handle))
          .map((r) => r.handle);
        const paged = await pagedBy4(store, user, { ...(kind ? { kind } : {}), includeExpired });
        assert.deepEqual(paged, expected);
      }
    }
  }
  // The changelog reads as it was, and goes on: new entries in the row, then in the table.
  const h = "n_aaaaaaa1";
  const since = await store.changesSince(h, 0, { user: "u" });
  assert.ok(!since.truncated);
  assert.deepEqual(since.changes.map((c) => c.version), [1, 2, 3]);
  for (let n = 2; n < 40; n++) {
    await store.save(h, { n }, { user: "u", expectVersion: n + 1, writer: `w${n}` });
  }
  const all = await store.changesSince(h, 0, { user: "u" });
  assert.ok(!all.truncated);
  assert.deepEqual(all.changes.map((c) => c.version), Array.from({ length: 41 }, (_, i) => i + 1));
  assert.deepEqual(
    all.changes.slice(3).map((c) => c.writer),
    Array.from({ length: 38 }, (_, i) => `w${i + 2}`),
  );
  const db = new DatabaseSync(path, { readOnly: true });
  const tail = db.prepare("SELECT log_tail FROM handles WHERE user = 'u' AND handle = ?").get(h);
  assert.ok(typeof tail?.log_tail === "string");
  assert.equal(loggedCount(db, "u", h), 41);
  db.close();
  // The trashed record comes back with its log; the other user's log is untouched.
  assert.equal((await store.restore("t_aaaaaaaa", { user: "u" })).version, 2);
  const restored = await store.changesSince("t_aaaaaaaa", 1, { user: "u" });
  assert.ok(!restored.truncated && restored.changes.length === 1);
  const other = await store.changesSince(h, 0, { user: "v" });
  assert.ok(!other.truncated && other.changes.length === 3);
  await store.close();
  integrityOk(path);
  await reopenChangesNothing(path, () => layout().schema);
});

Deno.test("sqlite: leases live in their own table, never touch a record, and are swept once lapsed", async () => {
  const backend = await SqliteBackend.fromUrl(urlOf(freshPath("leases")));
  const db = backend.database;
  const user = freshUser();
  await leasePrimitivesHold(backend, backend, user, {
    rows: () =>
      Promise.resolve(
        db.prepare("SELECT handle, holder, expires_at FROM leases WHERE user = ? ORDER BY handle")
          .all(user).map((r) => `${r.handle} ${r.holder} ${r.expires_at}`),
      ),
    records: () => Promise.resolve(JSON.stringify(db.prepare("SELECT * FROM handles").all())),
  });
  await backend.close();
});

Deno.test("sqlite: listeners hear of every committed write, this object's at once, another connection's by polling", async () => {
  const path = freshPath("feed");
  const a = await SqliteBackend.fromUrl(urlOf(path));
  const b = await SqliteBackend.fromUrl(urlOf(path));
  const user = freshUser();
  const h = SAMPLE.handle;
  let calls = 0, others = 0;
  const off = await a.feed.subscribe(user, h, () => calls++);
  const offOther = await a.feed.subscribe(user, "n_zzzzzzzz", () => others++);
  const heard = async (what: string, write: () => Promise<unknown>, n = 1) => {
    const before = calls;
    await write();
    assert.equal(calls - before, n, what);
  };
  const save: ConditionalWrite = {
    expectVersion: 1,
    state: '{"a":1}',
    updatedAt: 2,
    expiresAt: "keep",
    lastWriter: null,
  };
  const bump = (extra: Partial<HandleRecord> = {}) => (cur: HandleRecord | null) =>
    cur && { record: { ...cur, version: cur.version + 1, ...extra } };
  await heard("insert", () => a.insert(user, SAMPLE, CTX));
  await heard("an insert that collides", () => a.insert(user, SAMPLE, CTX), 0);
  await heard("save", () => a.save(user, h, save, CTX));
  await heard("a stale save", () => a.save(user, h, save, CTX), 0);
  await heard("update", () => a.update(user, h, bump(), CTX));
  await heard("an update that writes nothing", () => a.update(user, h, () => null, CTX), 0);
  await heard("an update that throws", () =>
    a.update(user, h, () => {
      throw new Error("boom");
    }, CTX).catch(() => {}), 0);
  await heard("a lease", () => a.leases.acquire(user, h, { holder: "x", expiresAt: 9e12 }, 0), 0);
  await heard("remove", () => a.remove(user, h, { ...CTX, trashUntil: CTX.now + DAY }));
  await heard("untrash", () => a.untrash(user, h, CTX));
  await heard("restore", () => a.records.import(user, { ...SAMPLE, version: 9 }, CTX));
  await heard(
    "a restore that keeps",
    () => a.records.import(user, { ...SAMPLE, version: 9 }, CTX),
    0,
  );
  await a.update(user, h, bump({ expiresAt: 5 }), CTX);
  await heard("sweep", () => a.sweep(user, 5, CTX.now));
  assert.equal(others, 0);
  // Another connection's commit: within a few polls.
  const seen = calls;
  await b.insert(user, SAMPLE, CTX);
  const deadline = Date.now() + 2000;
  while (calls === seen && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.ok(calls > seen, "another connection's write was not heard of");
  // Once the last listener is gone nothing is heard; a new one hears again.
  off();
  off();
  offOther();
  const quiet = calls;
  await b.remove(user, h, CTX);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(calls, quiet);
  let later = 0;
  const offLater = await a.feed.subscribe(user, h, () => later++);
  await b.insert(user, SAMPLE, CTX);
  const until = Date.now() + 2000;
  while (later === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  assert.ok(later > 0, "a new listener heard nothing");
  offLater();
  await a.close();
  await b.close();
  await rejectsWith(() => a.feed.subscribe(user, h, () => {}), "backend_error");
});

Deno.test("sqlite: processes creating one new file at the same moment all open it", async () => {
  await createAtOnce(Array.from({ length: 20 }, (_, k) => urlOf(`${dir}/race-${k}.db`)), 100);
});

/** Handles and UTF-8 bytes of a user's live rows, read from the file itself. */
function rowsUsage(path: string, user: string): { handles: number; bytes: number } {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const states = db.prepare("SELECT state FROM handles WHERE user = ?").all(user)
      .map((r) => r.state as string);
    const bytes = states.reduce((n, s) => n + new TextEncoder().encode(s).length, 0);
    return { handles: states.length, bytes };
  } finally {
    db.close();
  }
}

Deno.test("sqlite: usage of a file written before quotas is counted from its rows, and kept by every writer, an older release included", async () => {
  const path = freshPath("quota-v02");
  makePythonV02Database(path);
  const users = [...new Set(SAMPLE_ROWS.map((r) => r.user))];
  const clock = new FakeClock(SAMPLE_NOW_S * 1000);
  let store = await HandleStore.fromUrl(urlOf(path), {
    clock: clock.fn,
    reclaimIntervalMs: 0,
    quotas: { maxHandles: 100 },
  });
  for (const user of users) {
    const u = await store.usage(user);
    assert.deepEqual({ handles: u.handles, bytes: u.bytes }, rowsUsage(path, user), user);
  }
  const user = users[0]!;
  await store.mint("note", { text: "after" }, { user });
  assert.deepEqual(
    { ...(await store.usage(user)), writesThisMinute: 0 },
    { ...rowsUsage(path, user), writesThisMinute: 0 },
  );
  // A writer that knows nothing of usage (an older release, a hand-made
  // change) changes rows directly: the triggers keep the usage right.
  const raw = new DatabaseSync(path);
  raw.exec("PRAGMA busy_timeout = 5000");
  raw.prepare(
    "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, expires_ms, " +
      "last_writer) VALUES (?, 'note_raw22222', 'note', '{\"ü\":1}', 1, 0, 0, NULL, NULL)",
  ).run(user);
  raw.prepare("UPDATE handles SET state = '{}' WHERE user = ? AND handle <> 'note_raw22222'")
    .run(user);
  assert.deepEqual((await store.usage(user)).bytes, rowsUsage(path, user).bytes);
  assert.equal((await store.usage(user)).handles, rowsUsage(path, user).handles);
  // A release without the triggers writes: reopening finds them missing,
  // recreates them and counts every user again.
  await store.close();
  raw.exec("DROP TRIGGER usage_after_insert");
  raw.prepare("DELETE FROM handles WHERE user = ? AND handle = 'note_raw22222'").run(user);
  raw.close();
  store = await HandleStore.fromUrl(urlOf(path), { clock: clock.fn, reclaimIntervalMs: 0 });
  const u = await store.usage(user);
  assert.deepEqual({ handles: u.handles, bytes: u.bytes }, rowsUsage(path, user));
  await store.close();
});

Deno.test("sqlite: a changelog tail appended without parsing it is the text a fresh parse writes", async () => {
  // The same writes on two files: one store for all of them (it appends to
  // the tails it computed), and a new store for each write (it parses).
  const clock = new FakeClock();
  const options = {
    reclaimIntervalMs: 0,
    clock: clock.fn,
    history: { maxEntries: 12, maxAgeDays: 1 },
  };
  const [kept, fresh] = [freshPath("tail-kept"), freshPath("tail-fresh")];
  const each = async <T>(fn: (s: HandleStore) => Promise<T>) => {
    const s = await HandleStore.fromUrl(urlOf(fresh), options);
    try {
      return await fn(s);
    } finally {
      await s.close();
    }
  };
  const dump = (path: string, handle: string) => {
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const row = db.prepare("SELECT log_tail FROM handles WHERE handle = ?").get(handle);
      const keyed = db.prepare("SELECT version, at, text FROM changes WHERE handle = ? ORDER BY 1")
        .all(handle);
      return { tail: row?.log_tail ?? null, keyed: JSON.stringify(keyed) };
    } finally {
      db.close();
    }
  };
  // Handles are random: each file has its own, written the same.
  const a = await HandleStore.fromUrl(urlOf(kept), options);
  const ha = await a.mint("n", { notes: "é".repeat(200), n: 0 }, { user: "u", writer: "w" });
  const hb = await each((s) =>
    s.mint("n", { notes: "é".repeat(200), n: 0 }, { user: "u", writer: "w" })
  );
  for (let i = 1; i <= 60; i++) {
    // Growing and shrinking states spill the tail now and then; the clock
    // jumps past the age limit twice, so that floors hide older entries.
    clock.advance(i === 20 || i === 45 ? 2 * DAY : 1000);
    const state = { notes: "é".repeat(200 + (i % 7) * 150), n: i, tag: `t${i % 3}` };
    if (i % 4 === 0) {
      const ops = [Append("log", `entry ${i} "quoted" \\ back`), Increment("", "n")];
      await a.patch(ha, ops, { user: "u" });
      await each((s) => s.patch(hb, ops, { user: "u" }));
    } else {
      await a.save(ha, state, { user: "u", expectVersion: i });
      await each((s) => s.save(hb, state, { user: "u", expectVersion: i }));
    }
    const x = dump(kept, ha), y = dump(fresh, hb);
    assert.equal(x.tail, y.tail, `tail after write ${i}`);
    assert.equal(x.keyed, y.keyed, `keyed entries after write ${i}`);
  }
  await a.close();
});
