/**
 * SQLite small writes: WAL frames per write and the write rate of 1 KiB
 * mint, save (with `expectVersion`) and patch (`append`), history on (the
 * default) and `synchronous=FULL`, against a stand-in for the Python
 * mcpstate 0.2 store in the same run.
 *
 * The Python store is not runnable here. Its stand-in replays the
 * statements it runs through `node:sqlite` on its own file, same pragmas:
 * a rowid `handles` table keyed by `(user, handle)` with REAL seconds, and
 * one changelog row per write in a rowid table, one transaction (one
 * fsync) per write. It does the JSON work it cannot avoid
 * (`JSON.stringify`, and for a patch a parse), nothing more.
 *
 * The two take turns in blocks of 50 writes, so that both see the same load
 * on a shared disk; ratios are per run.
 *
 * Frames are counted from the growth of the `-wal` file with automatic
 * checkpoints off during the count: (bytes written) / (page size + 24).
 * SQLite writes a frame as two `pwrite` calls (header, page), so the
 * `pwrite` count an `strace` shows is twice the frame count; both are
 * printed.
 *
 * With `--trees`, each run also prints where the frames of the last write
 * of each kind went: the B-tree (table or index) each WAL frame's page
 * belongs to, per write, from SQLite's `dbstat` table.
 *
 * With `--before=DIR`, a third engine takes its turns too: the store of
 * another checkout of mcpstate in `DIR` (a previous release, say), loaded
 * from its own `mod.ts` on its own file, so that a change is measured
 * against what it replaces in one run. With `--dir=DIR` the database files
 * go there instead of a new temporary directory (a RAM disk, say, where an
 * fsync costs nothing and what is left is each engine's own work).
 *
 * ```sh
 * deno run --allow-all bench/sqlite_frames.ts [--runs=3] [--ops=1000] [--trees] [--before=DIR] [--dir=DIR]
 * ```
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { Append, HandleStore, type JsonObject } from "../mod.ts";
import { SqliteBackend } from "../src/backends/sqlite.ts";

const args = new Map(
  Deno.args.filter((a) => a.startsWith("--")).map((a) => {
    const [k, v] = a.slice(2).split("=");
    return [k!, v ?? ""] as const;
  }),
);
const RUNS = Number(args.get("runs") ?? 3);
const OPS = Number(args.get("ops") ?? 1000);
const TREES = args.has("trees");
/** Handles a user has before the count; writes go round-robin over the first `HOT` of them. */
const HANDLES = 1000;
const HOT = 50;
/** Handles of the steady saves (after the save and patch handles), and writes before the count. */
const STEADY = 20;
const STEADY_WARMUP = STEADY * 110;
const USER = "bench-user";

const BEFORE = args.get("before");
const dir = await Deno.makeTempDir({
  prefix: "mcpstate-frames-",
  ...(args.has("dir") ? { dir: args.get("dir")! } : {}),
});
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

/** A state of about 1 KiB: a few small notes; a save changes one small field, `n`. */
function state1k(n: number): JsonObject {
  const items = Array.from({ length: 8 }, (_, i) => ({
    id: i,
    title: `Finding ${i}`,
    text: `arm64 builds finish first on the shared runners; ${i * 7919}`,
  }));
  const base = { sources: [] as string[], notes: "", items, n };
  base.notes = "n".repeat(Math.max(0, 1024 - JSON.stringify(base).length));
  return base;
}

/** What one engine under test does for each op. */
interface Subject {
  name: string;
  walPath: string;
  db: DatabaseSync;
  mint(i: number): Promise<unknown>;
  save(i: number): Promise<unknown>;
  patch(i: number): Promise<unknown>;
  steady(i: number): Promise<unknown>;
  close(): Promise<void>;
}

/** What a store module exports that the bench uses (this checkout's, or the one in `--before`). */
interface StoreModule {
  HandleStore: typeof HandleStore;
  Append: typeof Append;
  SqliteBackend: typeof SqliteBackend;
}

/** The store of another checkout, loaded from its own files. */
async function loadBefore(root: string): Promise<StoreModule> {
  const url = (p: string) => new URL(p, `file://${Deno.realPathSync(root)}/`).href;
  const mod = await import(url("mod.ts"));
  const sqlite = await import(url("src/backends/sqlite.ts"));
  return { HandleStore: mod.HandleStore, Append: mod.Append, SqliteBackend: sqlite.SqliteBackend };
}

