/**
 * The one child program of the cross-process tests: a real, separate OS
 * process that opens any backend from its URL (`HandleStore.fromUrl`), or one
 * engine's file directly, and runs one workload on the data it shares with
 * the test. {@link spawnChild} starts it; its first argument names the
 * workload.
 *
 * - `writers <url> <user> <handle> <tag> <writers> <stores> <count|forever> [pauseMs]`:
 *   opens `stores` stores (each its own connection), prints `ready`, waits
 *   for a line on stdin (so that every process starts writing at the same
 *   moment), then runs `writers` concurrent loops, spread round-robin over
 *   the stores, of `count` patches each on the handle, pausing `pauseMs`
 *   after each when given. Writer `w` writes as `<tag>/<w>`, and its patch
 *   `i` increments `n` and appends `<tag>/<w>:<i>` to `log`. Prints
 *   `{"patches": <n>}` at the end. With `forever` the loops never end, every
 *   other writer passes its entry as an idempotency key, and every
 *   acknowledged patch prints `<entry> <version>`: the test kills the
 *   process (SIGKILL) while its writes are in flight.
 * - `patch <url> <user> <handle>`: prints `ready`, then for every line on
 *   stdin increments `n` once (writer `child`) and prints
 *   `<version> <epoch ms>`; exits 0 when stdin closes.
 * - `lease <url> <user> <holder> <seconds> <handle>…`: takes a lease on each
 *   handle for `holder`, prints `leased <expiresAt epoch ms>…` (one per
 *   handle), then waits until the test kills it.
 * - `leases <url> <user> <tag> <stores> <handle>…`: `stores` stores race to
 *   lease every handle for 60 s, store `i` as holder `<tag>/<i>`, and print
 *   the handles each holder got, as JSON.
 * - `create-at <gapMs> <url>…`: prints `ready`, reads a moment (epoch ms)
 *   from stdin, then opens the `k`-th URL at that moment plus `k * gapMs`
 *   (busy-waiting for it) and mints a handle of kind `race` for user `u`
 *   there.
 * - `mint-quota <url> <user> <maxHandles> <writers>`: opens one store per
 *   writer with `quotas: { maxHandles }`, prints `ready`, waits for a line
 *   on stdin, then each writer mints handles of kind `race` until one is
 *   refused as `quota_exceeded`; prints `{"minted": <n>}`.
 * - `merge-back <url> <user> <fork>`: prints `ready`, waits for a line on
 *   stdin, merges the fork back, and prints `{"ok": true, "version": <n>}`
 *   or the error's payload with `"ok": false`.
 * - `grantee <url> <user> <alias> <writers>`: prints `ready`, waits for a
 *   line on stdin, then runs `writers` concurrent loops of patches through
 *   the shared handle `alias` as `user` (each appends `<w>:<i>` to `log`),
 *   printing `<w>:<i> <version>` for every acknowledged one, until each
 *   loop is refused; prints `{"ended": [<codes>], "reasons": [<reasons>],
 *   "messages": [<messages>]}`.
 * - `open <url>`: prints, as JSON, whether this process has Deno KV
 *   (`openKv`: the `typeof Deno.openKv`) and what opening the URL gave:
 *   `opened: true`, or the error's payload.
 * - `kv-pause <file> <user> <handle> <stage> <fill>`: saves a 1 MiB state
 *   over version 1 through a Deno KV backend whose `Deno.Kv` stops at one
 *   commit, prints `paused` and waits to be killed. `stage` is `swap` (the
 *   head swap, after every chunk is written) or `chunks` (the second chunk
 *   commit).
 * - `kv-log <file> <user> <handle> <stopAt> <tag>`: patches the handle over
 *   and over through a Deno KV backend (each patch appends `<tag>:<i>` to
 *   its `log` list), printing `started` after the first; it stops at the
 *   commit of the `stopAt`-th write (the one that sets its changelog entry),
 *   prints `paused` and waits to be killed.
 * - `sqlite-lock <file> <ms>`: takes the write lock of a SQLite file with a
 *   raw `BEGIN IMMEDIATE`, sets `n` to 100 in every state, prints `locked`,
 *   and holds the lock `ms` milliseconds before it commits.
 *
 * Any error is printed to stderr and exits 1.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { Append, HandleStore, Increment, McpStateError } from "../mod.ts";
import { Lines, readAll, sleep } from "./_helpers.ts";

const encoder = new TextEncoder();

/** A running child process: its stdout line by line, its stdin, its end. */
export class Child {
  /** The process. */
  readonly process: Deno.ChildProcess;
  /** Its stdout, line by line. */
  readonly stdout: Lines;
  #stdin: WritableStreamDefaultWriter<Uint8Array>;
  #stderr: Promise<string>;

