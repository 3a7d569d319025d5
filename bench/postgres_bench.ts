/**
 * The PostgreSQL backend beside the raw statements it runs, in the same run,
 * with a 1 KiB state: `get` against a primary-key `SELECT`, `save` against a
 * conditional `UPDATE`, `patch` against a hand-written `SELECT … FOR UPDATE`
 * transaction, and `listPage` against the indexed metadata query. Each raw
 * baseline does what an application writing the SQL by hand would do,
 * `JSON.parse`/`JSON.stringify` included, on its own pool opened with the
 * same options. The write groups run twice: as configured (every commit
 * waits for the WAL flush, an `fsync` whose latency on a shared disk swings
 * from run to run) and with `synchronous_commit=off` on both sides, which
 * leaves what the library itself adds. Each write group also runs the store
 * with `history: false`, so the cost of the changelog (an entry written in the
 * write's transaction; for `save`, a locked read-modify-write instead of one
 * conditional `UPDATE`) reads as the ratio of the two store rows.
 *
 * Under concurrency (`postgres save x16`, as configured): 16 saves of 16
 * handles in flight (one iteration = 16 saves) against 16 raw conditional
 * `UPDATE`s in flight and 16 single-flight saves in a row, each side on its
 * pool as opened by default (postgres.js: at most 10 connections).
 * `postgres server write`: a save as the MCP server makes it, with its
 * writer's lease taken in the save's own step, beside the same save followed
 * by `store.lease` (a read and an upsert, as before).
 *
 * The server is `MCPSTATE_TEST_POSTGRES_URL` or
 * `postgres://postgres@127.0.0.1:5432/test`; the benchmark works in the
 * schema `mcpstate_bench`, dropped and created afresh at the start of each run.
 *
 * @module
 */

import postgres from "postgres";
import { HandleStore, Increment } from "../mod.ts";

