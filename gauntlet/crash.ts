/**
 * Crash consistency: a child process (`_crash_child.ts`) does mixed writes
 * on a backend and prints every acknowledged one; the parent SIGKILLs it at
 * a random moment, reopens the store and checks that
 *
 * - the store opens at once, with no repair step (and, for the SQLite-based
 *   files, `PRAGMA integrity_check` says `ok`);
 * - every acknowledged write is there: versions, states, counters and logs
 *   exactly as acknowledged, plus at most the one write per handle that was
 *   in flight (applied whole, or not at all);
 * - nothing was applied twice and nothing appeared that was never written:
 *   every record matches the expected state of one of its versions, byte for
 *   byte, and the listing agrees with the records;
 * - forks, grants, aliases and moved handles are as acknowledged
 *   (`_travel.ts`; the model is `_crash_model.ts`, the checker
 *   `_crash_verify.ts`);
 * - at the end, every iteration's records are still exactly as verified.
 *
 * On Redis (AOF with `appendfsync always`), some iterations also SIGKILL the
 * `redis-server` at the same moment and restart it. With encryption keys the
 * engine's storage must hold no plaintext (`_plaintext.ts`); the maintenance
 * commands `mcpstate encrypt` and `keys rotate` can run beside the writer and
 * be killed too (`_maintenance.ts`); every few iterations a user is erased
 * with `mcpstate erase`, killed and run again (`_erase.ts`).
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import type { HandleStore } from "../mod.ts";
import { type RedisServer, startRedis } from "../tests/_redis.ts";
import { canonical, type ChildRun, getOrNull, type Line } from "./_crash_model.ts";
import { type EraseCounts, eraseKill } from "./_erase.ts";
import { tempHome } from "../tests/_cli_run.ts";
import { openStore, type Seen, verify, type VerifyCounts } from "./_crash_verify.ts";
import {
  completeMaintenance,
  type CrashKeys,
  type KeyMode,
  KeyPlan,
  killedMaintenance,
  type MaintenanceCounts,
} from "./_maintenance.ts";
import { freshMark, plaintextIn, type Storage, sweepCrashedChunks } from "./_plaintext.ts";
import {
  messageOf,
  quantile,
  randomSeed,
  Rng,
  round,
  sleep as sleepMs,
  timer,
  within,
} from "./_util.ts";

/** The backends the crash test runs on. */
export type CrashBackend = "sqlite" | "redis" | "denokv" | "postgres";

/** Every backend, in report order. */
export const CRASH_BACKENDS: readonly CrashBackend[] = ["sqlite", "redis", "denokv", "postgres"];

/**
 * The PostgreSQL server the gauntlet uses (each run in its own schema):
 * `MCPSTATE_TEST_POSTGRES_URL`, as for the PostgreSQL tests, else the local test database.
 */
export const POSTGRES_URL: string = envValue("MCPSTATE_TEST_POSTGRES_URL") ??
  "postgres://postgres@127.0.0.1:5432/test";

function envValue(name: string): string | undefined {
  const granted = Deno.permissions.querySync({ name: "env", variable: name }).state === "granted";
  return granted ? Deno.env.get(name) : undefined;
}

/** Driver messages of a server that is down or restarting. */
const OUTAGE =
  /unreachable or restarting|ECONNREFUSED|ECONNRESET|terminating connection|the database system is (starting up|shutting down|in recovery mode)|Connection terminated|CONNECTION_(CLOSED|ENDED|DESTROYED)/i;

const CHILD = fileURLToPath(new URL("./_crash_child.ts", import.meta.url));

