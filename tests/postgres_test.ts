/**
 * The PostgreSQL backend against a real server: the contract suite (through a
 * URL, with its cross-process steps, and through an injected client),
 * byte-exact states, index-only listing that leaves trashed rows out, the
 * changelog, trash and lease rows themselves, the change feed (NOTIFY),
 * instances migrating one schema at once, version-1 and version-2 schemas
 * migrated in place, clear errors when the server is away, and — last,
 * because they briefly take the server down — restarts in the middle of a
 * write loop and of a watch. After every crash the changelog must match the
 * state: no write without its entry, no entry without its write.
 *
 * The server is `postgres://postgres@127.0.0.1:5432/test` unless
 * `MCPSTATE_TEST_POSTGRES_URL` names another. Every test works in its own
 * schema (random name, dropped at the end). Without a reachable server these
 * tests fail; they never skip.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { Append, HandleStore, Increment, McpStateError, SetKey } from "../mod.ts";
import { openBackend } from "../src/url.ts";
import type { HandleRecord, WriteContext } from "../src/backend.ts";
import { POSTGRES_SCHEMA_VERSION, PostgresBackend } from "../src/backends/postgres.ts";
import { DAY, freshUser, recordOf, rejectsWith, sleep, within } from "./_helpers.ts";
import { backendContract } from "./contract/mod.ts";
import { leasePrimitivesHold } from "./contract/leases.ts";

const BASE_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";

/** A schema name no other test (or test run) uses. */
function schemaName(tag: string): string {
  return `mcpstate_test_${tag}_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

/** The test server's URL with `schema` (and optionally a password). */
function urlFor(schema: string, options: { password?: string } = {}): string {
  const url = new URL(BASE_URL);
  if (options.password) url.password = options.password;
  url.searchParams.set("schema", schema);
  return url.toString();
}

/** A small client of our own, for setup and inspection. */
function admin(): postgres.Sql {
  return postgres(BASE_URL, { max: 2, onnotice: () => {}, connect_timeout: 5 });
}

async function dropSchema(schema: string): Promise<void> {
  const sql = admin();
  try {
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await sql.end();
  }
}

/**
 * Asserts that the handle's changelog is whole and matches its state: the
 * last `maxEntries` (default 100) entries are there, one per version, and
 * every patch entry appended what `log` holds at that position. For handles
 * minted with `{ log: [] }` (plus anything else) and then only patched.
 */
async function assertLogMatches(store: HandleStore, user: string, handle: string): Promise<void> {
  const s = await store.get<{ log: string[] }>(handle, { user });
  const after = Math.max(0, s.version - 100);
  const r = await store.changesSince(handle, after, { user });
  assert.ok(!r.truncated, `the changelog of ${handle} has a hole before version ${s.version}`);
  if (r.truncated) return;
  assert.deepEqual(
    r.changes.map((c) => c.version),
    Array.from({ length: s.version - after }, (_, i) => after + 1 + i),
  );
  for (const c of r.changes) {
    if (c.version === 1) {
      assert.equal(c.op, "mint");
      continue;
    }
    assert.equal(c.op, "patch");
    const append = (c.ops as { op: string; value?: unknown }[]).find((o) => o.op === "append");
    assert.equal(append?.value, s.state.log[c.version - 2], `entry ${c.version} is not the write`);
  }
  assert.equal(s.version, s.state.log.length + 1);
}

async function waitFor(what: string, ok: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!ok()) {
    if (performance.now() > deadline) {
      assert.fail(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(20);
  }
}

Deno.test("PostgreSQL is reachable (these tests fail without it; they never skip)", async () => {
  const sql = admin();
  let version = 0;
  try {
    const [row] = await sql`select current_setting('server_version_num')::int as v`;
    version = Number(row?.v);
  } catch (e) {
    assert.fail(
      `PostgreSQL at ${
        new URL(BASE_URL).host
      } is not reachable (${e}). Start it (or set MCPSTATE_TEST_POSTGRES_URL) and run the tests again.`,
    );
  } finally {
    await sql.end();
  }
  assert.ok(version >= 110000, `PostgreSQL 11 or newer is needed (found ${version})`);
});

// The contract through a URL, as `HandleStore.fromUrl` users get it: every
// store the suite opens is a new pool on the same schema.
const contractSchema = schemaName("contract");
Deno.test("contract: postgres", (t) =>
  backendContract(t, {
    open: () => openBackend(urlFor(contractSchema)),
    url: urlFor(contractSchema),
  }));
Deno.test("contract: postgres (drop its schema)", () => dropSchema(contractSchema));

// The contract through one injected client whose configuration would break a
// backend that trusted column names or the driver's number parsing: int8 as
// BigInt, camelCase column transforms.
const injectedSchema = schemaName("injected");
const injected = postgres(BASE_URL, {
  onnotice: () => {},
  types: { bigint: postgres.BigInt },
  transform: postgres.camel,
});
Deno.test("contract: postgres, injected client", (t) =>
  backendContract(t, {
    open: () => Promise.resolve(new PostgresBackend(injected, { schema: injectedSchema })),
  }));
Deno.test("contract: postgres, injected client (end it, drop its schema)", async () => {
  await injected.end();
  await dropSchema(injectedSchema);
});

Deno.test("the state column is text and keeps every byte; times and versions are numbers", async () => {
  const schema = schemaName("bytes");
  const backend = await PostgresBackend.fromUrl(urlFor(schema));
  const sql = admin();
  try {
    // Not what the store would write (it stringifies compactly), but a backend
    // must not care: key order, number spellings, escapes and odd keys stay.
    const text = '{"z":1,"a":{"__proto__":{"x":1e308}},"constructor":[],"n":"a\\u0000b",' +
      '"s":"\\ud800x\\udfff","t":5e-324,"k":1.0E+2,"e":"\\u00e9é\u{1F600}","":0,"d":-0.0}';
    const now = Date.UTC(2300, 0, 1); // epoch ms far beyond int4: bigint all the way
    const record: HandleRecord = {
      handle: "rt_aaaaaaaa",
      kind: "rt",
      state: text,
      version: 1,
      createdAt: now,
      updatedAt: now,
      expiresAt: now + 7 * DAY,
      lastWriter: "w/é",
    };
    const ctx: WriteContext = { now, graceMs: 0 };
    assert.deepEqual(await backend.insert("u", record, ctx), { inserted: true });
    assert.deepEqual(await backend.insert("u", { ...record, state: "{}" }, ctx), {
      inserted: false,
    });
    const back = await backend.read("u", record.handle);
    assert.deepEqual(back, record);
    for (const n of [back!.version, back!.createdAt, back!.updatedAt, back!.expiresAt]) {
      assert.equal(typeof n, "number");
    }
    const [raw] = await sql.unsafe(
      `SELECT state, pg_typeof(state)::text AS type, octet_length(state) AS bytes
       FROM "${schema}".handles WHERE handle = $1`,
      [record.handle],
    );
    assert.equal(raw?.type, "text");
    assert.equal(raw?.state, text);
    assert.equal(raw?.bytes, new TextEncoder().encode(text).length);

    // An idempotent save remembers its result as JSON; the replay must give the
    // same text back too.
    const idem: WriteContext = {
      now,
      graceMs: 0,
      idempotency: { key: "k", scope: record.handle, fingerprint: "f", expiresAt: now + DAY },
    };
    const write = {
      expectVersion: 1,
      state: text.replace('"z":1', '"z":2'),
      updatedAt: now + 1,
      expiresAt: "keep" as const,
      lastWriter: null,
    };
    const first = await backend.save("u", record.handle, write, idem);
    assert.ok("ok" in first && first.ok);
    const again = await backend.save("u", record.handle, write, idem);
    assert.ok("replayed" in again);
    assert.deepEqual(again.result, first.record);
    assert.equal(again.result?.state, write.state);
    assert.equal(again.result?.expiresAt, record.expiresAt);
  } finally {
    await backend.close();
    await sql.end();
    await dropSchema(schema);
  }
});

Deno.test("listing is an index-only scan of (user_id, updated_at) and never reads a state", async () => {
  const schema = schemaName("list");
  const sent: { query: string; params: unknown[] }[] = [];
  const sql = postgres(BASE_URL, {
    max: 2,
    onnotice: () => {},
    debug: (_conn, query, params) => sent.push({ query, params }),
  });
  const store = new HandleStore(new PostgresBackend(sql, { schema }));
  try {
    const user = freshUser();
    await store.mint("seed", {}, { user }); // creates the tables
    await sql.unsafe(
      `INSERT INTO "${schema}".handles
         (user_id, handle, kind, state, version, created_at, updated_at, expires_at, last_writer)
       SELECT 'other-' || (g % 50), 'k_' || g, CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END,
              '{"pad":"' || repeat(md5(g::text), 100) || '"}', 1, g, g,
              CASE WHEN g % 3 = 0 THEN g + 1000 END, NULL
       FROM generate_series(1, 20000) AS g`,
    );
    // Trash the newest rows of every user: listing must not see them.
    await sql.unsafe(
      `UPDATE "${schema}".handles SET trashed_until = 9e15 WHERE user_id LIKE 'other-%' AND updated_at > 19000`,
    );
    await sql.unsafe(`VACUUM ANALYZE "${schema}".handles`);
    sent.length = 0;
    const page = await store.listPage("other-7", { limit: 5, kind: "odd" });
    assert.equal(page.handles.length, 5);
    // The newest live, unexpired, untrashed rows of other-7 (g % 50 = 7, all odd).
    const want = [];
    for (let g = 19000; want.length < 5; g--) if (g % 50 === 7 && g % 3 !== 0) want.push(`k_${g}`);
    assert.deepEqual(page.handles.map((h) => h.handle), want);
    await store.listPage("other-7", { limit: 5, kind: "odd", cursor: page.nextCursor });
    // 400 rows, 20 of them (g > 19000) trashed.
    assert.equal((await store.list("other-8", { includeExpired: true })).length, 380);
    // With previews: the preview comes from the row, whose state lives out of line.
    const previewed = await store.listPage("other-7", { limit: 5, kind: "odd", previews: true });
    assert.deepEqual(previewed.handles.map((h) => h.handle), want);
    const lists = sent.filter((s) => /ORDER BY updated_at/.test(s.query));
    assert.equal(lists.length, 4);
    const withPreviews = lists.pop()!;
    assert.match(withPreviews.query, /\bpreview\b/);
    assert.doesNotMatch(withPreviews.query, /\bstate\b/, "a listing query names the state column");
    for (const { query, params } of lists) {
      assert.doesNotMatch(query, /\bstate\b/, "a listing query names the state column");
      const [row] = await sql.unsafe(`EXPLAIN (FORMAT JSON) ${query}`, params as never[]);
      const plan = JSON.stringify(row);
      assert.match(plan, /"Index Only Scan"/, plan);
      assert.match(plan, /"handles_user_updated"/, plan);
      assert.doesNotMatch(plan, /"Sort"/, plan);
    }
  } finally {
    await store.close();
    await sql.end();
    await dropSchema(schema);
  }
});

Deno.test("the changelog and the trash in the tables: entries live and die with their row", async () => {
  const schema = schemaName("trash");
  const backend = await PostgresBackend.fromUrl(urlFor(schema));
  const sql = admin();
  let now = Date.UTC(2026, 6, 28, 12);
  const clock = () => now;
  const store = new HandleStore(backend, {
    clock,
    history: { maxEntries: 3, maxAgeDays: 30 },
    reclaimIntervalMs: 0,
  });
  const deleting = new HandleStore(backend, { clock, trashDays: 0, reclaimIntervalMs: 0 });
  const t = `"${schema}"`;
  /** The versions of a handle's changelog rows, trashed or not. */
  const logOf = async (handle: string) =>
    (await sql.unsafe(
      `SELECT version FROM ${t}.changes WHERE handle = $1 ORDER BY version`,
      [handle],
    )).map((r) => Number(r.version));
  const rowOf = async (handle: string) =>
    (await sql.unsafe(`SELECT version, trashed_until FROM ${t}.handles WHERE handle = $1`, [
      handle,
    ]))[0];
  const usersOf = async () => await backend.records.users({ limit: 1000 });
  try {
    const user = freshUser();
    const h = await store.mint("doc", { log: [] }, { user });
    for (let i = 0; i < 4; i++) await store.patch(h, [Append("log", `p${i}`)], { user });
    // Retention trims the table itself, in the write's transaction.
    assert.deepEqual(await logOf(h), [3, 4, 5]);

    // Into the trash: the row stays with its changelog, out of every live query.
    await store.revoke(h, { user });
    assert.equal(Number((await rowOf(h))?.trashed_until), now + 7 * DAY);
    assert.deepEqual(await logOf(h), [3, 4, 5]);
    assert.equal(await backend.read(user, h), null);
    assert.deepEqual(await backend.list(user, { limit: 10 }), []);
    assert.deepEqual(await backend.changes(user, h, 0), []);
    assert.ok(!(await usersOf()).includes(user), "a user with only trashed rows is listed");
    assert.deepEqual(await backend.remove(user, h, { now, graceMs: 0, trashUntil: now + DAY }), {
      removed: false,
    });
    const seen: unknown[] = [];
    const none = await backend.update(user, h, (cur) => (seen.push(cur), null), {
      now,
      graceMs: 0,
    });
    assert.deepEqual([seen, none], [[null], { record: null, written: false }]);
    assert.deepEqual(await store.restore(h, { user }), await store.get(h, { user }));
    // Back, unchanged, with its changelog.
    assert.equal((await rowOf(h))?.trashed_until, null);
    assert.deepEqual((await backend.changes(user, h, 3)).map((e) => e.version), [4, 5]);
    assert.ok((await usersOf()).includes(user));

    // A trashed handle cannot be minted again.
    const rec = (await backend.read(user, h))!;
    await store.revoke(h, { user });
    assert.deepEqual(
      await backend.insert(user, { ...rec, version: 1 }, {
        now,
        graceMs: 0,
        entry: { version: 1, at: now, text: "{}" },
      }),
      { inserted: false },
    );
    assert.deepEqual(await logOf(h), [3, 4, 5]);

    // Past the undo window sweep deletes the row and its changelog; it counts
    // only live records. An expired record goes with its changelog too.
    const e = await store.mint("doc", { log: [] }, { user, ttlDays: 1 });
    await store.patch(e, [Append("log", "x")], { user });
    now += 8 * DAY;
    assert.equal(await backend.sweep(user, now, now), 1);
    assert.equal(await rowOf(h), undefined);
    assert.equal(await rowOf(e), undefined);
    assert.deepEqual([await logOf(h), await logOf(e)], [[], []]);

    // A revoke without trash deletes the changelog with the row.
    const d = await store.mint("doc", { log: [] }, { user });
    await store.patch(d, [Append("log", "x")], { user });
    await deleting.revoke(d, { user });
    assert.deepEqual([await rowOf(d), await logOf(d)], [undefined, []]);

    // A raw restore over a trashed row takes its place ("inserted": no live
    // record was there); over an older live one it replaces it. Either way the
    // old changelog goes.
    const r = await store.mint("doc", { log: [] }, { user });
    await store.patch(r, [Append("log", "x")], { user });
    const cur = (await backend.read(user, r))!;
    await store.revoke(r, { user });
    const ctx = { now, graceMs: 0 };
    assert.equal(await backend.records.import(user, { ...cur, version: 1 }, ctx), "inserted");
    assert.deepEqual([(await rowOf(r))?.trashed_until, await logOf(r)], [null, []]);
    await store.patch(r, [Append("log", "y")], { user });
    assert.deepEqual(await logOf(r), [2]);
    assert.equal(await backend.records.import(user, { ...cur, version: 9 }, ctx), "replaced");
    assert.deepEqual(await logOf(r), []);
    assert.equal(await backend.records.import(user, { ...cur, version: 9 }, ctx), "kept");

    // A revoke racing writers on the handle leaves no entry behind: whatever
    // the writers committed before the row went, its changelog went with it.
    for (let round = 0; round < 4; round++) {
      const x = await store.mint("race", { log: [] }, { user });
      const writers = Array.from({ length: 6 }, async (_, w) => {
        for (let i = 0; i < 20; i++) {
          try {
            await store.patch(x, [Append("log", `${w}:${i}`)], { user });
          } catch (err) {
            if (err instanceof McpStateError && err.code === "handle_not_found") return;
            throw err;
          }
        }
      });
      await sleep(round * 3);
      await deleting.revoke(x, { user });
      await Promise.all(writers);
      assert.deepEqual([await rowOf(x), await logOf(x)], [undefined, []]);
    }
    const [orphans] = await sql.unsafe(
      `SELECT count(*)::int AS n FROM ${t}.changes c
       WHERE NOT EXISTS (SELECT 1 FROM ${t}.handles h
                         WHERE h.user_id = c.user_id AND h.handle = c.handle)`,
    );
    assert.equal(orphans?.n, 0);
  } finally {
    await store.close();
    await deleting.close();
    await backend.close();
    await sql.end();
    await dropSchema(schema);
  }
});

Deno.test("8 instances migrating one schema at the same moment all succeed, at one schema version", async () => {
  const schema = schemaName("migrate");
  const url = urlFor(schema).replace(/^postgres:/, "postgresql:");
  const sql = admin();
  const backends: PostgresBackend[] = [];
  try {
    const opened = await Promise.allSettled(
      Array.from({ length: 8 }, () => PostgresBackend.fromUrl(url)),
    );
    for (const r of opened) if (r.status === "fulfilled") backends.push(r.value);
    for (const r of opened) {
      if (r.status === "rejected") assert.fail(`an instance failed to migrate: ${r.reason}`);
    }
    const meta = await sql.unsafe(`SELECT key, value FROM "${schema}".meta ORDER BY key`);
    assert.deepEqual(meta.map((r) => [r.key, r.value]), [
      ["schema_version", String(POSTGRES_SCHEMA_VERSION)],
    ]);
    const tables = await sql.unsafe(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`,
      [schema],
    );
    assert.deepEqual(tables.map((r) => r.table_name), [
      "changes",
      "data_keys",
      "grants",
      "handles",
      "idempotency",
      "leases",
      "meta",
      "usage",
    ]);
    // Every instance works on the same tables.
    const user = freshUser();
    const a = new HandleStore(backends[0]!), b = new HandleStore(backends[7]!);
    const h = await a.mint("m", { x: 1 }, { user });
    await b.patch(h, [SetKey("", "y", 2)], { user });
    assert.deepEqual((await a.get(h, { user })).state, { x: 1, y: 2 });
    // A schema written by a newer mcpstate is refused, not downgraded.
    await sql.unsafe(`UPDATE "${schema}".meta SET value = '99' WHERE key = 'schema_version'`);
    const e = await rejectsWith(() => HandleStore.fromUrl(url), "backend_error");
    assert.match(e.message, /version 99, newer than this mcpstate understands/);
    assert.deepEqual((await b.get(h, { user })).state, { x: 1, y: 2 });
  } finally {
    for (const backend of backends) await backend.close();
    await sql.end();
    await dropSchema(schema);
  }
});

