/**
 * Listing never reads states: `listPage({ limit: 50 })`, with and without
 * previews, over 60 handles of ~800 KB against 60 tiny ones, on SQLite (a
 * file, `synchronous=full`), PostgreSQL and Deno KV (a local file), in one
 * run. The target: the large listing within 2× (+1 ms) of the tiny one.
 *
 * Each backend holds two users, one with the tiny handles and one with the
 * large ones; the two listings take turns, 40 rounds after 5 of warm-up,
 * and the median of each is printed with their ratio and whether it meets
 * the target.
 *
 * PostgreSQL is `MCPSTATE_TEST_POSTGRES_URL` or
 * `postgres://postgres@127.0.0.1:5432/test`, in the schema
 * `mcpstate_bench_list`, dropped at the start and the end of the run.
 *
 * Run: `deno run -A --unstable-kv bench/list_large.ts [sqlite] [postgres] [denokv]`.
 *
 * @module
 */

import postgres from "postgres";
import { HandleStore } from "../mod.ts";

const BASE_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA = "mcpstate_bench_list";
const HANDLES = 60;
const LARGE_BYTES = 800_000;
const ROUNDS = 40;

/** Mints `HANDLES` handles of about `bytes` each for `user`. */
async function fill(store: HandleStore, user: string, bytes: number): Promise<void> {
  for (let i = 0; i < HANDLES; i++) {
    const state = { title: `note ${i}`, body: "x".repeat(Math.max(0, bytes - 40)) };
    await store.mint("note", state, { user, writer: "bench" });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

/** The median time of each user's listing, taking turns. */
async function timeListings(
  store: HandleStore,
  previews: boolean,
): Promise<{ tiny: number; large: number }> {
  const times = { tiny: [] as number[], large: [] as number[] };
  for (let r = 0; r < ROUNDS + 5; r++) {
    for (const user of ["tiny", "large"] as const) {
      const t0 = performance.now();
      const page = await store.listPage(user, { limit: 50, previews });
      const dt = performance.now() - t0;
      if (page.handles.length !== 50) throw new Error(`${user}: ${page.handles.length} handles`);
      if (r >= 5) times[user].push(dt);
    }
  }
  return { tiny: median(times.tiny), large: median(times.large) };
}

async function run(name: string, open: () => Promise<HandleStore>, done: () => Promise<void>) {
  const store = await open();
  try {
    await fill(store, "tiny", 60);
    await fill(store, "large", LARGE_BYTES);
    for (const previews of [false, true]) {
      const { tiny, large } = await timeListings(store, previews);
      const ok = large <= 2 * tiny + 1;
      console.log(
        `| ${name} | ${previews ? "with" : "without"} | ${tiny.toFixed(3)} | ${
          large.toFixed(3)
        } | ${(large / tiny).toFixed(2)}× | ${ok ? "met" : "NOT met"} |`,
      );
    }
  } finally {
    await store.close();
    await done();
  }
}

const only = new Set(Deno.args);
const wanted = (name: string) => only.size === 0 || only.has(name);
const options = { reclaimIntervalMs: 0, maxStateBytes: 1_000_000 };
console.log("| backend | previews | 60 tiny, ms | 60 × 800 KB, ms | ratio | target |");
console.log("|---|---|---|---|---|---|");

if (wanted("sqlite")) {
  const dir = await Deno.makeTempDir({ prefix: "mcpstate-bench-list-" });
  await run(
    "SQLite",
    () => HandleStore.fromUrl(`sqlite:///${dir}/list.db`, options),
    () => Deno.remove(dir, { recursive: true }),
  );
}
if (wanted("postgres")) {
  const raw = postgres(BASE_URL, { onnotice: () => {} });
  await raw.unsafe(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
  const url = new URL(BASE_URL);
  url.searchParams.set("schema", SCHEMA);
  await run("PostgreSQL", () => HandleStore.fromUrl(url.toString(), options), async () => {
    await raw.unsafe(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await raw.end();
  });
}
if (wanted("denokv")) {
  const dir = await Deno.makeTempDir({ prefix: "mcpstate-bench-list-" });
  await run(
    "Deno KV",
    () => HandleStore.fromUrl(`denokv:///${dir}/list.kv`, options),
    () => Deno.remove(dir, { recursive: true }),
  );
}
