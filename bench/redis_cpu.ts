/**
 * Where a Redis read or save spends its CPU with 16 in flight: the client
 * process's own CPU time per operation (`process.cpuUsage`) and
 * `redis-server`'s (`INFO cpu`), beside raw ioredis calls, on a
 * `redis-server` this script starts (AOF `appendfsync everysec`). On a
 * shared machine wall time with 16 in flight swings with the neighbours;
 * CPU per operation moves far less, so this is what the docs quote beside
 * the `redis_bench` ratios.
 *
 * Each round runs every case once, in turn (so all see the same load):
 * `--ops` operations, 16 in flight. The medians of `--runs` rounds are
 * printed, with the wall time per operation.
 *
 * - `raw GET`: one `GET` of the same 1 KiB and its `JSON.parse`; `store.get`.
 * - `raw CAS`: one `EVALSHA` of a trivial compare-and-set of the same 1 KiB
 *   (serialized on each call, as the store does); `store.save` with
 *   history (the default) and with `history: false`.
 * - `… one write per tick`: the raw calls sent the way the store's
 *   connection sends the commands of calls in flight (`coalesce`).
 *
 * `--flight=N` runs N in flight instead of 16 (`--flight=1`: one at a time,
 * where wall time is the round trip's); `--only=a,b` runs only the cases
 * named (`--only="raw GET,store.get"`).
 *
 * ```sh
 * deno run --allow-all bench/redis_cpu.ts [--runs=5] [--ops=4000] [--flight=16] [--only=…]
 * ```
 *
 * @module
 */

import process from "node:process";
import { Redis } from "ioredis";
import { HandleStore, type JsonObject } from "../mod.ts";
import { startRedis } from "../tests/_redis.ts";
import { coalesce, RAW_CAS } from "./_redis_raw.ts";

const args = new Map(
  Deno.args.filter((a) => a.startsWith("--")).map((a) => {
    const [k, v] = a.slice(2).split("=");
    return [k!, v ?? ""] as const;
  }),
);
const RUNS = Number(args.get("runs") ?? 5);
const OPS = Number(args.get("ops") ?? 4000);
const only = args.get("only")?.split(",");
const IN_FLIGHT = Number(args.get("flight") ?? 16);

await using server = await startRedis();
const raw = new Redis({ host: server.host, port: server.port, protocol: 2 });
await using store = await HandleStore.fromUrl(server.url);
await using plain = await HandleStore.fromUrl(server.url, { history: false });
const user = "cpu-user";

function kib(n = 0): JsonObject {
  const base = { n, tags: ["bench"], notes: "" };
  const pad = 1024 - JSON.stringify(base).length;
  return { ...base, notes: "x".repeat(pad) };
}
const TEXT = JSON.stringify(kib());
await raw.set("raw:get", TEXT);
const getHandle = await store.mint("bench", kib(), { user });

const rawSha = await raw.script("LOAD", RAW_CAS) as string;
const rawVersions: number[] = [];
for (let i = 0; i < 32; i++) {
  await raw.hset(`raw:cas:${i}`, "v", "0", "s", TEXT);
  rawVersions.push(0);
}
const saveHandles = await Promise.all(
  Array.from({ length: 16 }, () => store.mint("bench", kib(), { user })),
);
const plainHandles = await Promise.all(
  Array.from({ length: 16 }, () => plain.mint("bench", kib(), { user })),
);
const versions = new Map([...saveHandles, ...plainHandles].map((h) => [h, 1]));
async function save(s: HandleStore, h: string): Promise<void> {
  const v = versions.get(h)!;
  await s.save(h, kib(v), { user, expectVersion: v });
  versions.set(h, v + 1);
}

const cases: Record<string, (slot: number) => Promise<unknown>> = {
  "raw GET": async () => JSON.parse(await raw.get("raw:get") as string),
  "raw GET, one write per tick": async () => {
    coalesce(raw);
    return JSON.parse(await raw.get("raw:get") as string);
  },
  "store.get": () => store.get(getHandle, { user }),
  "raw CAS": (i) => rawCas(i, false),
  "raw CAS, one write per tick": (i) => rawCas(i + 16, true),
  "store.save": (i) => save(store, saveHandles[i]!),
  "store.save, history off": (i) => save(plain, plainHandles[i]!),
};
async function rawCas(i: number, batched: boolean): Promise<void> {
  const v = rawVersions[i]!;
  if (batched) coalesce(raw);
  const ok = await raw.evalsha(
    rawSha,
    1,
    `raw:cas:${i}`,
    String(v),
    String(v + 1),
    JSON.stringify(kib(v)),
  );
  if (ok !== 1) throw new Error("raw CAS lost");
  rawVersions[i] = v + 1;
}
const names = Object.keys(cases).filter((n) => !only || only.includes(n));

async function redisCpuUs(): Promise<number> {
  const info = await raw.info("cpu");
  const f = (k: string) => Number(info.match(new RegExp(`${k}:([0-9.]+)`))![1]);
  return (f("used_cpu_sys") + f("used_cpu_user")) * 1e6;
}

/** One case: OPS operations, 16 lanes each running OPS/16 in a row. */
async function round(fn: (slot: number) => Promise<unknown>) {
  const r0 = await redisCpuUs();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, async (_, i) => {
    for (let n = 0; n < OPS / IN_FLIGHT; n++) await fn(i);
  }));
  const wall = (performance.now() - t0) * 1000 / OPS;
  const c = process.cpuUsage(c0);
  const r1 = await redisCpuUs();
  return { wall, client: (c.user + c.system) / OPS, redis: (r1 - r0) / OPS };
}

const results = new Map(
  names.map((n) => [n, [] as { wall: number; client: number; redis: number }[]]),
);
for (const n of names) await round(cases[n]!); // warm up
for (let r = 0; r < RUNS; r++) {
  for (const n of names) results.get(n)!.push(await round(cases[n]!));
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
/** The baseline of a case: the raw call it is compared with. */
const baseOf = (n: string) => n.includes("get") || n.includes("GET") ? "raw GET" : "raw CAS";
console.log(
  `${RUNS} rounds of ${OPS} ops, ${IN_FLIGHT} in flight; medians of µs per op, and of the ratio to the raw call in the same round`,
);
console.log("| case | wall | × raw | client CPU | × raw | Redis CPU | × raw |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const n of names) {
  const rs = results.get(n)!;
  const bs = results.get(baseOf(n));
  const cell = (k: "wall" | "client" | "redis") => {
    const v = median(rs.map((x) => x[k])).toFixed(1);
    const ratio = bs ? median(rs.map((x, i) => x[k] / bs[i]![k])).toFixed(2) + "×" : "";
    return `${v} | ${ratio}`;
  };
  console.log(`| ${n} | ${cell("wall")} | ${cell("client")} | ${cell("redis")} |`);
}
raw.disconnect();