Deno.test("a version-1 schema with data is migrated in place: rows kept, history and trash work on them", async () => {
  const schema = schemaName("v1");
  const s = `"${schema}"`;
  const sql = admin();
  let store: HandleStore | undefined;
  try {
    // The layout version 1 created, as deployments have it.
    await sql.unsafe(`CREATE SCHEMA ${s}`);
    for (
      const statement of [
        `CREATE TABLE ${s}.meta (key text PRIMARY KEY, value text NOT NULL)`,
        `INSERT INTO ${s}.meta VALUES ('schema_version', '1')`,
        `CREATE TABLE ${s}.handles (
           user_id text COLLATE "C" NOT NULL, handle text COLLATE "C" NOT NULL,
           kind text NOT NULL, state text NOT NULL, version bigint NOT NULL,
           created_at bigint NOT NULL, updated_at bigint NOT NULL, expires_at bigint,
           last_writer text, PRIMARY KEY (user_id, handle))`,
        `CREATE INDEX handles_user_updated ON ${s}.handles (user_id, updated_at DESC, handle)
           INCLUDE (kind, version, created_at, expires_at, last_writer)`,
        `CREATE INDEX handles_expires ON ${s}.handles (expires_at) WHERE expires_at IS NOT NULL`,
        `CREATE TABLE ${s}.idempotency (
           user_id text COLLATE "C" NOT NULL, scope text COLLATE "C" NOT NULL,
           key text COLLATE "C" NOT NULL, fingerprint text NOT NULL, result text,
           expires_at bigint NOT NULL, PRIMARY KEY (user_id, scope, key))`,
        `CREATE INDEX idempotency_expires ON ${s}.idempotency (expires_at)`,
        `INSERT INTO ${s}.handles VALUES
           ('old-user', 'doc_aaaaaaaa', 'doc', '{"log":["a","b"]}', 3, 1000, 3000, NULL, 'w'),
           ('old-user', 'doc_bbbbbbbb', 'doc', '{"log":[]}', 1, 2000, 2000, NULL, NULL)`,
      ]
    ) await sql.unsafe(statement);
    store = await HandleStore.fromUrl(urlFor(schema));
    const [meta] = await sql.unsafe(`SELECT value FROM ${s}.meta WHERE key = 'schema_version'`);
    assert.equal(meta?.value, String(POSTGRES_SCHEMA_VERSION));
    const [index] = await sql.unsafe(
      `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'handles_user_updated'`,
      [schema],
    );
    assert.match(String(index?.indexdef), /WHERE \(trashed_until IS NULL\)/);

    const user = "old-user", a = "doc_aaaaaaaa", b = "doc_bbbbbbbb";
    const before = await store.get<{ log: string[] }>(a, { user });
    assert.deepEqual([before.version, before.state], [3, { log: ["a", "b"] }]);
    // Writes from before the changelog existed are not in it: truncated, with
    // the snapshot; new writes are.
    assert.equal((await store.changesSince(a, 1, { user })).truncated, true);
    await store.patch(a, [Append("log", "c")], { user, writer: "new" });
    const since = await store.changesSince(a, 3, { user });
    assert.ok(!since.truncated);
    if (!since.truncated) {
      assert.deepEqual(since.changes.map((c) => [c.version, c.op, c.writer]), [[
        4,
        "patch",
        "new",
      ]]);
    }
    assert.deepEqual((await store.list(user)).map((h) => h.handle), [a, b]);
    await store.revoke(b, { user });
    assert.deepEqual((await store.list(user)).map((h) => h.handle), [a]);
    assert.equal((await store.restore(b, { user })).version, 1);
    assert.deepEqual((await store.list(user)).map((h) => h.handle), [a, b]);
    // Usage is counted from the rows written before quotas existed, then kept
    // by quota-checked writes and by a writer that knows nothing of usage.
    await using limited = await HandleStore.fromUrl(urlFor(schema), { quotas: { maxHandles: 3 } });
    const bytes = (...states: unknown[]) =>
      states.reduce((n: number, x) => n + new TextEncoder().encode(JSON.stringify(x)).length, 0);
    assert.deepEqual(await limited.usage(user), {
      handles: 2,
      bytes: bytes({ log: ["a", "b", "c"] }, { log: [] }),
      writesThisMinute: 0,
    });
    await limited.mint("doc", { log: ["ü"] }, { user });
    await sql.unsafe(`DELETE FROM ${s}.handles WHERE user_id = $1 AND handle = $2`, [user, b]);
    await limited.mint("doc", {}, { user });
    await rejectsWith(() => limited.mint("doc", {}, { user }), "quota_exceeded");
    const u = await limited.usage(user);
    assert.equal(u.handles, 3);
    assert.equal(u.bytes, bytes({ log: ["a", "b", "c"] }, { log: ["ü"] }, {}));
  } finally {
    await store?.close();
    await sql.end();
    await dropSchema(schema);
  }
});

