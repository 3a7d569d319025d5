/**
 * SQLite benchmarks: each operation through `HandleStore` beside the raw
 * `node:sqlite` prepared statement plus the JSON work it cannot avoid (the
 * group's baseline), on the same database file in the same run. The ratios,
 * not the absolute numbers, are the point: `deno task bench` writes them to
 * `docs/dev/bench-results.md`, and `docs/benchmarks.md` quotes them.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { HandleStore, Increment, type JsonObject, previewOf } from "../mod.ts";

const dir = await Deno.makeTempDir({ prefix: "mcpstate-bench-" });
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

/** A structured state of about `bytes` bytes of JSON: a list of small notes. */
function stateOf(bytes: number): JsonObject {
  const items: JsonObject[] = [];
  const base = { sources: [] as string[], notes: "", items };
  let i = 0;
  while (JSON.stringify(base).length < bytes - 160) {
    items.push({
      id: i,
      title: `Finding ${i}`,
      text: `arm64 builds finish first on the shared runners; ${i * 7919}`,
      tags: ["ci", i % 2 ? "arm64" : "x64"],
      score: (i % 10) / 10,
    });
    i++;
  }
  base.notes = "n".repeat(Math.max(0, bytes - JSON.stringify(base).length));
  return base;
}

const KIB = 1024;
/** A state of about `bytes` bytes that is mostly one long text: few values to validate. */
function textStateOf(bytes: number): JsonObject {
  const base = {
    sources: Array.from({ length: 10 }, (_, i) => `https://arxiv.org/abs/2401.${10000 + i}`),
    notes: "",
  };
  base.notes = "Arm64 runners finish first. ".repeat(
    Math.ceil((bytes - JSON.stringify(base).length) / 28),
  ).slice(0, bytes - JSON.stringify(base).length);
  return base;
}

// 256 KiB in two shapes: many small values (what validation pays for) and mostly text.
const sizes = [
  ["1 KiB", stateOf(KIB)],
  ["256 KiB, 2,000 notes", stateOf(256 * KIB)],
  ["256 KiB, one long text", textStateOf(256 * KIB)],
] as const;
const USER = "bench-user";

interface Db {
  store: HandleStore;
  raw: DatabaseSync;
  url: string;
}

async function open(name: string, query = ""): Promise<Db> {
  const path = `${dir}/${name}.db`;
  const url = `sqlite:///${path}${query}`;
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  // The raw side: its own connection to the same file, same pragmas.
  const raw = new DatabaseSync(path);
  raw.exec("PRAGMA busy_timeout = 10000");
  raw.exec(`PRAGMA synchronous = ${query.includes("normal") ? "NORMAL" : "FULL"}`);
  return { store, raw, url };
}

const main = await open("main");
const raw = main.raw;
const store = main.store;
// The same file without the changelog: what history costs on save and patch.
const noHistory = await HandleStore.fromUrl(main.url, { reclaimIntervalMs: 0, history: false });

/** Rows as arrays: the fastest way `node:sqlite` returns them, so the toughest baseline. */
function arrays(stmt: StatementSync): StatementSync {
  (stmt as unknown as { setReturnArrays(on: boolean): void }).setReturnArrays(true);
  return stmt;
}

const sel = arrays(raw.prepare(
  "SELECT kind, state, version, created_ms, updated_ms, expires_ms, last_writer " +
    "FROM handles WHERE user = ? AND handle = ?",
));
const cas = raw.prepare(
  "UPDATE handles SET state = ?, version = version + 1, updated_ms = ? " +
    "WHERE user = ? AND handle = ? AND version = ?",
);
const selState = raw.prepare("SELECT state FROM handles WHERE user = ? AND handle = ?");
const put = raw.prepare(
  "UPDATE handles SET state = ?, version = version + 1, updated_ms = ? " +
    "WHERE user = ? AND handle = ?",
);
const ins = raw.prepare(
  "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
    "expires_ms, last_writer) VALUES (?, ?, ?, ?, 1, ?, ?, NULL, NULL)",
);
const begin = raw.prepare("BEGIN IMMEDIATE");
const commit = raw.prepare("COMMIT");

