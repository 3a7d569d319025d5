/**
 * The cost of a grant check: the same read (`get`) and the same patch (one
 * `increment`) of a 1 KiB state, by the owner (the baseline) and by a
 * grantee through an alias handle, on each engine that keeps grants, in the
 * same run. A call through an alias first misses the caller's own handle,
 * looks the grant up, then runs on the owner's handle with the grant checked
 * inside the write.
 *
 * Needs PostgreSQL (`MCPSTATE_TEST_POSTGRES_URL`, default
 * `postgres://postgres@127.0.0.1:5432/test`) and `redis-server` (started
 * here on a free port); Deno KV needs `--unstable-kv`.
 *
 * @module
 */

import { HandleStore, Increment } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { startRedis } from "../tests/_redis.ts";

const dir = await Deno.makeTempDir({ prefix: "mcpstate-share-bench-" });
const PG = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const pg = new URL(PG);
pg.searchParams.set("schema", `mcpstate_sbench_${crypto.randomUUID().slice(0, 8)}`);

const options = { reclaimIntervalMs: 0 };
const engines: [string, HandleStore][] = [
  ["memory", new HandleStore(new MemoryBackend(), options)],
  ["sqlite", await HandleStore.fromUrl(`sqlite:///${dir}/s.db`, options)],
  ["postgres", await HandleStore.fromUrl(pg.toString(), options)],
  // Stopped (and its data dir removed) by the harness when the bench process exits.
  ["redis", await HandleStore.fromUrl((await startRedis()).url, options)],
  ["denokv", await HandleStore.fromUrl(`denokv:///${dir}/k.kv`, options)],
];

const state = { n: 0, notes: "x".repeat(1024 - JSON.stringify({ n: 0, notes: "" }).length) };

for (const [engine, store] of engines) {
  const owner = "alice", grantee = "bob";
  const h = await store.mint("bench", state, { user: owner });
  const g = await store.share(h, { user: owner, to: grantee, rights: "patch" });
  for (const [who, user, handle] of [["owner", owner, h], ["grantee", grantee, g.handle]]) {
    Deno.bench({
      name: who!,
      group: `get 1 KiB (${engine})`,
      baseline: who === "owner",
      async fn() {
        await store.get(handle!, { user: user! });
      },
    });
    Deno.bench({
      name: who!,
      group: `patch 1 KiB (${engine})`,
      baseline: who === "owner",
      async fn() {
        await store.patch(handle!, [Increment("", "n")], { user: user! });
      },
    });
  }
}

globalThis.addEventListener("unload", () => {
  for (const [, s] of engines) s.close().catch(() => {});
});