Deno.test("an unreachable server is a prompt backend_error, and no message shows the password", async () => {
  const secret = "pw-unreachable-s3cret";
  const started = performance.now();
  const e = await rejectsWith(
    () => HandleStore.fromUrl(`postgres://mcp:${secret}@127.0.0.1:1/test?connect_timeout=2`),
    "backend_error",
  );
  assert.ok(performance.now() - started < 5_000, "the failure took too long");
  assert.match(e.message, /PostgreSQL/);
  assert.match(e.message, /ECONNREFUSED/);
  assert.ok(!JSON.stringify(e.toPayload()).includes(secret));
  assert.ok(!String(e.stack).includes(secret));

  for (
    const [url, field] of [
      [`postgres://mcp:${secret}@[::1/test`, "backend"],
      [`postgres://mcp:${secret}@127.0.0.1/test?schema=1-bad`, "schema"],
      [`postgres://mcp:${secret}@127.0.0.1/test?schema=${"x".repeat(64)}`, "schema"],
    ]
  ) {
    const bad = await rejectsWith(() => HandleStore.fromUrl(url), "invalid_argument");
    assert.equal(bad.details.field, field);
    assert.ok(!JSON.stringify(bad.toPayload()).includes(secret), bad.message);
  }
  assert.throws(
    () => new PostgresBackend(postgres(BASE_URL), { schema: 'x"; drop table y; --' }),
    (err: unknown) => err instanceof McpStateError && err.code === "invalid_argument",
  );
});