const BASE_URL = Deno.env.get("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA = "mcpstate_bench";
const T = `"${SCHEMA}".handles`;

const raw = postgres(BASE_URL, { onnotice: () => {}, fetch_types: false });
const rawAsync = postgres(BASE_URL, {
  onnotice: () => {},
  fetch_types: false,
  connection: { synchronous_commit: "off" },
});
await raw.unsafe(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
const url = new URL(BASE_URL);
url.searchParams.set("schema", SCHEMA);
const store = await HandleStore.fromUrl(url.toString());
url.searchParams.set("synchronous_commit", "off");
const storeAsync = await HandleStore.fromUrl(url.toString());
const storeAsyncOff = await HandleStore.fromUrl(url.toString(), { history: false });
url.searchParams.delete("synchronous_commit");
const storeOff = await HandleStore.fromUrl(url.toString(), { history: false });

/** A state whose compact JSON is exactly 1,024 bytes. */
function state1k(): { n: number; notes: string } {
  const base = JSON.stringify({ n: 0, notes: "" }).length;
  return { n: 0, notes: "x".repeat(1024 - base) };
}
if (JSON.stringify(state1k()).length !== 1024) throw new Error("The state is not 1 KiB.");

const user = "bench-user";
const viaStore = await store.mint("bench", state1k(), { user });
const viaRaw = await store.mint("bench", state1k(), { user });
const viaStoreAsync = await store.mint("bench", state1k(), { user });
const viaRawAsync = await store.mint("bench", state1k(), { user });
const viaStoreOff = await store.mint("bench", state1k(), { user });
const viaStoreAsyncOff = await store.mint("bench", state1k(), { user });
const many = await Promise.all(
  Array.from({ length: 16 }, () => store.mint("bench", state1k(), { user })),
);
const rawMany = await Promise.all(
  Array.from({ length: 16 }, () => store.mint("bench", state1k(), { user })),
);
const leased = await Promise.all(
  Array.from({ length: 2 }, () => store.mint("bench", state1k(), { user })),
);
const versions = new Map<string, number>([...many, ...rawMany, ...leased].map((h) => [h, 1]));
const lister = "bench-lister";
for (let i = 0; i < 200; i++) await store.mint(i % 2 ? "odd" : "even", state1k(), { user: lister });

const RECORD = "handle, kind, state, version, created_at, updated_at, expires_at, last_writer";
const META = "handle, kind, version, created_at, updated_at, expires_at, last_writer";

Deno.bench({
  name: "raw SELECT by primary key + JSON.parse",
  group: "postgres get",
  baseline: true,
  async fn() {
    const [row] = await raw.unsafe(
      `SELECT ${RECORD} FROM ${T} WHERE user_id = $1 AND handle = $2`,
      [user, viaRaw],
    ).values();
    JSON.parse(String(row?.[2]));
  },
});

Deno.bench({
  name: "store.get",
  group: "postgres get",
  async fn() {
    await store.get(viaStore, { user });
  },
});

/** The save and patch groups, against one pair of pools. */
function writeGroups(
  suffix: string,
  sql: postgres.Sql,
  st: HandleStore,
  rawHandle: string,
  storeHandle: string,
  off: HandleStore,
  offHandle: string,
): void {
  let rawVersion = 1, storeVersion = 1, offVersion = 1;

  Deno.bench({
    name: "raw conditional UPDATE … RETURNING + JSON.stringify",
    group: `postgres save${suffix}`,
    baseline: true,
    async fn() {
      const s = state1k();
      s.n = rawVersion;
      const [row] = await sql.unsafe(
        `UPDATE ${T} SET state = $3, version = version + 1, updated_at = $4, last_writer = NULL
         WHERE user_id = $1 AND handle = $2 AND version = $5::bigint
           AND (expires_at IS NULL OR expires_at > $4::bigint)
         RETURNING ${RECORD}`,
        [user, rawHandle, JSON.stringify(s), Date.now(), rawVersion],
      ).values();
      if (!row) throw new Error("The raw conditional update lost.");
      rawVersion++;
    },
  });

  Deno.bench({
    name: "store.save",
    group: `postgres save${suffix}`,
    async fn() {
      const s = state1k();
      s.n = storeVersion;
      storeVersion = (await st.save(storeHandle, s, { user, expectVersion: storeVersion }))
        .version;
    },
  });

  Deno.bench({
    name: "store.save, history: false",
    group: `postgres save${suffix}`,
    async fn() {
      const s = state1k();
      s.n = offVersion;
      offVersion = (await off.save(offHandle, s, { user, expectVersion: offVersion })).version;
    },
  });

  Deno.bench({
    name: "raw BEGIN; SELECT … FOR UPDATE; UPDATE; COMMIT + JSON",
    group: `postgres patch${suffix}`,
    baseline: true,
    async fn() {
      await sql.begin(async (tx) => {
        const [row] = await tx.unsafe(
          `SELECT ${RECORD} FROM ${T} WHERE user_id = $1 AND handle = $2 FOR UPDATE`,
          [user, rawHandle],
        ).values();
        const s = JSON.parse(String(row?.[2]));
        s.n++;
        await tx.unsafe(
          `UPDATE ${T} SET state = $3, version = $4, updated_at = $5, last_writer = NULL
           WHERE user_id = $1 AND handle = $2`,
          [user, rawHandle, JSON.stringify(s), Number(row?.[3]) + 1, Date.now()],
        );
      });
    },
  });

  Deno.bench({
    name: "store.patch (Increment)",
    group: `postgres patch${suffix}`,
    async fn() {
      await st.patch(storeHandle, [Increment("", "n")], { user });
    },
  });

  Deno.bench({
    name: "store.patch (Increment), history: false",
    group: `postgres patch${suffix}`,
    async fn() {
      await off.patch(offHandle, [Increment("", "n")], { user });
    },
  });
}

writeGroups("", raw, store, viaRaw, viaStore, storeOff, viaStoreOff);
writeGroups(
  ", synchronous_commit=off",
  rawAsync,
  storeAsync,
  viaRawAsync,
  viaStoreAsync,
  storeAsyncOff,
  viaStoreAsyncOff,
);

/** One raw conditional UPDATE of `h` at its next version. */
async function rawSave(h: string): Promise<void> {
  const v = versions.get(h)!;
  const s = state1k();
  s.n = v;
  const [row] = await raw.unsafe(
    `UPDATE ${T} SET state = $3, version = version + 1, updated_at = $4, last_writer = NULL
     WHERE user_id = $1 AND handle = $2 AND version = $5::bigint
       AND (expires_at IS NULL OR expires_at > $4::bigint)
     RETURNING ${RECORD}`,
    [user, h, JSON.stringify(s), Date.now(), v],
  ).values();
  if (!row) throw new Error("The raw conditional update lost.");
  versions.set(h, v + 1);
}

/** One store.save of `h` at its next version, with `extra` options. */
async function storeSave(
  h: string,
  extra: { writer?: string; lease?: { seconds: number } } = {},
): Promise<void> {
  const v = versions.get(h)!;
  const s = state1k();
  s.n = v;
  await store.save(h, s, { user, expectVersion: v, ...extra });
  versions.set(h, v + 1);
}

Deno.bench({
  name: "raw conditional UPDATE x16",
  group: "postgres save x16",
  baseline: true,
  async fn() {
    await Promise.all(rawMany.map(rawSave));
  },
});

Deno.bench({
  name: "store.save x16",
  group: "postgres save x16",
  async fn() {
    await Promise.all(many.map((h) => storeSave(h)));
  },
});

Deno.bench({
  name: "store.save x16 one at a time",
  group: "postgres save x16",
  async fn() {
    for (const h of many) await storeSave(h);
  },
});

Deno.bench({
  name: "store.save, then store.lease",
  group: "postgres server write",
  baseline: true,
  async fn() {
    await storeSave(leased[0]!);
    await store.lease(leased[0]!, { user, writer: "bench/host", seconds: 60 });
  },
});

Deno.bench({
  name: "store.save with lease",
  group: "postgres server write",
  async fn() {
    await storeSave(leased[1]!, { writer: "bench/host", lease: { seconds: 60 } });
  },
});

Deno.bench({
  name: "raw indexed metadata SELECT, 51 rows",
  group: "postgres listPage",
  baseline: true,
  async fn() {
    await raw.unsafe(
      `SELECT ${META} FROM ${T}
       WHERE user_id = $1 AND (expires_at IS NULL OR expires_at > $2::bigint)
       ORDER BY updated_at DESC, handle LIMIT 51`,
      [lister, Date.now()],
    ).values();
  },
});

Deno.bench({
  name: "store.listPage (50 of 200)",
  group: "postgres listPage",
  async fn() {
    await store.listPage(lister, { limit: 50 });
  },
});