  /** @param process A process spawned with every stream piped. */
  constructor(process: Deno.ChildProcess) {
    this.process = process;
    this.stdout = new Lines(process.stdout);
    this.#stdin = process.stdin.getWriter();
    this.#stderr = readAll(process.stderr);
  }

  /**
   * The next line of the child's stdout.
   *
   * @param what What the line is, for the failure when the child ended instead.
   */
  async line(what: string): Promise<string> {
    const line = await this.stdout.next();
    if (line !== null) return line;
    const { status, stderr } = await this.ended();
    throw new Error(`${what}: the child process ended (exit ${status.code}) before: ${stderr}`);
  }

  /** Writes one line to the child's stdin. */
  async send(line: string): Promise<void> {
    await this.#stdin.write(encoder.encode(line + "\n"));
  }

  /** Closes the child's stdin. */
  async closeStdin(): Promise<void> {
    await this.#stdin.close().catch(() => {});
  }

  /** Kills the child with SIGKILL (when it still runs). */
  kill(): void {
    try {
      this.process.kill("SIGKILL");
    } catch { /* it has ended already */ }
  }

  /**
   * Waits for the child to end, reading and dropping what is left of its
   * stdout.
   *
   * @returns Its exit status and everything it wrote to stderr.
   */
  async ended(): Promise<{ status: Deno.CommandStatus; stderr: string }> {
    await this.closeStdin();
    const [status, stderr] = await Promise.all([
      this.process.status,
      this.#stderr,
      this.stdout.drain(),
    ]);
    return { status, stderr };
  }

  /** Waits for the child to end and asserts that it exited 0; returns its stderr. */
  async succeeded(): Promise<string> {
    const { status, stderr } = await this.ended();
    if (status.code !== 0) {
      throw new Error(`the child process failed (exit ${status.code}): ${stderr}`);
    }
    return stderr;
  }
}

/**
 * Starts this program with `args` (see the module doc).
 *
 * @param args The mode and its arguments.
 * @param options `unstableKv: false` runs it without `--unstable-kv`.
 * @returns The running child.
 */
export function spawnChild(args: string[], options: { unstableKv?: boolean } = {}): Child {
  const flags = options.unstableKv === false ? [] : ["--unstable-kv"];
  return new Child(
    new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", ...flags, fileURLToPath(import.meta.url), ...args],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn(),
  );
}