/**
 * Runs `body` on a schema of its own (dropped after): `s` its quoted name,
 * `sql` an admin connection, `open` a new store on it (closed after).
 */
async function ownSchema(
  tag: string,
  body: (s: string, sql: postgres.Sql, open: () => Promise<HandleStore>) => Promise<void>,
): Promise<void> {
  const schema = schemaName(tag);
  const sql = admin();
  const stores: HandleStore[] = [];
  const open = async () => {
    const store = await HandleStore.fromUrl(urlFor(schema));
    stores.push(store);
    return store;
  };
  try {
    await body(`"${schema}"`, sql, open);
  } finally {
    for (const store of stores) await store.close();
    await sql.end();
    await dropSchema(schema);
  }
}

Deno.test("a version-2 schema gains the leases table in place, its rows kept", () =>
  ownSchema("v2", async (s, sql, open) => {
    let store = await open();
    const user = freshUser();
    const h = await store.mint("doc", { log: ["a"] }, { user, writer: "w" });
    await store.close();
    // Back to the layout of version 2.
    await sql.unsafe(`DROP TABLE ${s}.leases`);
    await sql.unsafe(`UPDATE ${s}.meta SET value = '2' WHERE key = 'schema_version'`);
    const rows = async () => JSON.stringify(await sql.unsafe(`SELECT * FROM ${s}.handles`));
    const before = await rows();
    store = await open();
    const [meta] = await sql.unsafe(`SELECT value FROM ${s}.meta WHERE key = 'schema_version'`);
    assert.equal(meta?.value, String(POSTGRES_SCHEMA_VERSION));
    assert.equal(POSTGRES_SCHEMA_VERSION, 3);
    assert.equal(await rows(), before);
    assert.equal((await store.lease(h, { user, writer: "x", seconds: 60 })).acquired, true);
    const snap = await store.get(h, { user });
    assert.deepEqual([snap.version, snap.lastWriter, snap.activeLease?.holder], [1, "w", "x"]);
    assert.equal(await rows(), before, "a lease changed a record");
  }));

