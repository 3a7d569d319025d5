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