/** Options of {@link runCrash}. */
export interface CrashOptions {
  /** The backend. */
  backend: CrashBackend;
  /** How many kill-and-verify iterations. */
  iterations: number;
  /** Concurrent writer lanes in the child. Default 3. */
  lanes?: number;
  /** The kill lands up to this many ms after the child is ready. Default 700. */
  maxRunMs?: number;
  /** On Redis, SIGKILL the server too on every n-th iteration (0: never). Default 4. */
  serverKillEvery?: number;
  /** Master seed (iteration seeds derive from it). Default random. */
  seed?: number;
  /** Stop starting new iterations after this long. Default 30 minutes. */
  timeLimitMs?: number;
  /** Progress lines. */
  log?: (line: string) => void;
  /**
   * Runs a deliberately broken writer, to show that the checker catches it:
   * `early-ack` acknowledges patches before sending them (lost writes),
   * `lost-unshare` acknowledges unshares it never sends (an alias that
   * outlives its grant). Default: an honest one.
   */
  brokenWriter?: "early-ack" | "lost-unshare";
  /**
   * Encryption keys (`_maintenance.ts`): `keys` opens the store with a fresh
   * key in the child and the checker; `encrypt` has the child write without
   * keys while `mcpstate encrypt` runs beside it and is SIGKILLed, then run
   * again to completion; `rotate` gives each iteration a new key in front of
   * the ring while `mcpstate keys rotate` runs beside the child and is
   * SIGKILLed, then run again, and the checker opens everything with the new
   * key alone. With keys the engine's storage must hold no plaintext of any
   * state (scanned after each of the first ten kills, every tenth after, and
   * at the end); without, the end's scan must find it (the scan's control).
   * Default `plain`.
   */
  keys?: KeyMode;
  /**
   * After every n-th iteration (0: never), erase one of its users with
   * `mcpstate erase --user U --yes`, SIGKILLed at a random moment, then run
   * it again to completion and check that nothing of the user is left and
   * the others are untouched (`_erase.ts`). Default 10.
   */
  eraseEvery?: number;
}

/** What {@link runCrash} found. */
export interface CrashReport extends VerifyCounts, EraseCounts, MaintenanceCounts {
  /** The backend. */
  backend: CrashBackend;
  /** How the run used encryption keys. */
  keys: KeyMode;
  /** Scans of the engine's whole storage for the states' plaintext. */
  plaintextScans: number;
  /** The master seed. */
  seed: number;
  /** Iterations run (each: one SIGKILL, one reopen, one verification). */
  iterations: number;
  /** Iterations whose kill landed before the child had opened the store. */
  killedDuringStartup: number;
  /** Iterations that also SIGKILLed the Redis server. */
  serverKills: number;
  /** Records re-checked at the end, across all iterations. */
  finalRecheck: number;
  /** Reopen times after a kill, ms. */
  reopenMs: { p50: number; max: number };
  /** Integrity checks of the database file that said `ok` (SQLite, Deno KV). */
  integrityOk: number;
  /** Redis restarts whose log mentions a truncated or damaged AOF. */
  aofRepairs: number;
  /**
   * Kills redone because a server this test does not control was unreachable
   * (another suite restarting the shared PostgreSQL), not counted in `iterations`.
   */
  externalOutages: number;
  /** Wall time, ms. */
  durationMs: number;
  /** Every violation, one line each; empty when everything held. */
  failures: string[];
}

interface Backend {
  url: string;
  /** Where the engine keeps its data, for the plaintext scan. */
  storage: Storage;
  /** The SQLite file to integrity-check, if any. */
  file?: string;
  redis?: RedisServer;
  cleanup: () => Promise<void>;
}

