/**
 * Redis backend benchmarks beside raw ioredis calls in the same run, on a
 * `redis-server` this file starts (AOF `appendfsync everysec`) and stops.
 * Every state is 1 KiB of compact JSON.
 *
 * - `get`: `store.get` vs a raw `GET` of the same bytes and its `JSON.parse`.
 * - `save`: `store.save` vs one raw `EVALSHA` of a trivial compare-and-set;
 *   both serialize the same 1 KiB state object on each call.
 * - `… x16`: the same with 16 operations in flight (one iteration = 16 ops);
 *   `save x16` also with `history: false` (the conditional write alone, one
 *   script, as the raw baseline is) and single-flight saves run 16 times in a
 *   row (`x16 one at a time`), so the gain from pipelining reads as a ratio.
 *   The raw calls run twice: written to the socket one by one (the baseline,
 *   as ioredis sends them), and `one write per tick`, the way the store's
 *   connection sends the commands of calls in flight (`coalesce`), which
 *   takes the store's own gain from that out of the ratio.
 * - `server write`: a save as the MCP server makes it, with its writer's
 *   lease: taken in the save's own script (`lease` option) beside the same
 *   save followed by `store.lease` (a read and a lease script, as before).
 * - `patch`: uncontended `store.patch`, 1 and 16 in flight.
 * - `history`: what the changelog costs: `store.save` and `store.patch` with
 *   the default history (the save is then a read-modify-write step that
 *   diffs the states; both append an entry in the same script) beside a
 *   store opened with `history: false`.
 * - `contended patch`: 8 writers × 50 patches on one handle (one iteration =
 *   400 patches), through one store, two stores (like two processes) and eight.
 *
 * ```sh
 * deno bench --allow-all bench/redis_bench.ts
 * ```
 *
 * @module
 */

import { Redis } from "ioredis";
import { HandleStore, type HandleStoreOptions, Increment, type JsonObject } from "../mod.ts";
import { startRedis } from "../tests/_redis.ts";
import { coalesce, RAW_CAS } from "./_redis_raw.ts";

// Stopped (and its data dir removed) by the harness when the bench process exits.
const server = await startRedis();

const raw = new Redis({ host: server.host, port: server.port, protocol: 2 });
await raw.ping();
const opened: HandleStore[] = [];
const open = async (options: HandleStoreOptions = {}) => {
  const s = await HandleStore.fromUrl(server.url, options);
  opened.push(s);
  return s;
};
const store = await open();
const plain = await open({ history: false });
const user = "bench-user";

/** A 1 KiB (1024-byte compact JSON) state. */
function kib(n = 0): JsonObject {
  const base = { n, tags: ["bench"], notes: "" };
  const pad = 1024 - JSON.stringify(base).length;
  return { ...base, notes: "x".repeat(pad) };
}
if (JSON.stringify(kib()).length !== 1024) throw new Error("state is not 1 KiB");
const TEXT = JSON.stringify(kib());

// get
const getHandle = await store.mint("bench", kib(), { user });
await raw.set("raw:get", TEXT);

// save: the raw baseline is a trivial version check and write of the same bytes.
const rawSha = await raw.script("LOAD", RAW_CAS) as string;
const rawVersions = new Map<string, number>();
for (let i = 0; i < 32; i++) await raw.hset(`raw:cas:${i}`, "v", "0", "s", TEXT);
async function rawCas(key: string, batched = false): Promise<void> {
  const v = rawVersions.get(key) ?? 0;
  if (batched) coalesce(raw);
  // The same bytes store.save sends: the state serialized on each call.
  const ok = await raw.evalsha(rawSha, 1, key, String(v), String(v + 1), JSON.stringify(kib(v)));
  if (ok !== 1) throw new Error("raw CAS lost");
  rawVersions.set(key, v + 1);
}
const saveHandles = await Promise.all(
  Array.from({ length: 16 }, () => store.mint("bench", kib(), { user })),
);
const plainHandles = await Promise.all(
  Array.from({ length: 17 }, () => plain.mint("bench", kib(), { user })),
);
const leasedHandles = await Promise.all(
  Array.from({ length: 2 }, () => store.mint("bench", kib(), { user })),
);
const versions = new Map<string, number>(
  [...saveHandles, ...plainHandles, ...leasedHandles].map((h) => [h, 1]),
);
async function save(h: string, s = store): Promise<void> {
  const v = versions.get(h)!;
  await s.save(h, kib(v), { user, expectVersion: v });
  versions.set(h, v + 1);
}
const writer = "bench/host";