Deno.test("a kept idempotency result carries its handle, a column added in place to older schemas", () =>
  ownSchema("idemhandle", async (s, sql, open) => {
    await (await open()).close();
    await sql.unsafe(`ALTER TABLE ${s}.idempotency DROP COLUMN handle`);
    const store = await open();
    const user = freshUser();
    const h = await store.mint("doc", { a: 1 }, { user, idempotencyKey: "k1" });
    await store.patch(h, [SetKey("", "a", 2)], { user, idempotencyKey: "k2" });
    const rows = await sql.unsafe(
      `SELECT key, handle FROM ${s}.idempotency WHERE user_id = $1 ORDER BY key`,
      [user],
    );
    assert.deepEqual(rows.map((r) => [r.key, r.handle]), [["k1", h], ["k2", h]]);
  }));

Deno.test("leases: one row beside the record, one holder at a time even in a race, swept once lapsed", async () => {
  const schema = schemaName("leases");
  const [a, b] = await Promise.all([
    PostgresBackend.fromUrl(urlFor(schema)),
    PostgresBackend.fromUrl(urlFor(schema)),
  ]);
  const sql = admin();
  try {
    const user = freshUser();
    const records = async () =>
      JSON.stringify(await sql.unsafe(`SELECT * FROM "${schema}".handles ORDER BY handle`));
    await leasePrimitivesHold(a, b, user, {
      rows: async () =>
        (await sql.unsafe(
          `SELECT handle, holder, expires_at FROM "${schema}".leases WHERE user_id = $1 ORDER BY 1`,
          [user],
        )).map((r) => `${r.handle} ${r.holder} ${r.expires_at}`),
      records,
    });
    const before = await records();
    // Twenty holders through two pools race for fresh leases and for lapsed
    // ones: one wins each round, and every other is told who.
    for (let round = 0; round < 6; round++) {
      const handle = `n_race${round % 3}`;
      const now = 10_000 * (round + 1);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? a : b).leases.acquire(user, handle, {
            holder: `r${round}:${i}`,
            expiresAt: now + 5_000,
          }, now)),
      );
      const winners = answers.filter((x) => x.acquired);
      assert.equal(winners.length, 1, `round ${round}: ${JSON.stringify(answers)}`);
      for (const x of answers) assert.deepEqual(x.lease, winners[0]!.lease);
    }
    assert.equal(await records(), before, "a lease changed a record");
  } finally {
    await a.close();
    await b.close();
    await sql.end();
    await dropSchema(schema);
  }
});