async function setUp(kind: CrashBackend): Promise<Backend> {
  switch (kind) {
    case "sqlite": {
      const dir = await Deno.makeTempDir({ prefix: "mcpstate-crash-" });
      return {
        url: `sqlite:///${dir}/state.db`,
        file: `${dir}/state.db`,
        storage: { sqlite: `${dir}/state.db` },
        cleanup: () => Deno.remove(dir, { recursive: true }),
      };
    }
    case "denokv": {
      const dir = await Deno.makeTempDir({ prefix: "mcpstate-crash-" });
      return {
        url: `denokv:///${dir}/state.kv`,
        file: `${dir}/state.kv`,
        storage: { denokv: `${dir}/state.kv` },
        cleanup: () => Deno.remove(dir, { recursive: true }),
      };
    }
    case "redis": {
      const redis = await startRedis({ config: { appendfsync: "always" } });
      return { url: redis.url, redis, storage: { redis }, cleanup: () => redis.stop() };
    }
    case "postgres": {
      const schema = `gauntlet_crash_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
      const url = new URL(POSTGRES_URL);
      url.searchParams.set("schema", schema);
      return {
        url: url.toString(),
        storage: { postgres: { url: POSTGRES_URL, schema } },
        cleanup: async () => {
          const sql = postgres(POSTGRES_URL, { max: 1, onnotice: () => {}, connect_timeout: 5 });
          try {
            await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          } finally {
            await sql.end();
          }
        },
      };
    }
  }
}

/** What the writer child is told (see `_crash_child.ts`). */
interface ChildArgs {
  url: string;
  user: string;
  lanes: number;
  seed: number;
  mode: "honest" | NonNullable<CrashOptions["brokenWriter"]>;
  /** The mark its states carry. */
  mark: string;
  /** Encryption keys, as `MCPSTATE_ENCRYPTION_KEYS`. */
  keys?: string;
  /** Operations left out of its mix. */
  skip: string[];
  /** Called once the child has opened the store. */
  onReady?: () => void;
}

/** Runs the child until the kill plan fires; returns every complete line it printed. */
async function runChild(
  a: ChildArgs,
  plan: { beforeReadyMs: number | null; afterReadyMs: number },
  killAlso: () => void,
): Promise<ChildRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      "--unstable-kv",
      CHILD,
      a.url,
      a.user,
      String(a.lanes),
      String(a.seed),
      a.mode,
      a.mark,
      a.skip.join(","),
    ],
    ...(a.keys ? { env: { MCPSTATE_ENCRYPTION_KEYS: a.keys } } : {}),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: Line[] = [];
  const ready = Promise.withResolvers<void>();
  const pumpOut = (async () => {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of child.stdout) {
      buf += dec.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = JSON.parse(buf.slice(0, nl)) as Line;
        buf = buf.slice(nl + 1);
        lines.push(line);
        if (line.t === "ready") {
          ready.resolve();
          a.onReady?.();
        }
      }
    }
    // A last line without its newline was cut by the kill: not acknowledged.
  })();
  let stderr = "";
  const pumpErr = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) stderr += dec.decode(chunk, { stream: true });
  })();
  let beforeReady = false;
  const exited = child.status.then(() => "exited" as const);
  const wait = async <T>(p: Promise<T>, ms: number): Promise<T | "timeout"> => {
    const t = timer(ms);
    try {
      return await Promise.race([p, t.done.then(() => "timeout" as const)]);
    } finally {
      t.cancel();
    }
  };
  if (plan.beforeReadyMs !== null) {
    const r = await wait(exited, plan.beforeReadyMs);
    beforeReady = r === "timeout" && !lines.some((l) => l.t === "ready");
  } else {
    const r = await wait(
      Promise.race([exited, ready.promise.then(() => "ready" as const)]),
      30_000,
    );
    if (r === "ready") await wait(exited, plan.afterReadyMs);
  }
  try {
    child.kill("SIGKILL");
  } catch {
    // it exited by itself; the status says how
  }
  killAlso();
  const status = await child.status;
  await pumpOut;
  await pumpErr;
  return { lines, stderr, pid: child.pid, beforeReady, status };
}

function integrityCheck(file: string): string {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const rows = db.prepare("PRAGMA integrity_check").all() as Record<string, unknown>[];
    return rows.map((r) => String(Object.values(r)[0])).join("; ");
  } finally {
    db.close();
  }
}

/** Later kills must not have disturbed earlier iterations' records: each is re-read. */
async function finalRecheck(
  url: string,
  keys: CrashKeys | undefined,
  allSeen: Seen[],
  report: CrashReport,
): Promise<void> {
  try {
    const store = await openStore(url, keys?.options);
    try {
      for (const seen of allSeen) {
        const s = await getOrNull(store, seen.handle, seen.user);
        report.finalRecheck++;
        if (
          (s?.version ?? null) !== seen.version ||
          (s ? canonical(s.state) : null) !== seen.state
        ) {
          report.failures.push(
            `final re-check: ${seen.handle} of ${seen.user} changed after its iteration`,
          );
        }
      }
    } finally {
      await store.close();
    }
  } catch (e) {
    report.failures.push(`final re-check failed: ${messageOf(e)}`);
  }
}

/**
 * The last scan of the engine's storage for the states' marks: with keys
 * none may be there; without, a mark of a state that was read back must be
 * (the control: the scan sees the engine's storage).
 */
async function finalScan(
  storage: Storage,
  encrypted: boolean,
  marks: string[],
  allSeen: Seen[],
  report: CrashReport,
): Promise<void> {
  try {
    const found = await plaintextIn(storage, marks);
    report.plaintextScans++;
    if (encrypted && found.length > 0) {
      report.failures.push(
        `end: plaintext of states in the engine's storage: ${found.slice(0, 5).join("; ")}`,
      );
    }
    const stored = allSeen.some((s) => s.state !== null && marks.some((m) => s.state!.includes(m)));
    if (!encrypted && stored && found.length === 0) {
      report.failures.push("end: the storage scan finds no state's mark in a store without keys");
    }
  } catch (e) {
    report.failures.push(`the storage scan failed: ${messageOf(e)}`);
  }
}

