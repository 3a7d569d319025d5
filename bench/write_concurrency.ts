/**
 * SQLite writes under concurrency, one file, `synchronous=full` semantics
 * (every acknowledged write is on disk), 1 KiB states, history on:
 *
 * - 16 concurrent saves on distinct handles against the single-flight rate
 *   of the same backend in the same run;
 * - a timer-driven reader (`setTimeout(2)` between gets of its own handle):
 *   its median get latency, from the moment its timer was due to the
 *   answer, while 8 writers save 60 times each, against the same reader
 *   idle.
 *
 * Each runs on two backends over the same kind of file: the default (group
 * commit: a commit's fsync runs off the event loop and the writes that
 * arrive meanwhile share the next one; a writer alone, once it has written
 * alone a few times, syncs on the event loop) and `groupCommit: false`
 * (SQLite's own fsync inside every commit, on the event loop: the behaviour
 * before group commit).
 *
 * With `PEER_SRC` set (the folder of the Python mcpstate 0.2 store's
 * `mcpstate` package), the real Python store runs the 16 concurrent saves
 * too, in its own way: 16 threads, each with its own connection to one file
 * (its SQLite backend keeps one per thread), each saving a handle of its own
 * (`bench/_peer.ts`); the table gives this store's 16 concurrent saves over
 * the Python store's in the same run.
 *
 * ```sh
 * PEER_SRC=DIR deno run --allow-all bench/write_concurrency.ts [--runs=3]
 * ```
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { HandleStore, type JsonObject } from "../mod.ts";
import { SqliteBackend } from "../src/backends/sqlite.ts";
import { Peer } from "./_peer.ts";

const RUNS = Number(Deno.args.find((a) => a.startsWith("--runs="))?.slice(7) ?? 3);
const USER = "bench-user";
const dir = await Deno.makeTempDir({ prefix: "mcpstate-concurrency-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

function state1k(n: number): JsonObject {
  const items = Array.from({ length: 8 }, (_, i) => ({ id: i, title: `Finding ${i}` }));
  const base = { sources: [] as string[], notes: "", items, n };
  base.notes = "n".repeat(Math.max(0, 1024 - JSON.stringify(base).length));
  return base;
}

let files = 0;
async function open(groupCommit: boolean): Promise<HandleStore> {
  const path = `${dir}/c-${++files}.db`;
  const backend = groupCommit
    ? await SqliteBackend.fromUrl(`sqlite:///${path}`)
    : new SqliteBackend(new DatabaseSync(path), { closeDatabase: true, groupCommit: false });
  return new HandleStore(backend, { reclaimIntervalMs: 0 });
}

/** Saves `n` times on a handle of its own, one at a time. */
async function saver(store: HandleStore, n: number): Promise<void> {
  const h = await store.mint("bench", state1k(0), { user: USER });
  for (let v = 1; v <= n; v++) {
    await store.save(h, state1k(v), { user: USER, expectVersion: v });
  }
}

async function rates(store: HandleStore): Promise<{ single: number; sixteen: number }> {
  let t = performance.now();
  await saver(store, 320);
  const single = 320 / ((performance.now() - t) / 1000);
  t = performance.now();
  await Promise.all(Array.from({ length: 16 }, () => saver(store, 20)));
  const sixteen = 320 / ((performance.now() - t) / 1000);
  return { single, sixteen };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/** The reader's get latencies (ms) while `busy` runs, or for `idleMs` when it is `null`. */
async function reader(
  store: HandleStore,
  busy: Promise<unknown> | null,
  idleMs = 400,
): Promise<number[]> {
  const h = await store.mint("bench", state1k(0), { user: USER });
  const out: number[] = [];
  let done = false;
  const until = busy ? busy.then(() => (done = true)) : sleep(idleMs).then(() => (done = true));
  while (!done) {
    // From when the timer was due to the answer: what a held event loop delays.
    const due = performance.now() + 2;
    await sleep(2);
    await store.get(h, { user: USER });
    out.push(performance.now() - due);
  }
  await until;
  return out;
}

async function latency(store: HandleStore): Promise<{ idle: number; busy: number; n: number }> {
  const idle = await reader(store, null);
  const writers = Promise.all(Array.from({ length: 8 }, () => saver(store, 60)));
  const busy = await reader(store, writers);
  return { idle: median(idle), busy: median(busy), n: busy.length };
}

/** The Python store's 16 threads: saves/s (each thread mints its handle, then saves 20 times). */
async function peerSixteen(): Promise<number> {
  const peer = Peer.start()!;
  try {
    await peer.ask({ open: `${dir}/peer-${++files}.db`, handles: 0, template: state1k(0) });
    return 320 / ((await peer.ask({ threads: 16, saves: 20 }))! / 1000);
  } finally {
    await peer.close();
  }
}

type Row = { single: number; sixteen: number; idle: number; busy: number; n: number };
const results = new Map<string, Row[]>();
const peerRates: number[] = [];
for (let run = 0; run < RUNS; run++) {
  if (Peer.src !== undefined) peerRates.push(await peerSixteen());
  for (const groupCommit of [false, true]) {
    const store = await open(groupCommit);
    const r = await rates(store);
    const l = await latency(store);
    await store.close();
    const key = groupCommit ? "group commit (default)" : "groupCommit: false";
    results.set(key, [...(results.get(key) ?? []), { ...r, ...l }]);
  }
}
const peered = peerRates.length > 0;

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const range = (xs: number[], f: (n: number) => string) =>
  `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
console.log(
  `| backend (median of ${RUNS}, range) | single-flight saves/s | 16 concurrent saves/s | ratio | ` +
    "reader median get, idle (ms) | during 8 writers (ms) | ratio | reader gets during writes |" +
    (peered ? " 16 concurrent × python 0.2's 16 threads |" : ""),
);
console.log(`|---|---:|---:|---:|---:|---:|---:|---:|${peered ? "---:|" : ""}`);
for (const [key, rows] of results) {
  const col = (f: (r: Row) => number) => rows.map(f);
  console.log(
    `| ${key} | ${range(col((r) => r.single), fmt)} | ${range(col((r) => r.sixteen), fmt)} | ${
      range(col((r) => r.sixteen / r.single), (n) => n.toFixed(2) + "×")
    } | ${range(col((r) => r.idle), (n) => n.toFixed(3))} | ${
      range(col((r) => r.busy), (n) => n.toFixed(3))
    } | ${range(col((r) => r.busy / r.idle), (n) => n.toFixed(1) + "×")} | ${
      range(col((r) => r.n), fmt)
    } |${
      peered
        ? ` ${range(rows.map((r, i) => r.sixteen / peerRates[i]!), (n) => n.toFixed(2) + "×")} |`
        : ""
    }`,
  );
}
if (peered) {
  console.log(`\npython 0.2, 16 threads, saves/s: ${range(peerRates, fmt)}`);
}