// patch
const patchHandles = await Promise.all(
  Array.from({ length: 16 }, () => store.mint("bench", kib(), { user })),
);

// contended patch
const pair = [store, await open()];
const eight = [store, ...await Promise.all(Array.from({ length: 7 }, open))];
async function contended(stores: HandleStore[]): Promise<void> {
  const h = await store.mint("bench", kib(), { user });
  await Promise.all(Array.from({ length: 8 }, async (_, w) => {
    const s = stores[w % stores.length]!;
    for (let i = 0; i < 50; i++) await s.patch(h, [Increment("", "n")], { user });
  }));
  await store.revoke(h, { user });
}

// `deno bench` awaits only functions declared `async`: keep the wrapper async.
const x16 = (fn: (i: number) => Promise<unknown>) => async () => {
  await Promise.all(Array.from({ length: 16 }, (_, i) => fn(i)));
};

/** A raw read as the store's is used: the bytes, parsed. */
async function rawGet(batched = false): Promise<unknown> {
  if (batched) coalesce(raw);
  return JSON.parse(await raw.get("raw:get") as string);
}

Deno.bench("raw GET + JSON.parse", { group: "get", baseline: true }, async () => {
  await rawGet();
});
Deno.bench("store.get", { group: "get" }, async () => {
  await store.get(getHandle, { user });
});

Deno.bench("raw EVALSHA (CAS)", { group: "save", baseline: true }, async () => {
  await rawCas("raw:cas:0");
});
Deno.bench("store.save", { group: "save" }, async () => {
  await save(saveHandles[0]!);
});

Deno.bench("raw GET + JSON.parse x16", { group: "get x16", baseline: true }, x16(() => rawGet()));
Deno.bench(
  "raw GET + JSON.parse x16, one write per tick",
  { group: "get x16" },
  x16(() => rawGet(true)),
);
Deno.bench("store.get x16", { group: "get x16" }, x16(() => store.get(getHandle, { user })));

Deno.bench(
  "raw EVALSHA (CAS) x16",
  { group: "save x16", baseline: true },
  x16((i) => rawCas(`raw:cas:${i}`)),
);
Deno.bench(
  "raw EVALSHA (CAS) x16, one write per tick",
  { group: "save x16" },
  x16((i) => rawCas(`raw:cas:${i + 16}`, true)),
);
Deno.bench("store.save x16", { group: "save x16" }, x16((i) => save(saveHandles[i]!)));
Deno.bench(
  "store.save x16, history off",
  { group: "save x16" },
  x16((i) => save(plainHandles[i]!, plain)),
);
Deno.bench("store.save x16 one at a time", { group: "save x16" }, async () => {
  for (let i = 0; i < 16; i++) await save(saveHandles[i]!);
});

Deno.bench("store.save, then store.lease", { group: "server write", baseline: true }, async () => {
  const h = leasedHandles[0]!;
  await save(h);
  await store.lease(h, { user, writer, seconds: 60 });
});
Deno.bench("store.save with lease", { group: "server write" }, async () => {
  const h = leasedHandles[1]!;
  const v = versions.get(h)!;
  await store.save(h, kib(v), { user, expectVersion: v, writer, lease: { seconds: 60 } });
  versions.set(h, v + 1);
});

Deno.bench("store.patch", { group: "patch" }, async () => {
  await store.patch(patchHandles[0]!, [Increment("", "n")], { user });
});
Deno.bench(
  "store.patch x16 (16 handles)",
  { group: "patch" },
  x16(async (i) => {
    await store.patch(patchHandles[i]!, [Increment("", "n")], { user });
  }),
);

Deno.bench("store.save, history off", { group: "history: save", baseline: true }, async () => {
  await save(plainHandles[0]!, plain);
});
Deno.bench("store.save, history on", { group: "history: save" }, async () => {
  await save(saveHandles[1]!);
});
Deno.bench("store.patch, history off", { group: "history: patch", baseline: true }, async () => {
  await plain.patch(plainHandles[16]!, [Increment("", "n")], { user });
});
Deno.bench("store.patch, history on", { group: "history: patch" }, async () => {
  await store.patch(patchHandles[1]!, [Increment("", "n")], { user });
});

Deno.bench("8 writers x 50 patches, one store", { group: "contended patch" }, async () => {
  await contended([store]);
});
Deno.bench("8 writers x 50 patches, two stores", { group: "contended patch" }, async () => {
  await contended(pair);
});
Deno.bench("8 writers x 50 patches, eight stores", { group: "contended patch" }, async () => {
  await contended(eight);
});