/**
 * Runs the crash-consistency test on one backend.
 *
 * @param options The backend, iteration count, timing.
 * @returns The report; `failures` is empty when everything held.
 */
export async function runCrash(options: CrashOptions): Promise<CrashReport> {
  const seed = options.seed ?? randomSeed();
  const rng = new Rng(seed);
  const lanes = options.lanes ?? 3;
  const maxRunMs = options.maxRunMs ?? 700;
  const serverKillEvery = options.serverKillEvery ?? 4;
  const timeLimit = options.timeLimitMs ?? 30 * 60_000;
  const log = options.log ?? (() => {});
  const started = performance.now();
  const failures: string[] = [];
  const report: CrashReport = {
    backend: options.backend,
    seed,
    iterations: 0,
    killedDuringStartup: 0,
    serverKills: 0,
    acknowledged: {},
    inFlight: { applied: 0, notApplied: 0 },
    inFlightOps: {},
    keys: options.keys ?? "plain",
    plaintextScans: 0,
    refused: 0,
    maintenanceRuns: 0,
    maintenanceFinished: 0,
    maintenanceResumed: 0,
    eraseRuns: 0,
    eraseTorn: 0,
    eraseFinished: 0,
    eraseSlices: 0,
    eraseLeftForSweep: 0,
    recordsChecked: 0,
    finalRecheck: 0,
    changelogsChecked: 0,
    aliasesRead: 0,
    forksChecked: 0,
    reopenMs: { p50: 0, max: 0 },
    integrityOk: 0,
    aofRepairs: 0,
    externalOutages: 0,
    durationMs: 0,
    failures,
  };
  const reopen: number[] = [];
  const allSeen: Seen[] = [];
  const ring = new KeyPlan(options.keys ?? "plain");
  const maintenance = ring.mode === "encrypt" || ring.mode === "rotate" ? ring.mode : undefined;
  /** The writer's refusals a run allows: a keyless writer's, once encrypt made a data key. */
  const refusable = new Set(maintenance === "encrypt" ? ["encryption_error"] : []);
  // A keyless restore or transfer racing encrypt is checked against the user's data key
  // before its move, not in its step: a restore of a trash copy sealed meanwhile is applied,
  // then answers no_key; a transfer of a record sealed meanwhile moves the ciphertext bound
  // to the old owner, which then reads tampered. Left out until they are refused whole.
  const skip = maintenance === "encrypt" ? ["restore", "transfer"] : [];
  /** How long the last maintenance run to completion took (when to kill the next). */
  let maintenanceMs = 300;
  const eraseEvery = options.eraseEvery ?? 10;
  /** The private HOME of the CLI's runs. */
  const home = eraseEvery > 0 || maintenance ? await tempHome() : undefined;
  let eraseDue = false;
  /** The marks of every iteration's states. */
  const marks: string[] = [];
  const backend = await setUp(options.backend);
  /** Waits (up to a minute) for a server that went away; `false` when it did not come back. */
  const outage = async (tag: string): Promise<boolean> => {
    report.externalOutages++;
    log(`${tag}: the server is unreachable (not this test's doing); waiting for it`);
    if (report.externalOutages > 10) {
      failures.push(`${tag}: the server went away more than 10 times; giving up`);
      return false;
    }
    const deadline = performance.now() + 60_000;
    while (performance.now() < deadline) {
      try {
        const s = await openStore(backend.url, ring.checker()?.options);
        await s.close();
        return true;
      } catch {
        await sleepMs(500);
      }
    }
    failures.push(`${tag}: the server did not come back within a minute`);
    return false;
  };
  try {
    for (let i = 0; i < options.iterations; i++) {
      if (performance.now() - started > timeLimit) {
        failures.push(`time limit reached after ${i} of ${options.iterations} iterations`);
        break;
      }
      const tag = `${options.backend} #${i}`;
      const user = `crash-${i}-${crypto.randomUUID().slice(0, 8)}`;
      const childSeed = rng.int(1, 2 ** 30);
      // The first kill, and one in ten after it, is aimed at the child's start-up
      // (loading, opening the store, and on the first run creating its schema).
      const early = i === 0 || rng.next() < 0.1;
      const killServer = backend.redis !== undefined && serverKillEvery > 0 &&
        i % serverKillEvery === serverKillEvery - 1;
      const plan = {
        beforeReadyMs: early ? rng.int(10, 300) : null,
        afterReadyMs: rng.int(0, maxRunMs),
      };
      let logBefore = 0;
      if (killServer) logBefore = (await backend.redis!.logTail(100_000)).length;
      let serverKilled: Promise<void> | undefined;
      const mark = freshMark();
      const command = maintenance && {
        mode: maintenance,
        url: backend.url,
        home: home!,
        keys: ring.command()!,
      };
      let maintained: Promise<void> | undefined;
      const childKeys = ring.child();
      const run = await runChild(
        {
          url: backend.url,
          user,
          lanes,
          seed: childSeed,
          mode: options.brokenWriter ?? "honest",
          mark,
          skip,
          ...(childKeys ? { keys: childKeys } : {}),
          // The maintenance command starts while the child writes, and is killed.
          ...(command
            ? {
              onReady: () => {
                const [start, kill] = [
                  rng.int(0, plan.afterReadyMs / 2),
                  rng.int(0, 2 * maintenanceMs),
                ];
                maintained = killedMaintenance(command, start, kill, report);
              },
            }
            : {}),
        },
        plan,
        () => {
          if (killServer) serverKilled = backend.redis!.kill();
        },
      );
      // A server this test does not control went away (another suite restarting the
      // shared PostgreSQL): that is not what is tested here; wait for it and redo the kill.
      const refusedByOutage = run.lines.some((l) =>
        l.t === "fail" && OUTAGE.test(String(l.message))
      );
      if (refusedByOutage || (!run.status.signal && OUTAGE.test(run.stderr))) {
        if (!await outage(tag)) break;
        i--;
        continue;
      }
      report.iterations++;
      if (run.beforeReady) report.killedDuringStartup++;
      if (serverKilled) {
        await serverKilled;
        await backend.redis!.restart();
        report.serverKills++;
        const newLog = (await backend.redis!.logTail(100_000)).slice(logBefore);
        if (/short read|truncated|Bad file format|corrupt/i.test(newLog)) report.aofRepairs++;
      }
      // A network server may still be finishing what the dead client sent last.
      if (options.backend === "redis" || options.backend === "postgres") await sleepMs(100);
      if (command) {
        // The killed command, then a run to completion with nothing else writing.
        await maintained;
        const done = await completeMaintenance(command, report);
        maintenanceMs = done.ms;
        if (done.problem) failures.push(`${tag}: ${command.mode}: ${done.problem}`);
      }
      const t0 = performance.now();
      let store: HandleStore;
      try {
        const opened = await within(
          openStore(backend.url, ring.checker()?.options),
          30_000,
          "timeout" as const,
        );
        if (opened === "timeout") throw new Error("it did not open within 30 s");
        store = opened;
      } catch (e) {
        if (OUTAGE.test(messageOf(e))) {
          report.iterations--;
          if (!await outage(tag)) break;
          i--;
          continue;
        }
        failures.push(`${tag}: the store did not open after the kill: ${messageOf(e)}`);
        continue;
      }
      const before = failures.length;
      // What the verification counts, to put back when an outage makes it start over.
      const counted: VerifyCounts = structuredClone({
        acknowledged: report.acknowledged,
        inFlight: report.inFlight,
        inFlightOps: report.inFlightOps,
        refused: report.refused,
        recordsChecked: report.recordsChecked,
        changelogsChecked: report.changelogsChecked,
        aliasesRead: report.aliasesRead,
        forksChecked: report.forksChecked,
      });
      let redo = false;
      let seen: Seen[] = [];
      try {
        // A first read proves the store is usable as it is.
        await store.list(user, { includeExpired: true });
        const reopened = performance.now() - t0;
        seen = await verify(store, { user, mark, tag, refusable }, run, report, failures);
        allSeen.push(...seen);
        reopen.push(reopened);
      } catch (e) {
        if (OUTAGE.test(messageOf(e))) redo = true;
        else failures.push(`${tag}: verification failed: ${messageOf(e)}`);
      } finally {
        await store.close().catch(() => {});
      }
      if (redo) {
        failures.length = before;
        Object.assign(report, counted);
        report.iterations--;
        if (!await outage(tag)) break;
        i--;
        continue;
      }
      if (backend.file) {
        const verdict = integrityCheck(backend.file);
        if (verdict === "ok") report.integrityOk++;
        else failures.push(`${tag}: integrity_check: ${verdict.slice(0, 300)}`);
      }
      marks.push(mark);
      if (ring.mode !== "plain" && (i < 10 || i % 10 === 9)) {
        // A killed keyless writer's uncommitted chunks are plaintext until sweep collects them.
        if (maintenance === "encrypt") await sweepCrashedChunks(backend.storage);
        const found = await plaintextIn(backend.storage, marks);
        report.plaintextScans++;
        if (found.length > 0) {
          failures.push(
            `${tag}: plaintext of states in the engine's storage: ${found.slice(0, 5).join("; ")}`,
          );
        }
      }
      // An iteration that left no record passes its erase on to the next.
      if (eraseEvery > 0 && i % eraseEvery === eraseEvery - 1) eraseDue = true;
      const holders = [...new Set(seen.filter((x) => x.version !== null).map((x) => x.user))];
      if (eraseDue && holders.length > 0) {
        eraseDue = false;
        await eraseKill(
          {
            url: backend.url,
            storage: backend.storage,
            home: home!,
            ...(ring.checker() ? { keys: ring.checker()!.env } : {}),
            open: () => openStore(backend.url, ring.checker()?.options),
            // The owner holds the shared counter and mints; the other what was moved to it.
            user: rng.pick(holders),
            seen,
            forked: new Set(run.lines.filter((l) => l.op === "fork").map((l) => l.h!)),
            rng,
            tag,
          },
          report,
          failures,
        ).catch((e) => failures.push(`${tag}: erase failed: ${messageOf(e)}`));
      }
      ring.done();
      if ((i + 1) % 25 === 0) {
        log(
          `${options.backend}: ${i + 1}/${options.iterations} kills, ${failures.length} failures`,
        );
      }
    }

    await finalRecheck(backend.url, ring.checker(), allSeen, report);
    if (maintenance === "encrypt") await sweepCrashedChunks(backend.storage);
    await finalScan(backend.storage, ring.mode !== "plain", marks, allSeen, report);
  } finally {
    await backend.cleanup().catch((e) => failures.push(`cleanup: ${messageOf(e)}`));
    if (home) await Deno.remove(home, { recursive: true }).catch(() => {});
  }
  reopen.sort((a, b) => a - b);
  report.reopenMs = { p50: round(quantile(reopen, 0.5)), max: round(reopen.at(-1) ?? NaN) };
  report.durationMs = Math.round(performance.now() - started);
  return report;
}
