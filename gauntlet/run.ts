/**
 * `deno task gauntlet`: every part of the gauntlet at full size — crash
 * consistency on every backend (without and with encryption keys), fuzzing
 * through a real MCP connection, HTTP abuse, and the soak — then
 * `docs/dev/gauntlet-run.md` with the figures.
 *
 * ```sh
 * deno task gauntlet                       # everything, full size, writes the report
 * deno task gauntlet --only crash,soak     # some parts (the report then covers only those)
 * deno task gauntlet --scale 0.05          # a quick run at 5% of the counts and durations
 * deno task gauntlet --out /dev/stdout     # write the report elsewhere
 * ```
 *
 * Exits 0 when everything held, 1 when anything failed (the report says what).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { HandleStore } from "../mod.ts";
import { type AbuseReport, runAbuse } from "./abuse.ts";
import { CRASH_BACKENDS, type CrashReport, runCrash } from "./crash.ts";
import { type FuzzReport, runFuzz } from "./fuzz.ts";
import { renderReport } from "./report.ts";
import { runSoak, type SoakReport } from "./soak.ts";
import { messageOf } from "./_util.ts";

/** Everything one run found, for the report. */
export interface GauntletResults {
  /** When the run started. */
  startedAt: Date;
  /** Wall time, ms. */
  durationMs: number;
  /** The size factor (1 = full). */
  scale: number;
  /** Runtime facts. */
  environment: { deno: string; os: string; cpus: number };
  /** Crash consistency, one per backend. */
  crash: CrashReport[];
  /** MCP fuzzing. */
  fuzz: FuzzReport | null;
  /** HTTP abuse. */
  abuse: AbuseReport | null;
  /** Soak, one per backend. */
  soak: SoakReport[];
  /** Parts that threw instead of reporting. */
  errors: string[];
  /** Direct probes of the bugs the gauntlet found, for the findings' status. */
  probes: { tinyTtl: "fixed" | "open" };
}

/**
 * Whether a touch with a TTL that rounds to 0 ms still lands while it is
 * reported as `handle_expired` (the bug the fuzzing found).
 */
export async function probeTinyTtl(): Promise<"fixed" | "open"> {
  // A clock that stands still: a 1 ms lifetime must not run out between the calls.
  const now = Date.now();
  const store = await HandleStore.fromUrl("memory://", {
    reclaimIntervalMs: 0,
    clock: () => now,
  });
  try {
    const h = await store.mint("probe", {}, { user: "probe" });
    try {
      await store.touch(h, { user: "probe", ttlDays: 1e-300 });
      return (await store.get(h, { user: "probe" })).version === 2 ? "fixed" : "open";
    } catch {
      const [after] = await store.list("probe", { includeExpired: true });
      return after?.version === 1 ? "fixed" : "open";
    }
  } finally {
    await store.close();
  }
}

/** Full-size settings. */
export const FULL = {
  crashKills: 200,
  /** Kills per backend of the run with encryption keys. */
  crashSealedKills: 100,
  /** Kills per backend of the runs that also kill `mcpstate encrypt` and `keys rotate`. */
  crashMaintenanceKills: 50,
  fuzzToolCalls: 5000,
  fuzzRawBodies: 5000,
  abuseRepeat: 20,
  abuseConnectionRounds: 5,
  abuseSlowBoundMs: 40_000,
  soakMs: 60_000,
  soakClients: 32,
} as const;