Deno.test("the change feed: every write is heard at commit by each instance on the schema, by none elsewhere", async () => {
  // 63 characters: the channel names are cut and hashed, and still differ.
  const base = schemaName("feed");
  const schema = base.padEnd(63, "x"), elsewhere = base.padEnd(62, "x") + "y";
  const [a, b, c] = await Promise.all([
    PostgresBackend.fromUrl(urlFor(schema)),
    PostgresBackend.fromUrl(urlFor(schema)),
    PostgresBackend.fromUrl(urlFor(elsewhere)),
  ]);
  try {
    const user = freshUser();
    const h = "n_aaaaaaaa";
    let calls = 0, strays = 0;
    const offs = await Promise.all([
      a.feed.subscribe(user, h, () => calls++),
      c.feed.subscribe(user, h, () => strays++),
    ]);
    const heard = async (what: string, write: () => Promise<unknown>) => {
      const before = calls;
      await write();
      await waitFor(what, () => calls > before, 5_000);
    };
    const now = Date.now();
    const ctx: WriteContext = { now, graceMs: 0 };
    const idem = (key: string): WriteContext => ({
      ...ctx,
      idempotency: { key, scope: h, fingerprint: "f", expiresAt: now + DAY },
    });
    const record = recordOf(h, { createdAt: now, updatedAt: now });
    const bump = (extra: Partial<HandleRecord> = {}) => (cur: HandleRecord | null) =>
      cur && {
        record: { ...cur, version: cur.version + 1, ...extra },
        entry: { version: cur.version + 1, at: now, text: "{}" },
      };
    const write = {
      expectVersion: 1,
      state: '{"a":1}',
      updatedAt: now,
      expiresAt: "keep" as const,
      lastWriter: null,
    };
    // Through the listening instance and through another one: NOTIFY reaches
    // the listening session whichever session wrote.
    await heard("insert", () => b.insert(user, record, ctx));
    await heard("save", () => a.save(user, h, write, ctx));
    await heard(
      "idempotent save",
      () => b.save(user, h, { ...write, expectVersion: 2 }, idem("s")),
    );
    await heard("update", () => a.update(user, h, bump(), ctx));
    await heard("idempotent update", () => b.update(user, h, bump(), idem("u")));
    await heard(
      "remove into the trash",
      () => a.remove(user, h, { ...ctx, trashUntil: now + DAY }),
    );
    await heard("untrash", () => b.untrash(user, h, ctx));
    await heard("restore", () => a.records.import(user, { ...record, version: 9 }, ctx));
    await heard("update to an expiry", () => b.update(user, h, bump({ expiresAt: now }), ctx));
    await heard("sweep", () => a.sweep(user, now, now));
    const logged = { ...ctx, entry: { version: 1, at: now, text: "{}" } };
    await heard("insert with an entry", () => b.insert(user, record, logged));
    await heard("remove", () => a.remove(user, h, idem("r")));
    await heard(
      "update from nothing",
      () => b.update(user, h, () => ({ record, entry: logged.entry }), ctx),
    );
    // A user id whose payload would pass 8,000 bytes: everyone is called.
    const long = "\u0001".repeat(1400);
    let longCalls = 0;
    offs.push(await b.feed.subscribe(long, h, () => longCalls++));
    await a.insert(long, record, ctx);
    await waitFor("the write of a long user id", () => longCalls > 0, 5_000);
    // Nothing written, nothing heard: stale writes, a collision, a throwing
    // change, leases.
    await sleep(200);
    const settled = calls;
    await b.save(user, h, { ...write, expectVersion: 99 }, ctx);
    await b.insert(user, record, ctx);
    await b.update(user, h, () => {
      throw new Error("boom");
    }, ctx).catch(() => {});
    await b.leases.acquire(user, h, { holder: "x", expiresAt: now + DAY }, now);
    await b.leases.release(user, h, "x", now);
    await sleep(300);
    assert.equal(calls, settled);
    assert.equal(strays, 0, "another schema's instance heard of these writes");
    for (const off of offs) off();
  } finally {
    await Promise.all([a.close(), b.close(), c.close()]);
    await dropSchema(schema);
    await dropSchema(elsewhere);
  }
});

