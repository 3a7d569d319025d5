/**
 * SQLite small writes: WAL frames per write and the write rate of 1 KiB
 * mint, save (with `expectVersion`) and patch (`append`), history on (the
 * default) and `synchronous=FULL`, against a stand-in for the Python
 * mcpstate 0.2 store in the same run.
 *
 * With `PEER_SRC` set (the folder of the Python store's `mcpstate`
 * package), the real Python 0.2 store takes its turns too, run with
 * `python3` through its public API (`bench/_peer.ts`), on its own file, with
 * its own settings (WAL, SQLite's default `synchronous=FULL`: one fsync per
 * write, as here); its blocks are timed inside Python. It keeps no
 * changelog. Its stand-in replays the statements it runs through
 * `node:sqlite` on its own file, same pragmas:
 * a rowid `handles` table keyed by `(user, handle)` with REAL seconds, and
 * one changelog row per write in a rowid table, one transaction (one
 * fsync) per write. It does the JSON work it cannot avoid
 * (`JSON.stringify`, and for a patch a parse), nothing more.
 *
 * Beside them, the disk's floor: each write only 8 KiB (two WAL frames, what
 * a small save writes) at the next offset of a file, then `fdatasync`: the
 * fastest any engine can write durably one at a time on that disk.
 *
 * They take turns in blocks of 50 writes, so that all see the same load on a
 * shared disk; ratios are per run. Each runs in a worker of its own (its own
 * V8 isolate, its own copy of every module): two stores in one isolate share
 * the npm modules they both import, and code that one of them calls in its
 * own way runs slower for the other (0.4.0 beside this tree in one isolate
 * made this tree's patches 20% slower than an identical copy of it did).
 *
 * Rates are timed as the engines run deployed: automatic checkpoints on
 * (SQLite's default, every 1,000 pages), so the WAL is overwritten in place
 * once it has grown, and an engine that writes fewer frames checkpoints less
 * often. With `--no-checkpoints` they are timed with automatic checkpoints
 * off instead, the WAL growing by every write (every `fdatasync` then also
 * commits the file's new size), as this bench did before.
 *
 * Frames are counted in a pass of their own, untimed, from the growth of the
 * `-wal` file with automatic checkpoints off: (bytes written) / (page size +
 * 24). SQLite writes a frame as two `pwrite` calls (header, page), so the
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
 * PEER_SRC=DIR deno run --allow-all bench/sqlite_frames.ts [--runs=3] [--ops=1000] [--trees] [--before=DIR] [--dir=DIR] [--no-checkpoints] [--no-history]
 * ```
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import type { Append, HandleStore, JsonObject } from "../mod.ts";
import type { SqliteBackend } from "../src/backends/sqlite.ts";
import { Peer } from "./_peer.ts";

/** What a worker is told once, when it opens its subject. */
interface Config {
  dir: string;
  ops: number;
  trees: boolean;
  noCheckpoints: boolean;
  /** `--no-history`: the stores run with `history: false`. */
  noHistory: boolean;
}
/** Set in a worker by its first message. */
let config: Config;
/** Handles a user has before the count; writes go round-robin over the first `HOT` of them. */
const HANDLES = 1000;
const HOT = 50;
/** Handles of the steady saves (after the save and patch handles), and writes before the count. */
const STEADY = 20;
const STEADY_WARMUP = STEADY * 110;
const USER = "bench-user";

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
  /** The database and its `-wal` file; none for the disk's floor. */
  walPath?: string;
  db?: DatabaseSync;
  mint(i: number): Promise<unknown>;
  save(i: number): Promise<unknown>;
  patch(i: number): Promise<unknown>;
  steady(i: number): Promise<unknown>;
  /** Runs `n` writes of `op` and answers their milliseconds, for a subject that times itself. */
  block?(op: Op, from: number, n: number): Promise<number>;
  /** Runs a pragma on the connection that writes, when it is not {@link Subject.db}. */
  pragma?(sql: string): Promise<void>;
  close(): Promise<void>;
}

/** Runs a pragma on the subject's writing connection. */
async function pragma(s: Subject, sql: string): Promise<void> {
  if (s.pragma) await s.pragma(sql);
  else s.db?.exec(sql);
}

/** The real Python 0.2 store (see the module doc): its writes run and are timed in Python. */
async function peerSubject(tag: string): Promise<Subject> {
  const path = `${config.dir}/${tag}.db`;
  const peer = Peer.start()!;
  await peer.ask({ open: path, handles: HANDLES, template: state1k(0) });
  const one = (op: Op) => (i: number) => peer.ask({ block: op, from: i - 1, count: 1 });
  return {
    name: PEER,
    walPath: `${path}-wal`,
    db: new DatabaseSync(path),
    mint: one("mint"),
    save: one("save"),
    patch: one("patch"),
    steady: one("steady"),
    block: async (op, from, count) => (await peer.ask({ block: op, from, count }))!,
    pragma: async (sql) => void await peer.ask({ sql }),
    close: () => peer.close(),
  };
}