async function storeSubject(
  tag: string,
  name = "mcpstate",
  m: StoreModule = { HandleStore, Append, SqliteBackend },
): Promise<Subject> {
  const path = `${dir}/${tag}.db`;
  const backend = await m.SqliteBackend.fromUrl(`sqlite:///${path}`);
  const store = new m.HandleStore(backend, { reclaimIntervalMs: 0 });
  const handles: string[] = [];
  const versions: number[] = [];
  for (let i = 0; i < HANDLES; i++) {
    handles.push(await store.mint("bench", state1k(i), { user: USER }));
    versions.push(1);
  }
  return {
    name,
    walPath: `${path}-wal`,
    db: backend.database,
    mint: (i) => store.mint("bench", state1k(i), { user: USER }),
    async save(i) {
      const k = i % HOT;
      const snap = await store.save(handles[k]!, state1k(i), {
        user: USER,
        expectVersion: versions[k]!,
      });
      versions[k] = snap.version;
    },
    async patch(i) {
      const k = HOT + (i % HOT);
      const snap = await store.patch(handles[k]!, [m.Append("sources", `https://x.test/${i}`)], {
        user: USER,
      });
      versions[k] = snap.version;
    },
    async steady(i) {
      const k = 2 * HOT + (i % STEADY);
      const snap = await store.save(handles[k]!, state1k(i), {
        user: USER,
        expectVersion: versions[k]!,
      });
      versions[k] = snap.version;
    },
    close: () => store.close(),
  };
}

/** The Python 0.2 store's statements, replayed (see the module doc). */
function pythonSubject(tag: string): Subject {
  const path = `${dir}/${tag}.db`;
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  db.exec(`
    CREATE TABLE handles (
      user TEXT NOT NULL, handle TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
      version INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
      expires_at REAL, last_writer TEXT, PRIMARY KEY (user, handle));
    CREATE TABLE changelog (
      id INTEGER PRIMARY KEY, user TEXT NOT NULL, handle TEXT NOT NULL,
      version INTEGER NOT NULL, at REAL NOT NULL, op TEXT NOT NULL, data TEXT);`);
  const p = (sql: string): StatementSync => db.prepare(sql);
  const begin = p("BEGIN IMMEDIATE"), commit = p("COMMIT");
  const ins = p(
    "INSERT OR IGNORE INTO handles VALUES (?, ?, ?, ?, 1, ?, ?, NULL, NULL)",
  );
  const upd = p(
    "UPDATE handles SET state = ?, version = version + 1, updated_at = ? " +
      "WHERE user = ? AND handle = ? AND version = ?",
  );
  const sel = p("SELECT state, version FROM handles WHERE user = ? AND handle = ?");
  const log = p(
    "INSERT INTO changelog (user, handle, version, at, op, data) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const tx = <T>(fn: () => T): T => {
    begin.run();
    try {
      const out = fn();
      commit.run();
      return out;
    } catch (e) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw e;
    }
  };
  let minted = 0;
  const mint = (i: number) =>
    tx(() => {
      const h = `bench_${String(minted++).padStart(8, "0")}`;
      const now = Date.now() / 1000;
      ins.run(USER, h, "bench", JSON.stringify(state1k(i)), now, now);
      log.run(USER, h, 1, now, "mint", null);
      return h;
    });
  const handles: string[] = [];
  const versions: number[] = [];
  for (let i = 0; i < HANDLES; i++) (handles.push(mint(i)), versions.push(1));
  return {
    name: "python 0.2 statements",
    walPath: `${path}-wal`,
    db,
    mint: (i) => Promise.resolve(mint(i)),
    save(i) {
      const k = i % HOT;
      tx(() => {
        const now = Date.now() / 1000;
        const { changes } = upd.run(
          JSON.stringify(state1k(i)),
          now,
          USER,
          handles[k]!,
          versions[k]!,
        );
        if (changes !== 1) throw new Error("stale");
        versions[k]!++;
        log.run(USER, handles[k]!, versions[k]!, now, "save", null);
      });
      return Promise.resolve();
    },
    patch(i) {
      const k = HOT + (i % HOT);
      tx(() => {
        const row = sel.get(USER, handles[k]!)!;
        const s = JSON.parse(row.state as string);
        s.sources.push(`https://x.test/${i}`);
        const now = Date.now() / 1000;
        const v = (row.version as number) + 1;
        upd.run(JSON.stringify(s), now, USER, handles[k]!, row.version as number);
        log.run(USER, handles[k]!, v, now, "patch", JSON.stringify([{ op: "append" }]));
      });
      return Promise.resolve();
    },
    steady(i) {
      const k = 2 * HOT + (i % STEADY);
      tx(() => {
        const now = Date.now() / 1000;
        upd.run(JSON.stringify(state1k(i)), now, USER, handles[k]!, versions[k]!);
        versions[k]!++;
        log.run(USER, handles[k]!, versions[k]!, now, "save", null);
      });
      return Promise.resolve();
    },
    close: () => Promise.resolve(db.close()),
  };
}

type Op = "mint" | "save" | "patch" | "steady";
const OPS_LIST: Op[] = ["mint", "save", "patch", "steady"];
const LABEL: Record<Op, string> = {
  mint: "mint",
  save: "save",
  patch: "patch",
  steady: "steady save",
};

/** Writes per block: the subjects take turns, so that both see the same load on a shared disk. */
const BLOCK = 50;

/**
 * Runs `OPS` writes of one op single-flight on each subject, in alternating
 * blocks; returns each one's ops/s and WAL frames per write.
 */
