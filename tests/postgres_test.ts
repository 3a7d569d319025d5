/**
 * The PostgreSQL backend against a real server: the contract suite (through a
 * URL and through an injected client), the restore contract behind export and
 * migrate, byte-exact states, index-only listing,
 * 16 writers in 2 processes, instances migrating one schema at once, clear
 * errors when the server is away, and — last, because it briefly takes the
 * server down — a restart in the middle of a write loop.
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
import { Append, HandleStore, McpStateError, SetKey } from "../mod.ts";
import type { HandleRecord, WriteContext } from "../src/backend.ts";
import { POSTGRES_SCHEMA_VERSION, PostgresBackend } from "../src/backends/postgres.ts";
import { restoreContract } from "./_cli_restore_contract.ts";
import { backendContract, freshUser, rejectsWith } from "./contract.ts";

const BASE_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";
const REPO_ROOT = decodeURIComponent(new URL("..", import.meta.url).pathname);
const DAY = 86_400_000;

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

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(what: string, ok: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!ok()) {
    if (performance.now() > deadline) {
      assert.fail(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await delay(20);
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
backendContract("postgres", (opts) => HandleStore.fromUrl(urlFor(contractSchema), opts));
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
backendContract("postgres, injected client", (opts) =>
  Promise.resolve(
    new HandleStore(new PostgresBackend(injected, { schema: injectedSchema }), opts),
  ));
Deno.test("contract: postgres, injected client (end it, drop its schema)", async () => {
  await injected.end();
  await dropSchema(injectedSchema);
});

Deno.test("restore contract (listUsers and restore, behind export, import and migrate)", async (t) => {
  const schema = schemaName("restore");
  const backend = await PostgresBackend.fromUrl(urlFor(schema));
  try {
    await restoreContract(t, backend);
  } finally {
    await backend.close();
    await dropSchema(schema);
  }
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
    await sql.unsafe(`VACUUM ANALYZE "${schema}".handles`);
    sent.length = 0;
    const page = await store.listPage("other-7", { limit: 5, kind: "odd" });
    assert.equal(page.handles.length, 5);
    await store.listPage("other-7", { limit: 5, kind: "odd", cursor: page.nextCursor });
    await store.list("other-8", { includeExpired: true });
    const lists = sent.filter((s) => /ORDER BY updated_at/.test(s.query));
    assert.equal(lists.length, 3);
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

Deno.test("16 writers in 2 processes patch one handle: every patch lands exactly once", async () => {
  const schema = schemaName("procs");
  const url = urlFor(schema);
  const store = await HandleStore.fromUrl(url);
  try {
    const user = freshUser();
    const handle = await store.mint("counter", { n: 0, log: [] }, { user });
    const writers = 8, count = 25;
    const children = ["a", "b"].map((tag) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--allow-all",
          "tests/_postgres_child.ts",
          url,
          user,
          handle,
          tag,
          String(writers),
          String(count),
        ],
        cwd: REPO_ROOT,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const out = { text: "" };
      const done = (async () => {
        for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
          out.text += chunk;
        }
      })();
      const err = new Response(child.stderr).text();
      return { tag, child, out, done, err };
    });
    try {
      await waitFor(
        "both writer processes to be ready",
        () => children.every((c) => c.out.text.includes("ready\n")),
        30_000,
      );
      // Both processes start writing at the same moment.
      for (const c of children) {
        const w = c.child.stdin.getWriter();
        await w.write(new TextEncoder().encode("go\n"));
        await w.close();
      }
    } finally {
      for (const c of children) {
        const status = await c.child.status;
        await c.done;
        const err = await c.err;
        assert.ok(status.success, `writer process ${c.tag} failed (${status.code}): ${err}`);
      }
    }
    const s = await store.get<{ n: number; log: string[] }>(handle, { user });
    const total = 2 * writers * count;
    assert.equal(s.state.n, total);
    assert.equal(s.state.log.length, total);
    assert.equal(new Set(s.state.log).size, total);
    for (const tag of ["a", "b"]) {
      for (let w = 0; w < writers; w++) {
        const mine = s.state.log.filter((x) => x.startsWith(`${tag}:${w}:`));
        // One writer's patches land in the order it made them.
        assert.deepEqual(mine, Array.from({ length: count }, (_, i) => `${tag}:${w}:${i}`));
      }
    }
    assert.equal(s.version, total + 1);
  } finally {
    await store.close();
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
    assert.deepEqual(tables.map((r) => r.table_name), ["handles", "idempotency", "meta"]);
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
        await delay(20);
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
  } finally {
    if (down) await pgCtl(cluster, "start");
    await store.close();
    await dropSchema(schema);
  }
});