/** The real Python store's name in the table. */
const PEER = "python 0.2 (real)";

/** What a store module exports that the bench uses (this checkout's, or the one in `--before`). */
interface StoreModule {
  HandleStore: typeof HandleStore;
  Append: typeof Append;
  SqliteBackend: typeof SqliteBackend;
}

/** The store of a checkout (this one, or another), loaded from its own files. */
async function loadStore(root: string): Promise<StoreModule> {
  const url = (p: string) => new URL(p, `file://${Deno.realPathSync(root)}/`).href;
  const mod = await import(url("mod.ts"));
  const sqlite = await import(url("src/backends/sqlite.ts"));
  return { HandleStore: mod.HandleStore, Append: mod.Append, SqliteBackend: sqlite.SqliteBackend };
}

async function storeSubject(tag: string, name: string, m: StoreModule): Promise<Subject> {
  const path = `${config.dir}/${tag}.db`;
  const backend = await m.SqliteBackend.fromUrl(`sqlite:///${path}`);
  const store = new m.HandleStore(backend, {
    reclaimIntervalMs: 0,
    ...(config.noHistory ? { history: false as const } : {}),
  });
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

/** The disk's floor, by name. */
const FLOOR = "disk floor: 8 KiB + fdatasync";
/** Bytes the disk's floor writes per op: two WAL frames of a 4 KiB page, as a small save does. */
const FLOOR_BYTES = 2 * (4096 + 24);
/** The floor's file: it wraps at this size, so that (like a WAL once grown) it is overwritten. */
const FLOOR_FILE = 4 << 20;

/**
 * The disk's floor: no SQLite, no JSON, only what durability costs each
 * single-flight write — {@link FLOOR_BYTES} written at the next offset of a
 * file, then `fdatasync`. No engine can write durably faster one at a time.
 */
function floorSubject(tag: string): Subject {
  const file = Deno.openSync(`${config.dir}/${tag}.floor`, {
    read: true,
    write: true,
    create: true,
  });
  const page = new Uint8Array(FLOOR_BYTES).fill(7);
  let at = 0;
  const put = () => {
    if (at + FLOOR_BYTES > FLOOR_FILE) at = 0;
    file.seekSync(at, Deno.SeekMode.Start);
    for (let n = 0; n < page.length;) n += file.writeSync(page.subarray(n));
    at += FLOOR_BYTES;
  };
  const write = () => {
    put();
    file.syncDataSync();
    return Promise.resolve();
  };
  // Grown once, as a deployed WAL is.
  while (at + FLOOR_BYTES <= FLOOR_FILE) put();
  file.syncSync();
  return {
    name: FLOOR,
    mint: write,
    save: write,
    patch: write,
    steady: write,
    close: () => Promise.resolve(file.close()),
  };
}

/** The Python 0.2 store's statements, replayed (see the module doc). */
function pythonSubject(tag: string): Subject {
  const path = `${config.dir}/${tag}.db`;
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

/** Writes per block: the subjects take turns, so that all see the same load on a shared disk. */
const BLOCK = 50;

/** What the main thread asks a worker, and what it answers. */
type Request =
  | {
    type: "open";
    config: Config;
    kind: "python" | "peer" | "floor" | "store";
    tag: string;
    root?: string;
    name?: string;
  }
  | { type: "prepare"; op: Op; offset: number }
  | { type: "block"; op: Op; from: number; count: number }
  | { type: "frames"; op: Op; offset: number }
  | { type: "close" };

/** A worker's side: one subject, driven by the main thread's requests. */
function serve(): void {
  let subject: Subject;
  const handle = async (m: Request): Promise<unknown> => {
    switch (m.type) {
      case "open":
        config = m.config;
        subject = m.kind === "python"
          ? pythonSubject(m.tag)
          : m.kind === "peer"
          ? await peerSubject(m.tag)
          : m.kind === "floor"
          ? floorSubject(m.tag)
          : await storeSubject(m.tag, m.name!, await loadStore(m.root!));
        return subject.name;
      case "prepare": {
        // Steady saves: first fill the changelogs of their handles past the retention.
        if (m.op === "steady") {
          for (let i = 0; i < STEADY_WARMUP; i++) await subject.steady(m.offset + 500_000 + i);
        }
        // Deployed, a WAL keeps its size once grown (up to `journal_size_limit`):
        // restart it without truncating. Without checkpoints it grows from nothing.
        await pragma(
          subject,
          `PRAGMA wal_checkpoint(${config.noCheckpoints ? "TRUNCATE" : "RESTART"})`,
        );
        if (config.noCheckpoints) await pragma(subject, "PRAGMA wal_autocheckpoint = 0");
        return null;
      }
      case "block": {
        if (subject.block) return await subject.block(m.op, m.from, m.count);
        const t0 = performance.now();
        for (let i = 1; i <= m.count; i++) await subject[m.op](m.from + i);
        return performance.now() - t0;
      }
      case "frames":
        return await countFrames(subject, m.op, m.offset);
      case "close":
        await subject.close();
        return null;
    }
  };
  const scope = globalThis as unknown as {
    onmessage: (e: MessageEvent<Request>) => void;
    postMessage(m: unknown): void;
  };
  scope.onmessage = (e) => {
    handle(e.data).then(
      (value) => scope.postMessage({ ok: true, value }),
      (error) => scope.postMessage({ ok: false, error: String(error?.stack ?? error) }),
    );
  };
}

/** The main thread's handle on a worker: one request at a time. */
class Remote {
  readonly #worker = new Worker(import.meta.url, { type: "module" });
  #waiting: ((m: { ok: boolean; value?: unknown; error?: string }) => void) | undefined;

  constructor() {
    this.#worker.onmessage = (e) => this.#waiting!(e.data);
    // A worker that dies answers its request with the error instead of never.
    this.#worker.onerror = (e) => {
      e.preventDefault();
      this.#waiting?.({ ok: false, error: e.message });
    };
  }

  ask<T>(m: Request): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#waiting = (r) => r.ok ? resolve(r.value as T) : reject(new Error(r.error));
      this.#worker.postMessage(m);
    });
  }

  async close(): Promise<void> {
    await this.ask({ type: "close" });
    this.#worker.terminate();
  }
}

