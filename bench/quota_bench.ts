/**
 * The cost of quotas on a write: the same patch of a 1 KiB state (one
 * `increment`) and the same save, on each engine, by a store without quotas
 * (the baseline), by one with every quota on (limits far above the usage,
 * so nothing is refused), and — on SQLite and PostgreSQL, whose usage is
 * kept by triggers — by a store without quotas on a database whose usage
 * triggers were dropped: the write as it was before quotas existed. Each
 * group runs in one process, on one engine, in the same run.
 *
 * Needs PostgreSQL (`MCPSTATE_TEST_POSTGRES_URL`, default
 * `postgres://postgres@127.0.0.1:5432/test`) and `redis-server` on PATH.
 *
 * @module
 */

import postgres from "postgres";
import { HandleStore, type HandleStoreOptions, Increment } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { SqliteBackend } from "../src/backends/sqlite.ts";
import { startRedis } from "../tests/_redis.ts";

const user = "bench";
const QUOTAS: HandleStoreOptions = {
  quotas: { maxHandles: 1_000_000, maxBytes: 1_000_000_000_000, writesPerMinute: 1_000_000_000 },
};
const history: HandleStoreOptions = { history: false, reclaimIntervalMs: 0 };

/** A state whose compact JSON is exactly 1,024 bytes. */
function state1k(): { n: number; notes: string } {
  const base = JSON.stringify({ n: 0, notes: "" }).length;
  return { n: 0, notes: "x".repeat(1024 - base) };
}

const dir = await Deno.makeTempDir({ prefix: "mcpstate-quota-bench-" });
const redis = await startRedis();
const PG = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const pgUrl = (schema: string) => {
  const u = new URL(PG);
  u.searchParams.set("schema", schema);
  return u.toString();
};
const pg = postgres(PG, { onnotice: () => {}, fetch_types: false });
for (const s of ["mcpstate_qbench", "mcpstate_qbench_old"]) {
  await pg.unsafe(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
}

const opened: HandleStore[] = [];
async function open(url: string, options: HandleStoreOptions): Promise<HandleStore> {
  const s = await HandleStore.fromUrl(url, { ...history, ...options });
  opened.push(s);
  return s;
}

/** A SQLite store whose file has no usage triggers: the write before quotas. */
async function sqliteBefore(path: string): Promise<HandleStore> {
  const backend = await SqliteBackend.fromUrl(`sqlite:///${path}`);
  for (const t of ["usage_after_insert", "usage_after_delete", "usage_after_update"]) {
    backend.database.exec(`DROP TRIGGER ${t}`);
  }
  const s = new HandleStore(backend, history);
  opened.push(s);
  return s;
}

/** A PostgreSQL store whose schema has no usage trigger: the write before quotas. */
async function postgresBefore(schema: string): Promise<HandleStore> {
  const s = await open(pgUrl(schema), {});
  await s.usage("warm-up"); // migrated and prepared
  await pg.unsafe(`DROP TRIGGER usage_track ON "${schema}".handles`);
  return s;
}

const engines: [string, [string, HandleStore][]][] = [
  ["memory", [
    ["no quotas", new HandleStore(new MemoryBackend(), history)],
    ["quotas on", new HandleStore(new MemoryBackend(), { ...history, ...QUOTAS })],
  ]],
  ["sqlite", [
    ["no quotas", await open(`sqlite:///${dir}/q.db`, {})],
    ["quotas on", await open(`sqlite:///${dir}/q.db`, QUOTAS)],
    ["no quotas, no usage triggers (before quotas)", await sqliteBefore(`${dir}/old.db`)],
  ]],
  ["postgres", [
    ["no quotas", await open(pgUrl("mcpstate_qbench"), {})],
    ["quotas on", await open(pgUrl("mcpstate_qbench"), QUOTAS)],
    ["no quotas, no usage trigger (before quotas)", await postgresBefore("mcpstate_qbench_old")],
  ]],
  ["redis", [
    ["no quotas", await open(redis.url, {})],
    ["quotas on", await open(redis.url, QUOTAS)],
  ]],
  ["denokv", [
    ["no quotas", await open(`denokv:///${dir}/q.kv`, {})],
    ["quotas on", await open(`denokv:///${dir}/q.kv`, QUOTAS)],
  ]],
];

for (const [engine, stores] of engines) {
  for (const [name, store] of stores) {
    // Each store writes its own handle, among a few others of the same user.
    const mine = `${user}-${name.length}`;
    for (let i = 0; i < 20; i++) await store.mint("other", state1k(), { user: mine });
    const h = await store.mint("bench", state1k(), { user: mine });
    Deno.bench({
      name,
      group: `patch 1 KiB (${engine})`,
      baseline: name === "no quotas",
      async fn() {
        await store.patch(h, [Increment("", "n")], { user: mine });
      },
    });
    Deno.bench({
      name,
      group: `save 1 KiB (${engine})`,
      baseline: name === "no quotas",
      async fn(b) {
        const cur = await store.get(h, { user: mine });
        const next = { ...cur.state, n: (cur.state.n as number) + 1 };
        b.start();
        await store.save(h, next, { user: mine, expectVersion: cur.version });
        b.end();
      },
    });
  }
}

globalThis.addEventListener("unload", () => {
  for (const s of opened) void s.close();
  void pg.end();
  try {
    Deno.removeSync(dir, { recursive: true });
  } catch { /* already gone */ }
});