// ---------------------------------------------------------------------------
// Last: this test stops and starts the local PostgreSQL (as root, pg_ctlcluster
// acts as the cluster's owner), which fails anything else using it for about
// half a second.

interface Cluster {
  version: string;
  name: string;
}

/** The local cluster that serves the test URL's port, as `pg_lsclusters` lists it. */
async function localCluster(): Promise<Cluster> {
  const url = new URL(BASE_URL);
  if (!["127.0.0.1", "localhost", "[::1]"].includes(url.hostname)) {
    assert.fail(`The restart test needs a local PostgreSQL; the test URL points at ${url.host}.`);
  }
  const port = url.port || "5432";
  const out = await run("pg_lsclusters", ["--no-header"]);
  for (const line of out.split("\n")) {
    const [version, name, clusterPort] = line.trim().split(/\s+/);
    if (version && name && clusterPort === port) return { version, name };
  }
  return assert.fail(`No local PostgreSQL cluster listens on port ${port}:\n${out}`);
}

async function run(cmd: string, args: string[]): Promise<string> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  } catch (e) {
    return assert.fail(
      `The restart test needs ${cmd} (postgresql-common) to control the local PostgreSQL: ${e}`,
    );
  }
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) assert.fail(`${cmd} ${args.join(" ")} failed (exit ${out.code}): ${text}`);
  return text;
}

/**
 * Starts the cluster after `seconds` from a separate process, so that the
 * server comes back even if this test process dies while it is down.
 */
function watchdog(c: Cluster, seconds: number): Deno.ChildProcess {
  const child = new Deno.Command("sh", {
    args: [
      "-c",
      `sleep ${seconds}; exec pg_ctlcluster --skip-systemctl-redirect ${c.version} ${c.name} start`,
    ],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref();
  return child;
}

function pgCtl(c: Cluster, action: "stop" | "start", ...options: string[]): Promise<string> {
  return run("pg_ctlcluster", [
    "--skip-systemctl-redirect",
    ...options,
    c.version,
    c.name,
    action,
  ]);
}

Deno.test("a PostgreSQL restart mid-write: acknowledged writes survive, the outage is a clear backend_error, calls work again after", async () => {
  const cluster = await localCluster();
  const secret = "pw-restart-s3cret"; // trust auth never asks for it; it must never be shown
  const schema = schemaName("restart");
  const store = await HandleStore.fromUrl(urlFor(schema, { password: secret }));
  let down = false;
  try {
    const user = freshUser();
    const shared = await store.mint("log", { log: [] }, { user });
    const own = await store.mint("chain", { i: 0 }, { user });

    type Phase = "before" | "down" | "after";
    let phase: Phase = "before";
    let stop = false;
    const failures: { phase: Phase; error: unknown; ms: number }[] = [];
    const successes: Record<Phase, number> = { before: 0, down: 0, after: 0 };
    const attempt = async (fn: () => Promise<unknown>): Promise<boolean> => {
      const started = performance.now();
      try {
        await fn();
        successes[phase]++;
        return true;
      } catch (error) {
        failures.push({ phase, error, ms: performance.now() - started });
        await sleep(20);
        return false;
      }
    };

    const attempted = new Set<string>(), acked = new Set<string>(), minted: string[] = [];
    const patcher = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const id = `${w}:${i}`;
        attempted.add(id);
        if (await attempt(() => store.patch(shared, [Append("log", id)], { user }))) acked.add(id);
      }
    };
    const minter = async () => {
      for (let i = 0; !stop; i++) {
        let h = "";
        if (await attempt(async () => h = await store.mint("m", { i }, { user }))) minted.push(h);
      }
    };
    // Compare-and-set saves on a handle only this loop writes. After a failure
    // whose outcome is unknown it re-reads before saving again, as the error
    // message tells a caller to.
    const saver = async () => {
      let version = 1, i = 0, lastAcked = 0, reread = false;
      while (!stop) {
        if (reread) {
          reread = !await attempt(async () => {
            const s = await store.get<{ i: number }>(own, { user });
            version = s.version;
            i = s.state.i;
          });
          continue;
        }
        const next = i + 1;
        const ok = await attempt(async () => {
          version = (await store.save(own, { i: next }, { user, expectVersion: version })).version;
        });
        if (ok) lastAcked = i = next;
        else reread = true;
      }
      return lastAcked;
    };

    const loops = Promise.all([patcher(0), patcher(1), patcher(2), minter(), saver()]);
    let guard: Deno.ChildProcess | undefined;
    try {
      await waitFor("writes before the restart", () => successes.before >= 50, 10_000);
      guard = watchdog(cluster, 5);
      phase = "down";
      down = true;
      // Fast mode: every session is cut and its open transaction rolled back.
      await pgCtl(cluster, "stop", "-m", "fast");
      // Keep the outage short: just long enough to see calls fail.
      await waitFor(
        "failed calls during the outage",
        () => failures.filter((f) => f.phase === "down").length >= 5,
        2_000,
      );
    } finally {
      try {
        guard?.kill(); // this process is alive and starts the server itself
      } catch { /* it has exited already */ }
      if (down) await pgCtl(cluster, "start");
      down = false;
      phase = "after";
    }
    try {
      await waitFor("writes after the restart", () => successes.after >= 50, 30_000);
    } finally {
      stop = true;
    }
    const [, , , , lastSaved] = await loops;

    // During the outage: clear backend_errors, each within a bounded time.
    assert.ok(failures.length >= 5);
    for (const f of failures) {
      assert.ok(f.error instanceof McpStateError, `not an McpStateError: ${f.error}`);
      assert.equal(f.error.code, "backend_error", f.error.message);
      assert.match(f.error.message, /PostgreSQL is unreachable or restarting/);
      assert.ok(!JSON.stringify(f.error.toPayload()).includes(secret), f.error.message);
      assert.ok(f.ms < 15_000, `a call took ${Math.round(f.ms)} ms to fail`);
    }
    // Every acknowledged write is there, once; nothing appears that was never sent.
    const s = await store.get<{ log: string[] }>(shared, { user });
    const log = new Set(s.state.log);
    assert.equal(log.size, s.state.log.length, "a patch was applied twice");
    for (const id of acked) assert.ok(log.has(id), `acknowledged patch ${id} is lost`);
    for (const id of log) assert.ok(attempted.has(id));
    assert.equal(s.version, 1 + s.state.log.length);
    for (const h of minted) assert.equal((await store.get(h, { user })).version, 1);
    const chain = await store.get<{ i: number }>(own, { user });
    assert.ok(chain.state.i >= lastSaved, `acknowledged save ${lastSaved} is lost`);
    assert.equal(chain.version, chain.state.i + 1);

    // The changelog came through the crash with the state: every write that
    // landed has its entry, and no entry is left of a write that did not.
    await assertLogMatches(store, user, shared);
    const after = Math.max(0, chain.version - 100);
    const saves = await store.changesSince(own, after, { user });
    assert.ok(!saves.truncated, "the save chain's changelog has a hole");
    if (!saves.truncated) {
      assert.deepEqual(
        saves.changes.map((c) => c.version),
        Array.from({ length: chain.version - after }, (_, k) => after + 1 + k),
      );
      for (const c of saves.changes) {
        if (c.version === 1) continue;
        assert.deepEqual(c.patch, [{ op: "replace", path: "/i", value: c.version - 1 }]);
      }
    }
    for (const h of minted.slice(-20)) {
      const log = await store.changesSince(h, 0, { user });
      assert.ok(!log.truncated && log.changes.length === 1 && log.changes[0]!.op === "mint");
    }
  } finally {
    if (down) await pgCtl(cluster, "start");
    await store.close();
    await dropSchema(schema);
  }
});