/**
 * Runs `ops` writes of one op single-flight on each subject, in alternating
 * blocks, then counts the frames of as many more with checkpoints off;
 * returns each one's ops/s and WAL frames per write.
 */
async function measure(
  subjects: Remote[],
  op: Op,
  offset: number,
  ops: number,
): Promise<[number, number][]> {
  const ms = subjects.map(() => 0);
  for (const s of subjects) await s.ask({ type: "prepare", op, offset });
  for (let done = 0; done < ops; done += BLOCK) {
    for (const [k, s] of subjects.entries()) {
      ms[k]! += await s.ask<number>({ type: "block", op, from: offset + done, count: BLOCK });
    }
  }
  const n = Math.ceil(ops / BLOCK) * BLOCK;
  const counted: number[] = [];
  for (const s of subjects) {
    counted.push(await s.ask<number>({ type: "frames", op, offset: offset + n + 1 }));
  }
  return subjects.map((_, k) => [n / (ms[k]! / 1000), counted[k]!]);
}

/** WAL frames per write of `config.ops` writes of `op`, checkpoints off, untimed. */
async function countFrames(s: Subject, op: Op, offset: number): Promise<number> {
  if (!s.db || !s.walPath) return NaN;
  const db = s.db, walPath = s.walPath, writes = config.ops;
  const size = () => {
    try {
      return Deno.statSync(walPath).size;
    } catch {
      return 0;
    }
  };
  const pageSize = db.prepare("PRAGMA page_size").get()!.page_size as number;
  await pragma(s, "PRAGMA wal_checkpoint(TRUNCATE)");
  await pragma(s, "PRAGMA wal_autocheckpoint = 0");
  // One write first, so that the count starts after the WAL header.
  await s[op](offset);
  const from = size();
  for (let i = 1; i <= writes; i++) await s[op](offset + i);
  if (config.trees) {
    console.log(`${LABEL[op]}, ${s.name}: ${framesByTree(s, from, pageSize, writes)}`);
  }
  const frames = (size() - from) / (pageSize + 24) / writes;
  await pragma(s, "PRAGMA wal_autocheckpoint = 1000");
  await pragma(s, "PRAGMA wal_checkpoint(RESTART)");
  return frames;
}

/**
 * The WAL frames written since byte `from`, per write, by the B-tree their
 * page belongs to (`dbstat`; page 1, the file header, counts under
 * `sqlite_schema`).
 */