/** Prints one line, whole, before anything else happens (a kill may follow). */
function say(line: string): void {
  const bytes = encoder.encode(line + "\n");
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

/** `n` stores on `url`, each its own connection. */
function openStores(url: string, n: number): Promise<HandleStore[]> {
  return Promise.all(
    Array.from({ length: n }, () => HandleStore.fromUrl(url, { reclaimIntervalMs: 0 })),
  );
}

async function writers(args: string[]): Promise<void> {
  const [url, user, handle, tag, writersArg, storesArg, countArg, pauseArg = "0"] = args;
  if (!url || !user || !handle || !tag || !writersArg || !storesArg || !countArg) {
    throw new Error("usage: writers <url> <user> <handle> <tag> <writers> <stores> <count>");
  }
  const forever = countArg === "forever";
  const count = forever ? Infinity : Number(countArg);
  const pauseMs = Number(pauseArg);
  const stores = await openStores(url, Number(storesArg));
  say("ready");
  await new Lines(Deno.stdin.readable).next();
  await Promise.all(Array.from({ length: Number(writersArg) }, async (_, w) => {
    const store = stores[w % stores.length]!;
    const writer = `${tag}/${w}`;
    for (let i = 0; i < count; i++) {
      const entry = `${writer}:${i}`;
      const s = await store.patch(handle, [Increment("", "n"), Append("log", entry)], {
        user,
        writer,
        ...(forever && w % 2 === 1 ? { idempotencyKey: entry } : {}),
      });
      if (forever) say(`${entry} ${s.version}`);
      if (pauseMs > 0) await sleep(pauseMs);
    }
  }));
  say(JSON.stringify({ patches: Number(writersArg) * count }));
  await Promise.all(stores.map((s) => s.close()));
}

async function patch(args: string[]): Promise<void> {
  const [url, user, handle] = args;
  if (!url || !user || !handle) throw new Error("usage: patch <url> <user> <handle>");
  const [store] = await openStores(url, 1);
  say("ready");
  const stdin = new Lines(Deno.stdin.readable);
  while (await stdin.next() !== null) {
    const s = await store!.patch(handle, [Increment("", "n")], { user, writer: "child" });
    say(`${s.version} ${Date.now()}`);
  }
  await store!.close();
}

async function grantee(args: string[]): Promise<void> {
  const [url, user, alias, writersArg] = args;
  if (!url || !user || !alias || !writersArg) {
    throw new Error("usage: grantee <url> <user> <alias> <writers>");
  }
  const [store] = await openStores(url, 1);
  say("ready");
  await new Lines(Deno.stdin.readable).next();
  const ended = await Promise.all(
    Array.from({ length: Number(writersArg) }, async (_, w) => {
      for (let i = 0;; i++) {
        try {
          const entry = `${w}:${i}`;
          const s = await store!.patch(alias, [Append("log", entry)], { user, writer: "grantee" });
          say(`${entry} ${s.version}`);
        } catch (e) {
          if (!(e instanceof McpStateError)) throw e;
          return [e.code, String(e.details.reason), e.message];
        }
      }
    }),
  );
  say(JSON.stringify({
    ended: ended.map((e) => e[0]),
    reasons: ended.map((e) => e[1]),
    messages: ended.map((e) => e[2]),
  }));
  await store!.close();
}

async function lease(args: string[]): Promise<void> {
  const [url, user, holder, seconds, ...handles] = args;
  if (!url || !user || !holder || !seconds || handles.length === 0) {
    throw new Error("usage: lease <url> <user> <holder> <seconds> <handle>…");
  }
  const [store] = await openStores(url, 1);
  const until: number[] = [];
  for (const h of handles) {
    const l = await store!.lease(h, { user, writer: holder, seconds: Number(seconds) });
    if (!l.acquired) throw new Error(`the lease of ${h} is held by ${l.holder}`);
    until.push(l.expiresAt.getTime());
  }
  say(`leased ${until.join(" ")}`);
  setInterval(() => {}, 60_000); // until SIGKILL
}

async function leases(args: string[]): Promise<void> {
  const [url, user, tag, storesArg, ...handles] = args;
  if (!url || !user || !tag || !storesArg) {
    throw new Error("usage: leases <url> <user> <tag> <stores> <handle>…");
  }
  const stores = await openStores(url, Number(storesArg));
  const won = await Promise.all(stores.map(async (store, i) => {
    const mine: string[] = [];
    for (const h of handles) {
      const l = await store.lease(h, { user, writer: `${tag}/${i}`, seconds: 60 });
      if (l.acquired) mine.push(h);
    }
    return [`${tag}/${i}`, mine] as const;
  }));
  say(JSON.stringify(Object.fromEntries(won)));
  await Promise.all(stores.map((s) => s.close()));
}

async function createAt(args: string[]): Promise<void> {
  const [gapMs, ...urls] = args;
  if (!gapMs) throw new Error("usage: create-at <gapMs> <url>…");
  say("ready");
  const start = await new Lines(Deno.stdin.readable).next();
  for (const [k, url] of urls.entries()) {
    while (Date.now() < Number(start) + k * Number(gapMs)) await sleep(1);
    await using store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
    await store.mint("race", {}, { user: "u" });
  }
}

async function mintQuota(args: string[]): Promise<void> {
  const [url, user, maxArg, writersArg] = args;
  if (!url || !user || !maxArg || !writersArg) {
    throw new Error("usage: mint-quota <url> <user> <maxHandles> <writers>");
  }
  const quotas = { maxHandles: Number(maxArg) };
  const stores = await Promise.all(
    Array.from(
      { length: Number(writersArg) },
      () => HandleStore.fromUrl(url, { reclaimIntervalMs: 0, quotas }),
    ),
  );
  say("ready");
  await new Lines(Deno.stdin.readable).next();
  const minted = await Promise.all(stores.map(async (store) => {
    for (let n = 0;; n++) {
      try {
        await store.mint("race", { n }, { user });
      } catch (e) {
        if (e instanceof McpStateError && e.code === "quota_exceeded") return n;
        throw e;
      }
    }
  }));
  say(JSON.stringify({ minted: minted.reduce((a, b) => a + b, 0) }));
  await Promise.all(stores.map((s) => s.close()));
}

async function mergeBack(args: string[]): Promise<void> {
  const [url, user, fork] = args;
  if (!url || !user || !fork) throw new Error("usage: merge-back <url> <user> <fork>");
  const store = await HandleStore.fromUrl(url, { reclaimIntervalMs: 0 });
  say("ready");
  await new Lines(Deno.stdin.readable).next();
  try {
    const snap = await store.mergeBack(fork, { user, writer: `child/${fork}` });
    say(JSON.stringify({ ok: true, version: snap.version }));
  } catch (e) {
    if (!(e instanceof McpStateError)) throw e;
    say(JSON.stringify({ ok: false, ...e.toPayload() }));
  } finally {
    await store.close();
  }
}

async function open(args: string[]): Promise<void> {
  const [url] = args;
  if (!url) throw new Error("usage: open <url>");
  const openKv = typeof (Deno as { openKv?: unknown }).openKv;
  try {
    await (await HandleStore.fromUrl(url)).close();
    say(JSON.stringify({ openKv, opened: true }));
  } catch (e) {
    if (!(e instanceof McpStateError)) throw e;
    say(JSON.stringify({ openKv, ...e.toPayload() }));
  }
}

/** A `Deno.Kv` whose commits pass through `onCommit` first. */
function interceptCommits(
  kv: Deno.Kv,
  onCommit: (sets: Deno.KvKey[], checks: Deno.KvKey[]) => Promise<void>,
): Deno.Kv {
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "atomic") {
        return () => {
          const op = target.atomic();
          const sets: Deno.KvKey[] = [];
          const checks: Deno.KvKey[] = [];
          const proxy: Deno.AtomicOperation = new Proxy(op, {
            get(t, p) {
              if (p === "commit") {
                return async () => {
                  await onCommit(sets, checks);
                  return await t.commit();
                };
              }
              const v = Reflect.get(t, p, t);
              if (typeof v !== "function") return v;
              return (...a: unknown[]) => {
                if (p === "set") sets.push(a[0] as Deno.KvKey);
                if (p === "check") checks.push((a[0] as Deno.AtomicCheck).key);
                const r = (v as (...x: unknown[]) => unknown).apply(t, a);
                return r === t ? proxy : r;
              };
            },
          });
          return proxy;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

/**
 * A store on the Deno KV `file` whose `Deno.Kv` calls `stopAt` before each
 * commit: when it answers true, the child prints `paused` and waits to be
 * killed. (The backend module is loaded here only, so that the other
 * workloads run in a process that may lack Deno KV.)
 */
async function pausingKvStore(
  file: string,
  stopAt: (sets: Deno.KvKey[], checks: Deno.KvKey[]) => boolean,
): Promise<HandleStore> {
  const { DenoKvBackend } = await import("../src/backends/denokv.ts");
  const kv = interceptCommits(await Deno.openKv(file), async (sets, checks) => {
    if (stopAt(sets, checks)) {
      say("paused");
      await new Promise(() => {});
    }
  });
  return new HandleStore(new DenoKvBackend(kv));
}

async function kvPause(args: string[]): Promise<void> {
  const [file, user, handle, stage, fill] = args;
  if (!file || !user || !handle || !stage || !fill) {
    throw new Error("usage: kv-pause <file> <user> <handle> <stage> <fill>");
  }
  let chunkCommits = 0;
  const store = await pausingKvStore(file, (sets, checks) => {
    const isSwap = sets.some((k) => k[3] === "h");
    const isChunks = sets.some((k) => k[3] === "c");
    if (isChunks && !isSwap) chunkCommits++;
    return stage === "swap" ? isSwap : isChunks && chunkCommits === 2 && checks.length > 0;
  });
  const body = fill.repeat(1_048_576 - '{"s":""}'.length);
  await store.save(handle, { s: body }, { user, expectVersion: 1 });
  say("saved (the pause never came)");
}

async function kvLog(args: string[]): Promise<void> {
  const [file, user, handle, stopAt, tag] = args;
  if (!file || !user || !handle || !stopAt || !tag) {
    throw new Error("usage: kv-log <file> <user> <handle> <stopAt> <tag>");
  }
  let logCommits = 0;
  const store = await pausingKvStore(
    file,
    (sets) => sets.some((k) => k[3] === "log") && ++logCommits === Number(stopAt),
  );
  for (let i = 0;; i++) {
    await store.patch(handle, [Increment("", "n"), Append("log", `${tag}:${i}`)], { user });
    if (i === 0) say("started");
  }
}

async function sqliteLock(args: string[]): Promise<void> {
  const [file, ms] = args;
  if (!file || !ms) throw new Error("usage: sqlite-lock <file> <ms>");
  const db = new DatabaseSync(file);
  db.exec("BEGIN IMMEDIATE");
  db.exec("UPDATE handles SET state = json_set(state, '$.n', 100)");
  say("locked");
  await sleep(Number(ms));
  db.exec("COMMIT");
  db.close();
}

const MODES: Record<string, (args: string[]) => Promise<void>> = {
  writers,
  patch,
  grantee,
  lease,
  leases,
  "create-at": createAt,
  "mint-quota": mintQuota,
  "merge-back": mergeBack,
  open,
  "kv-pause": kvPause,
  "kv-log": kvLog,
  "sqlite-lock": sqliteLock,
};

if (import.meta.main) {
  const [mode = "", ...args] = Deno.args;
  try {
    const run = MODES[mode];
    if (!run) throw new Error(`unknown mode ${JSON.stringify(mode)}: ${Object.keys(MODES)}`);
    await run(args);
  } catch (e) {
    console.error(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    Deno.exit(1);
  }
}