for (const [label, state] of sizes) {
  const storeHandle = await store.mint("bench", state, { user: USER });
  const rawHandle = await store.mint("bench", state, { user: USER });

  Deno.bench({
    name: `raw SELECT + JSON.parse (${label})`,
    group: `get ${label}`,
    baseline: true,
    fn() {
      const row = sel.get(USER, rawHandle) as unknown as unknown[];
      JSON.parse(row[1] as string);
    },
  });
  Deno.bench({
    name: `store.get (${label})`,
    group: `get ${label}`,
    async fn() {
      await store.get(storeHandle, { user: USER });
    },
  });

  // Saves keep their own version counters; each iteration is one durable commit.
  let rawVersion = 1;
  let storeVersion = 1;
  const saveHandleRaw = await store.mint("bench", state, { user: USER });
  const saveHandleStore = await store.mint("bench", state, { user: USER });
  Deno.bench({
    name: `raw UPDATE … WHERE version = ? + JSON.stringify (${label})`,
    group: `save ${label}`,
    baseline: true,
    fn() {
      const text = JSON.stringify({ ...state, v: rawVersion });
      const { changes } = cas.run(text, Date.now(), USER, saveHandleRaw, rawVersion);
      if (changes !== 1) throw new Error("lost the version race");
      rawVersion++;
    },
  });
  Deno.bench({
    name: `store.save (${label})`,
    group: `save ${label}`,
    async fn() {
      await store.save(saveHandleStore, { ...state, v: storeVersion }, {
        user: USER,
        expectVersion: storeVersion,
      });
      storeVersion++;
    },
  });

  // The changelog's cost: the same save and patch with history on (the
  // default: a diff, one more row and a trim in the same transaction) and off.
  for (const [op, name] of [["save", "store.save"], ["patch", "store.patch Increment"]] as const) {
    for (const [on, s] of [[false, noHistory], [true, store]] as const) {
      const h = await s.mint("bench", { ...state, n: 0 }, { user: USER });
      let version = 1;
      Deno.bench({
        name: `${name}, history ${on ? "on (100 entries, 30 days)" : "off"} (${label})`,
        group: `changelog: ${op} ${label}`,
        baseline: !on,
        async fn() {
          if (op === "save") {
            await s.save(h, { ...state, n: version }, { user: USER, expectVersion: version });
          } else {
            await s.patch(h, [Increment("", "n")], { user: USER });
          }
          version++;
        },
      });
    }
  }

  // 8 writers x 50 patches on one handle: 400 durable read-modify-writes.
  const patchRaw = await store.mint("bench", { ...state, n: 0 }, { user: USER });
  const patchStore = await store.mint("bench", { ...state, n: 0 }, { user: USER });
  const group = `patch 8 writers x 50 (${label})`;
  Deno.bench({
    name: `raw BEGIN IMMEDIATE read-modify-write x 400 (${label})`,
    group,
    baseline: true,
    n: 4,
    warmup: 1,
    fn() {
      for (let i = 0; i < 400; i++) {
        begin.run();
        try {
          const s = JSON.parse(selState.get(USER, patchRaw)!.state as string);
          s.n++;
          put.run(JSON.stringify(s), Date.now(), USER, patchRaw);
          commit.run();
        } catch (e) {
          if (raw.isTransaction) raw.exec("ROLLBACK");
          throw e;
        }
      }
    },
  });
  Deno.bench({
    name: `store.patch, 8 concurrent writers x 50 (${label})`,
    group,
    n: 4,
    warmup: 1,
    async fn() {
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 50; i++) {
          await store.patch(patchStore, [Increment("", "n")], { user: USER });
        }
      }));
    },
  });
}

// listPage for a user with 10,000 handles, each with its preview (as the store writes them).
const LIST_USER = "bench-list-user";
{
  const now = Date.now();
  const insPreview = raw.prepare(
    "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
      "expires_ms, last_writer, preview) VALUES (?, ?, ?, ?, 1, ?, ?, NULL, NULL, ?)",
  );
  raw.exec("BEGIN IMMEDIATE");
  const small = JSON.stringify(stateOf(KIB));
  const preview = previewOf(stateOf(KIB));
  for (let i = 0; i < 10_000; i++) {
    insPreview.run(
      LIST_USER,
      `item_${String(i).padStart(8, "0")}`,
      i % 3 ? "note" : "todo",
      small,
      now - i,
      now - i,
      preview,
    );
  }
  raw.exec("COMMIT");
}
const rawList = arrays(raw.prepare(
  "SELECT handle, kind, version, created_ms, updated_ms, expires_ms, last_writer FROM handles " +
    "WHERE user = ? AND (expires_ms IS NULL OR expires_ms > ?) " +
    "ORDER BY updated_ms DESC, handle ASC LIMIT ?",
));
Deno.bench({
  name: "raw indexed SELECT of 51 rows of metadata",
  group: "listPage limit 50 of 10,000",
  baseline: true,
  fn() {
    const rows = rawList.all(LIST_USER, Date.now(), 51);
    if (rows.length !== 51) throw new Error("short page");
  },
});
Deno.bench({
  name: "store.listPage({ limit: 50 })",
  group: "listPage limit 50 of 10,000",
  async fn() {
    const page = await store.listPage(LIST_USER, { limit: 50 });
    if (page.handles.length !== 50) throw new Error("short page");
  },
});
Deno.bench({
  name: "store.listPage({ limit: 50, previews: true })",
  group: "listPage limit 50 of 10,000",
  async fn() {
    const page = await store.listPage(LIST_USER, { limit: 50, previews: true });
    if (page.handles[49]?.preview === undefined) throw new Error("no preview");
  },
});

// mint: a durable insert of a new handle.
{
  const state = stateOf(KIB);
  let i = 0;
  Deno.bench({
    name: "raw INSERT + JSON.stringify (1 KiB)",
    group: "mint 1 KiB",
    baseline: true,
    fn() {
      const now = Date.now();
      ins.run(USER, `raw_${i++}_${now}`, "bench", JSON.stringify(state), now, now);
    },
  });
  Deno.bench({
    name: "store.mint (1 KiB)",
    group: "mint 1 KiB",
    async fn() {
      await store.mint("bench", state, { user: USER });
    },
  });
}

// Durability: the cost of synchronous=FULL (default) against NORMAL.
{
  const normal = await open("normal", "?synchronous=normal");
  const state = stateOf(KIB);
  const group = "durability: 1 KiB write, synchronous full vs normal";
  for (const [label, db] of [["full", main], ["normal", normal]] as const) {
    const rawHandle = await db.store.mint("dur", state, { user: USER });
    const storeHandle = await db.store.mint("dur", state, { user: USER });
    const rawPut = db.raw.prepare(
      "UPDATE handles SET state = ?, version = version + 1, updated_ms = ? " +
        "WHERE user = ? AND handle = ?",
    );
    let version = 1;
    Deno.bench({
      name: `raw UPDATE, synchronous=${label}`,
      group,
      baseline: label === "full",
      fn() {
        rawPut.run(JSON.stringify(state), Date.now(), USER, rawHandle);
      },
    });
    Deno.bench({
      name: `store.save, synchronous=${label}`,
      group,
      async fn() {
        await db.store.save(storeHandle, state, { user: USER, expectVersion: version });
        version++;
      },
    });
  }
}