async function measure(subjects: Subject[], op: Op, offset: number): Promise<[number, number][]> {
  const sizes: number[] = [];
  const ms = subjects.map(() => 0);
  const pageSizes: number[] = [];
  const size = (s: Subject) => {
    try {
      return Deno.statSync(s.walPath).size;
    } catch {
      return 0;
    }
  };
  // Steady saves: first fill the changelogs of their handles past the retention.
  if (op === "steady") {
    for (const s of subjects) {
      for (let i = 0; i < STEADY_WARMUP; i++) await s.steady(offset + 500_000 + i);
    }
  }
  for (const s of subjects) {
    s.db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    s.db.exec("PRAGMA wal_autocheckpoint = 0");
    pageSizes.push(s.db.prepare("PRAGMA page_size").get()!.page_size as number);
    // One write first, so that the count starts after the WAL header.
    await s[op](offset);
    sizes.push(size(s));
  }
  for (let done = 0; done < OPS; done += BLOCK) {
    for (const [k, s] of subjects.entries()) {
      const t0 = performance.now();
      for (let i = 1; i <= BLOCK; i++) await s[op](offset + done + i);
      ms[k]! += performance.now() - t0;
    }
  }
  const n = Math.ceil(OPS / BLOCK) * BLOCK;
  if (TREES) {
    for (const [k, s] of subjects.entries()) {
      console.log(`${LABEL[op]}, ${s.name}: ${framesByTree(s, sizes[k]!, pageSizes[k]!, n)}`);
    }
  }
  return subjects.map((s, k) => {
    const frames = (size(s) - sizes[k]!) / (pageSizes[k]! + 24) / n;
    s.db.exec("PRAGMA wal_autocheckpoint = 1000");
    s.db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    return [n / (ms[k]! / 1000), frames];
  });
}

/**
 * The WAL frames written since byte `from`, per write, by the B-tree their
 * page belongs to (`dbstat`; page 1, the file header, counts under
 * `sqlite_schema`).
 */
function framesByTree(s: Subject, from: number, pageSize: number, writes: number): string {
  const names = new Map<number, string>();
  for (const r of s.db.prepare("SELECT name, pageno, pagetype FROM dbstat").all()) {
    names.set(r.pageno as number, `${r.name}${r.pagetype === "overflow" ? " (overflow)" : ""}`);
  }
  const wal = Deno.readFileSync(s.walPath);
  const tally = new Map<string, number>();
  for (let at = from; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    const page = new DataView(wal.buffer, at, 4).getUint32(0);
    const name = names.get(page) ?? "free";
    tally.set(name, (tally.get(name) ?? 0) + 1);
  }
  return [...tally].sort((a, b) => b[1] - a[1])
    .map(([name, count]) => `${name} ${(count / writes).toFixed(2)}`).join(", ");
}

const before = BEFORE === undefined ? undefined : await loadBefore(BEFORE);
const NAMES = ["python 0.2 statements", ...(before ? ["mcpstate before"] : []), "mcpstate"];
const results = new Map<string, { rates: number[]; frames: number[] }>();
for (let run = 0; run < RUNS; run++) {
  const subjects = [
    pythonSubject(`py-${run}`),
    ...(before ? [await storeSubject(`before-${run}`, "mcpstate before", before)] : []),
    await storeSubject(`store-${run}`),
  ];
  for (const op of OPS_LIST) {
    const measured = await measure(subjects, op, (run + 1) * 1_000_000);
    for (const [k, s] of subjects.entries()) {
      const [rate, frames] = measured[k]!;
      const key = `${op}\t${s.name}`;
      const r = results.get(key) ?? { rates: [], frames: [] };
      r.rates.push(rate);
      r.frames.push(frames);
      results.set(key, r);
    }
  }
  for (const s of subjects) await s.close();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
/** The median over runs of `name`'s rate over `base`'s in the same run. */
const ratio = (op: Op, name: string, base: string) => {
  const a = results.get(`${op}\t${name}`)!.rates, b = results.get(`${op}\t${base}`)!.rates;
  return median(a.map((r, i) => r / b[i]!)).toFixed(2) + "×";
};
console.log(
  `| op, 1 KiB, history on, synchronous=FULL | engine | writes/s (median of ${RUNS}) | range | × python stand-in |${
    before ? " × before |" : ""
  } WAL frames / write | pwrite calls / write |`,
);
console.log(`|---|---|---:|---:|---:|${before ? "---:|" : ""}---:|---:|`);
for (const op of OPS_LIST) {
  for (const name of NAMES) {
    const r = results.get(`${op}\t${name}`)!;
    const f = median(r.frames);
    const vsBefore = before ? ` ${ratio(op, name, "mcpstate before")} |` : "";
    console.log(
      `| ${LABEL[op]} | ${name} | ${fmt(median(r.rates))} | ${fmt(Math.min(...r.rates))}–${
        fmt(Math.max(...r.rates))
      } | ${ratio(op, name, NAMES[0]!)} |${vsBefore} ${f.toFixed(2)} | ${(2 * f).toFixed(2)} |`,
    );
  }
}