Deno.test("a PostgreSQL restart while watching: once the server is back, new writes still reach the watcher through the feed", async () => {
  const cluster = await localCluster();
  const schema = schemaName("watch_restart");
  const [watcher, writer] = await Promise.all([
    HandleStore.fromUrl(urlFor(schema)),
    HandleStore.fromUrl(urlFor(schema)),
  ]);
  const user = freshUser();
  const stop = new AbortController();
  let it: AsyncIterableIterator<{ version: number }> | undefined;
  let down = false;
  /** Patches through `store`, retrying while its pool reconnects; the new version. */
  const patch = async (store: HandleStore, h: string): Promise<number> => {
    const deadline = performance.now() + 30_000;
    for (;;) {
      try {
        return (await store.patch(h, [Increment("", "n")], { user })).version;
      } catch (e) {
        if (!(e instanceof McpStateError) || e.code !== "backend_error") throw e;
        if (performance.now() > deadline) throw e;
        await sleep(100);
      }
    }
  };
  /** The watcher's next versions until `version`, each within 10 s. */
  const seen = async (version: number) => {
    for (;;) {
      const r = await within(10_000, `version ${version}`, it!.next());
      assert.equal(r.done, false);
      if (r.value.version >= version) return assert.equal(r.value.version, version);
    }
  };
  try {
    const h = await writer.mint("live", { n: 0 }, { user });
    // A long safety-net poll: only the change feed can deliver in time.
    it = watcher.watch(h, { user, signal: stop.signal, pollMs: 600_000 });
    assert.equal((await it.next()).value?.version, 1);
    await seen(await patch(writer, h));
    // Stopped while the watch waits for a change; nothing is written meanwhile.
    // A call of the watcher's fails, so its backend swaps its pool, and the
    // feed moves to the new one while the server is still away.
    const guard = watchdog(cluster, 5);
    down = true;
    try {
      await pgCtl(cluster, "stop", "-m", "fast");
      await rejectsWith(() => watcher.get(h, { user }), "backend_error");
      await sleep(500);
    } finally {
      try {
        guard.kill();
      } catch { /* it has exited already */ }
      await pgCtl(cluster, "start");
      down = false;
    }
    // Written through another instance, then through the watcher's own.
    await seen(await patch(writer, h));
    await seen(await patch(watcher, h));
  } finally {
    if (down) await pgCtl(cluster, "start");
    stop.abort();
    await it?.return?.(undefined);
    await Promise.all([watcher.close(), writer.close()]);
    await dropSchema(schema);
  }
});