function framesByTree(s: Subject, from: number, pageSize: number, writes: number): string {
  const names = new Map<number, string>();
  for (const r of s.db!.prepare("SELECT name, pageno, pagetype FROM dbstat").all()) {
    names.set(r.pageno as number, `${r.name}${r.pagetype === "overflow" ? " (overflow)" : ""}`);
  }
  const wal = Deno.readFileSync(s.walPath!);
  const tally = new Map<string, number>();
  for (let at = from; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    const page = new DataView(wal.buffer, at, 4).getUint32(0);
    const name = names.get(page) ?? "free";
    tally.set(name, (tally.get(name) ?? 0) + 1);
  }
  return [...tally].sort((a, b) => b[1] - a[1])
    .map(([name, count]) => `${name} ${(count / writes).toFixed(2)}`).join(", ");
}

/** The main thread: parses the arguments, runs the subjects' workers, prints the table. */
async function main(): Promise<void> {
  const args = new Map(
    Deno.args.filter((a) => a.startsWith("--")).map((a) => {
      const [k, v] = a.slice(2).split("=");
      return [k!, v ?? ""] as const;
    }),
  );
  const RUNS = Number(args.get("runs") ?? 3);
  const OPS = Number(args.get("ops") ?? 1000);
  const BEFORE = args.get("before");
  const dir = await Deno.makeTempDir({
    prefix: "mcpstate-frames-",
    ...(args.has("dir") ? { dir: args.get("dir")! } : {}),
  });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const cfg: Config = {
    dir,
    ops: OPS,
    trees: args.has("trees"),
    noCheckpoints: args.has("no-checkpoints"),
    noHistory: args.has("no-history"),
  };
  const here = new URL("..", import.meta.url).pathname;
  const open = async (m: Omit<Extract<Request, { type: "open" }>, "type" | "config">) => {
    const r = new Remote();
    await r.ask({ type: "open", config: cfg, ...m });
    return r;
  };
  const PEERED = Peer.src !== undefined;
  const NAMES = [
    "python 0.2 statements",
    ...(PEERED ? [PEER] : []),
    ...(BEFORE ? ["mcpstate before"] : []),
    "mcpstate",
    FLOOR,
  ];
  const results = new Map<string, { rates: number[]; frames: number[] }>();
  for (let run = 0; run < RUNS; run++) {
    const subjects = [
      await open({ kind: "python", tag: `py-${run}` }),
      ...(PEERED ? [await open({ kind: "peer", tag: `peer-${run}` })] : []),
      ...(BEFORE
        ? [
          await open({
            kind: "store",
            tag: `before-${run}`,
            name: "mcpstate before",
            root: BEFORE,
          }),
        ]
        : []),
      await open({ kind: "store", tag: `store-${run}`, name: "mcpstate", root: here }),
      await open({ kind: "floor", tag: `floor-${run}` }),
    ];
    for (const op of OPS_LIST) {
      const measured = await measure(subjects, op, (run + 1) * 1_000_000, OPS);
      for (const [k, name] of NAMES.entries()) {
        const [rate, frames] = measured[k]!;
        const key = `${op}\t${name}`;
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
  const frames = (n: number) => Number.isNaN(n) ? "–" : n.toFixed(2);
  /** The median over runs of `name`'s rate over `base`'s in the same run. */
  const ratio = (op: Op, name: string, base: string) => {
    const a = results.get(`${op}\t${name}`)!.rates, b = results.get(`${op}\t${base}`)!.rates;
    return median(a.map((r, i) => r / b[i]!)).toFixed(2) + "×";
  };
  console.log(
    `| op, 1 KiB, history ${
      cfg.noHistory ? "off" : "on"
    }, synchronous=FULL | engine | writes/s (median of ${RUNS}) | range | × python stand-in |${
      PEERED ? " × python 0.2 (real) |" : ""
    }${BEFORE ? " × before |" : ""} WAL frames / write | pwrite calls / write |`,
  );
  console.log(`|---|---|---:|---:|---:|${PEERED ? "---:|" : ""}${BEFORE ? "---:|" : ""}---:|---:|`);
  for (const op of OPS_LIST) {
    for (const name of NAMES) {
      const r = results.get(`${op}\t${name}`)!;
      const f = median(r.frames);
      const vsBefore = BEFORE ? ` ${ratio(op, name, "mcpstate before")} |` : "";
      const vsPeer = PEERED ? ` ${ratio(op, name, PEER)} |` : "";
      console.log(
        `| ${LABEL[op]} | ${name} | ${fmt(median(r.rates))} | ${fmt(Math.min(...r.rates))}–${
          fmt(Math.max(...r.rates))
        } | ${ratio(op, name, NAMES[0]!)} |${vsPeer}${vsBefore} ${frames(f)} | ${frames(2 * f)} |`,
      );
    }
  }
}

if ("WorkerGlobalScope" in globalThis) serve();
else await main();