const PARTS = ["crash", "fuzz", "abuse", "soak"] as const;

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      only: { type: "string" },
      scale: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    console.log(
      "Usage: deno task gauntlet [--only crash,fuzz,abuse,soak] [--scale F] [--out FILE]",
    );
    Deno.exit(0);
  }
  const only = new Set(values.only ? values.only.split(",").map((s) => s.trim()) : PARTS);
  for (const p of only) {
    if (!(PARTS as readonly string[]).includes(p)) {
      console.error(`gauntlet: unknown part ${JSON.stringify(p)}; use ${PARTS.join(", ")}`);
      Deno.exit(2);
    }
  }
  const scale = values.scale === undefined ? 1 : Number(values.scale);
  if (!(scale > 0 && scale <= 1)) {
    console.error("gauntlet: --scale must be a number in (0, 1]");
    Deno.exit(2);
  }
  const out = values.out ?? new URL("../docs/dev/gauntlet-run.md", import.meta.url).pathname;
  const n = (x: number) => Math.max(1, Math.round(x * scale));
  const log = (line: string) =>
    console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
  const results: GauntletResults = {
    startedAt: new Date(),
    durationMs: 0,
    scale,
    environment: {
      deno: Deno.version.deno,
      os: `${Deno.build.os} ${Deno.build.arch}`,
      cpus: navigator.hardwareConcurrency,
    },
    crash: [],
    fuzz: null,
    abuse: null,
    soak: [],
    errors: [],
    probes: { tinyTtl: await probeTinyTtl() },
  };
  const t0 = performance.now();
  const guard = async (name: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (e) {
      results.errors.push(`${name}: ${messageOf(e)}`);
      log(`${name} failed to run: ${messageOf(e)}`);
    }
  };

  if (only.has("crash")) {
    for (const keys of ["plain", "keys", "encrypt", "rotate"] as const) {
      for (const backend of CRASH_BACKENDS) {
        const name = `crash ${backend}${keys === "plain" ? "" : ` (${keys})`}`;
        const kills = n(
          keys === "plain"
            ? FULL.crashKills
            : keys === "keys"
            ? FULL.crashSealedKills
            : FULL.crashMaintenanceKills,
        );
        await guard(name, async () => {
          log(`${name}: ${kills} kills`);
          const r = await runCrash({ backend, iterations: kills, keys, log });
          results.crash.push(r);
          log(`${name}: ${r.iterations} kills, ${r.failures.length} failures`);
        });
      }
    }
  }
  if (only.has("fuzz")) {
    await guard("fuzz", async () => {
      log(`fuzzing: ${n(FULL.fuzzToolCalls)} tool calls, ${n(FULL.fuzzRawBodies)} bodies`);
      results.fuzz = await runFuzz({
        toolCalls: n(FULL.fuzzToolCalls),
        rawBodies: n(FULL.fuzzRawBodies),
        log,
      });
      log(`fuzz: ${results.fuzz.failures.length} failures`);
    });
  }
  if (only.has("abuse")) {
    await guard("abuse", async () => {
      log("HTTP abuse");
      results.abuse = await runAbuse({
        repeat: n(FULL.abuseRepeat),
        connectionRounds: n(FULL.abuseConnectionRounds),
        slowBoundMs: FULL.abuseSlowBoundMs,
        log,
      });
      log(`abuse: ${results.abuse.failures.length} failures`);
    });
  }
  if (only.has("soak")) {
    for (const backend of ["sqlite", "redis"] as const) {
      await guard(`soak ${backend}`, async () => {
        log(`soak on ${backend}: ${n(FULL.soakMs) / 1000} s, ${FULL.soakClients} clients`);
        const r = await runSoak({
          backend,
          durationMs: n(FULL.soakMs),
          clients: FULL.soakClients,
          log,
        });
        results.soak.push(r);
        log(
          `soak ${backend}: ${r.totalCalls} calls, ${r.errors} errors, ${r.failures.length} failures`,
        );
      });
    }
  }
  results.durationMs = Math.round(performance.now() - t0);
  await Deno.writeTextFile(out, renderReport(results));
  // The report lives in the repository: keep it in the house format.
  await new Deno.Command(Deno.execPath(), {
    args: ["fmt", "--quiet", out],
    cwd: new URL("..", import.meta.url).pathname,
    stdout: "null",
    stderr: "null",
  }).output().catch(() => {});
  const failures = results.errors.length +
    results.crash.reduce((s, r) => s + r.failures.length, 0) +
    (results.fuzz?.failures.length ?? 0) + (results.abuse?.failures.length ?? 0) +
    results.soak.reduce((s, r) => s + r.failures.length, 0);
  log(`wrote the report; ${failures === 0 ? "everything held" : `${failures} failures`}`);
  Deno.exit(failures === 0 ? 0 : 1);
}
